import WebSocket from 'ws';

/**
 * Many lightweight subscribers in the runner process: a minimal graphql-transport-ws client
 * (init, one subscribe), a minimal Pusher-protocol client (one `pusher:subscribe`) or a raw
 * socket for the floor, counting deliveries and their latency
 * (each benchmark event carries its publication time `t` in its data).
 */
export interface Subscribers {
  deliveries: number;
  latencies: number[];
  recordLatency: boolean;
  /**
   * With `sequence`: from now on every socket must get the benchmark events numbered `first`,
   * `first + 1`, … (their data's `n`; readiness probes are negative and ignored).
   */
  expectFrom(first: number): void;
  /** With `sequence`: the sockets that got exactly the events `first` … `end - 1`, each once, in order. */
  exactUpTo(end: number): number;
  close(): void;
}

const SUBSCRIBE = 'subscription($name:String!){channel(name:$name){id channel event data at}}';

export async function connectSubscribers(opts: {
  wsUrl: string;
  count: number;
  /** graphql-ws protocol with this init payload and channel; absent: raw floor socket. */
  graphql?: { init: Record<string, unknown>; channel: string };
  /** Pusher protocol (wsUrl is `…/app/{appkey}?protocol=7…`): subscribes to this channel; counts its `event` frames. */
  pusher?: { channel: string; event: string };
  /** Where a frame carries its publication time (default: the fan-out events' `"t":<ms>`). */
  stamp?: RegExp;
  /** Check each socket's sequence of event numbers (see `expectFrom`). */
  sequence?: boolean;
}): Promise<Subscribers> {
  // A Pusher frame carries `data` as a JSON string: its quotes are escaped.
  const stamp = opts.stamp ?? (opts.pusher ? /\\"t\\":(\d+)/ : /"t":(\d+)/);
  const pusherEvent = opts.pusher && `{"event":${JSON.stringify(opts.pusher.event)},`;
  // Per socket: the next event number it should get, and whether it got one out of sequence.
  const next: number[] = [];
  const wrong: boolean[] = [];
  let tracking = false;
  const subs: Subscribers = {
    deliveries: 0,
    latencies: [],
    recordLatency: false,
    expectFrom(first) {
      next.fill(first);
      wrong.fill(false);
      tracking = true;
    },
    exactUpTo: (end) => next.filter((n, i) => n === end && !wrong[i]).length,
    close: () => {},
  };
  const sockets: WebSocket[] = [];
  const onMessage = (slot: number) => (raw: WebSocket.RawData) => {
    const text = raw.toString();
    if (opts.graphql && !text.startsWith('{"id"')) return;
    if (pusherEvent && !text.startsWith(pusherEvent)) return;
    subs.deliveries++;
    if (tracking) {
      // `"n":5`, or `"n\":5` inside a Pusher frame's data string.
      const n = Number(/"n\\?":(-?\d+)/.exec(text)?.[1] ?? -1);
      if (n === next[slot]) next[slot] = n + 1;
      else if (n >= 0) wrong[slot] = true; // a duplicate, a gap or a reordering
    }
    if (subs.recordLatency) {
      const t = Number(stamp.exec(text)?.[1]);
      if (t) subs.latencies.push(Date.now() - t);
    }
  };
  const open = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const ws = opts.graphql ? new WebSocket(opts.wsUrl, 'graphql-transport-ws') : new WebSocket(opts.wsUrl);
      const slot = sockets.length;
      next.push(0);
      wrong.push(false);
      ws.once('close', (code, reason) => reject(new Error(`closed ${code} ${reason}`)));
      sockets.push(ws);
      ws.once('error', reject);
      ws.once('open', () => {
        if (opts.pusher) {
          const { channel } = opts.pusher;
          const received = onMessage(slot);
          ws.on('message', (raw) => {
            const text = raw.toString();
            if (text.includes('"pusher:connection_established"')) {
              ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel } }));
            } else if (text.includes('"pusher_internal:subscription_succeeded"')) {
              resolve();
            } else if (text.includes('"pusher:subscription_error"')) {
              reject(new Error(`not subscribed: ${text}`));
            } else {
              received(raw);
            }
          });
          return;
        }
        if (!opts.graphql) {
          ws.on('message', onMessage(slot));
          return resolve();
        }
        const { init, channel } = opts.graphql;
        ws.send(JSON.stringify({ type: 'connection_init', payload: init }));
        ws.once('message', (ack) => {
          if (!ack.toString().includes('connection_ack')) return reject(new Error(`not acked: ${ack}`));
          ws.send(
            JSON.stringify({
              id: 'sub',
              type: 'subscribe',
              payload: { query: SUBSCRIBE, variables: { name: channel } },
            }),
          );
          ws.on('message', onMessage(slot));
          resolve();
        });
      });
    });
  for (let i = 0; i < opts.count; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, opts.count - i) }, open));
  }
  subs.close = () => {
    for (const ws of sockets) ws.terminate();
  };
  return subs;
}
