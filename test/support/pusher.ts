import PusherModule, { type Channel, type Options } from 'pusher-js';
import WebSocket from 'ws';
import { WAIT_MS } from './wait.js';

/**
 * The real pusher-js (its Node build) against a started gateway. A browser sends the page's
 * cookies with a WebSocket upgrade by itself; pusher-js's Node runtime opens its sockets with
 * faye-websocket and no headers, so `browserCookie` plays the browser's cookie jar.
 */
export const browser = { cookie: undefined as string | undefined };

// pusher-js is CommonJS: the class is the module itself at run time, `default` in its typings.
type PusherClass = typeof PusherModule.default;
export type Pusher = InstanceType<PusherClass>;
const Pusher: PusherClass = (PusherModule as unknown as { default?: PusherClass }).default ?? (PusherModule as never);

type SocketClass = new (url: string, protocols?: unknown, options?: unknown) => object;
const runtime = (Pusher as unknown as { Runtime: { getWebSocketAPI(): SocketClass } }).Runtime;
const FayeClient = runtime.getWebSocketAPI();
runtime.getWebSocketAPI = () =>
  class WithCookie extends FayeClient {
    constructor(url: string, protocols?: unknown) {
      super(url, protocols, { headers: browser.cookie ? { cookie: browser.cookie } : {} });
    }
  };

/** Every client a test opened, so `disconnectAll()` can close them (afterEach). */
const open = new Set<Pusher>();

/**
 * A pusher-js client configured the way a legacy client reads the bootstrap: host and port from
 * `ws_address`, the `appkey`, plain ws; `authHeaders` are sent to the channel authorization
 * endpoint (a visitor's `Authorization: Bearer`, or an agent's `token`).
 */
export function pusherClient(
  wsAddress: string,
  appkey: string,
  opts: { authHeaders?: Record<string, string>; extra?: Partial<Options> } = {},
): Pusher {
  const address = new URL(wsAddress);
  const http = `http://${address.host}`;
  const pusher = new Pusher(appkey, {
    cluster: 'unused', // pusher-js requires one; wsHost and wsPort take precedence
    wsHost: address.hostname,
    wsPort: Number(address.port),
    forceTLS: false,
    enabledTransports: ['ws'],
    disableStats: true,
    channelAuthorization: {
      endpoint: `${http}/pusher/auth`,
      transport: 'ajax',
      headers: opts.authHeaders ?? {},
    },
    ...opts.extra,
  });
  open.add(pusher);
  return pusher;
}

export function disconnectAll() {
  for (const pusher of open) pusher.disconnect();
  open.clear();
}

/** Resolves when the client reaches `state` (connected, failed, unavailable …). */
export function reachState(pusher: Pusher, state: string, timeoutMs = 1.5 * WAIT_MS): Promise<void> {
  if (pusher.connection.state === state) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`pusher-js stayed ${pusher.connection.state}, never ${state}`)),
      timeoutMs,
    );
    const onChange = ({ current }: { current: string }) => {
      if (current !== state) return;
      clearTimeout(timer);
      pusher.connection.unbind('state_change', onChange);
      resolve();
    };
    pusher.connection.bind('state_change', onChange);
  });
}

/** What one channel of a client received: its events in order, and how its subscription went. */
export class ChannelRecorder {
  events: { event: string; data: unknown }[] = [];
  succeeded = false;
  error: { type?: string; error?: string; status?: number } | undefined;
  private waiters: (() => void)[] = [];

  constructor(readonly channel: Channel) {
    channel.bind('pusher:subscription_succeeded', () => {
      this.succeeded = true;
      this.notify();
    });
    channel.bind('pusher:subscription_error', (error: ChannelRecorder['error']) => {
      this.error = error;
      this.notify();
    });
    channel.bind_global((event: string, data: unknown) => {
      if (event.startsWith('pusher:')) return;
      this.events.push({ event, data });
      this.notify();
    });
  }

  private notify() {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits until `check` holds (re-checked on each thing the channel receives). */
  async until(check: () => boolean, what: string, timeoutMs = 1.5 * WAIT_MS) {
    const deadline = Date.now() + timeoutMs;
    while (!check()) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `timed out waiting for ${what} on ${this.channel.name}; events ${JSON.stringify(this.events)} error ${JSON.stringify(this.error)}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  subscribed() {
    return this.until(() => this.succeeded, 'pusher:subscription_succeeded');
  }

  async refused() {
    await this.until(() => this.error !== undefined, 'pusher:subscription_error');
    return this.error;
  }

  async waitFor(event: string) {
    await this.until(() => this.events.some((e) => e.event === event), `event ${event}`);
    return this.events.find((e) => e.event === event) as { event: string; data: unknown };
  }
}

/** Subscribes `pusher` to `name` and records it. */
export const record = (pusher: Pusher, name: string) => new ChannelRecorder(pusher.subscribe(name));

/** A raw Pusher-protocol socket, for what pusher-js would not send (a forged signature, no protocol). */
export function rawPusher(url: string, headers: Record<string, string> = {}) {
  const ws = new WebSocket(url, { headers });
  type Message = { event: string; channel?: string; data: unknown };
  const messages: Message[] = [];
  let wake: (() => void) | undefined;
  ws.on('message', (raw) => {
    const message = JSON.parse(String(raw));
    messages.push({ ...message, data: typeof message.data === 'string' ? JSON.parse(message.data) : message.data });
    wake?.();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
  });
  ws.on('error', () => {});
  /** Waits until `n` messages of `event` have arrived, and returns them all (at least one). */
  async function all(event: string, n = 1, timeoutMs = WAIT_MS): Promise<[Message, ...Message[]]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = messages.filter((m) => m.event === event);
      if (found.length >= Math.max(n, 1)) return found as [Message, ...Message[]];
      if (Date.now() > deadline) throw new Error(`no ${n} × ${event}; got ${JSON.stringify(messages)}`);
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, 100);
      });
    }
  }
  return {
    ws,
    closed,
    messages,
    send: (event: string, data: unknown) => ws.send(JSON.stringify({ event, data })),
    all,
    /** The first message of `event`, once it has arrived. */
    next: async (event: string, timeoutMs = WAIT_MS) => (await all(event, 1, timeoutMs))[0],
  };
}
