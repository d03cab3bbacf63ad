import WebSocket from 'ws';

/**
 * Many lightweight subscribers in the runner process: a minimal graphql-transport-ws client
 * (init, one subscribe) or a raw socket for the floor, counting deliveries and their latency
 * (each benchmark event carries its publication time `t` in its data).
 */
export interface Subscribers {
  deliveries: number;
  latencies: number[];
  recordLatency: boolean;
  close(): void;
}

const SUBSCRIBE = 'subscription($name:String!){channel(name:$name){id channel event data at}}';

export async function connectSubscribers(opts: {
  wsUrl: string;
  count: number;
  /** graphql-ws protocol with this init payload and channel; absent: raw floor socket. */
  graphql?: { init: Record<string, unknown>; channel: string };
  /** Where a frame carries its publication time (default: the fan-out events' `"t":<ms>`). */
  stamp?: RegExp;
}): Promise<Subscribers> {
  const stamp = opts.stamp ?? /"t":(\d+)/;
  const subs: Subscribers = { deliveries: 0, latencies: [], recordLatency: false, close: () => {} };
  const sockets: WebSocket[] = [];
  const onMessage = (raw: WebSocket.RawData) => {
    const text = raw.toString();
    if (opts.graphql && !text.startsWith('{"id"')) return;
    subs.deliveries++;
    if (subs.recordLatency) {
      const t = Number(stamp.exec(text)?.[1]);
      if (t) subs.latencies.push(Date.now() - t);
    }
  };
  const open = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const ws = opts.graphql ? new WebSocket(opts.wsUrl, 'graphql-transport-ws') : new WebSocket(opts.wsUrl);
      sockets.push(ws);
      ws.once('error', reject);
      ws.once('open', () => {
        if (!opts.graphql) {
          ws.on('message', onMessage);
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
          ws.on('message', onMessage);
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
