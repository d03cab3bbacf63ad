import type { GraphQLFormattedError } from 'graphql';
import { type Client, createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { WAIT_MS } from './wait.js';

/** A channel event as a subscriber receives it. */
export interface ReceivedEvent {
  /** Unique across channels (`<channel>:<position>`). */
  id: string;
  /** The resume position within the channel (`<ms>-<seq>`): what REST publish answers and `since` takes. */
  position: string;
  channel: string;
  event: string;
  // biome-ignore lint/suspicious/noExplicitAny: event payloads are free-form JSON that tests read field by field
  data: any;
  at: string;
}

export interface CloseInfo {
  code: number;
  reason: string;
}

export interface TestSocket {
  client: Client;
  /** Resolves when the server acknowledged `connection_init`; rejects when the socket closed first. */
  acked: Promise<void>;
  /** Resolves with the close code and reason when the socket closes (for whatever reason). */
  closed: Promise<CloseInfo>;
  /** Subscribes to `channel` (resuming after `since` when given). */
  channel(name: string, since?: string): ChannelSubscription;
  dispose(): Promise<void>;
}

const CHANNEL = `subscription Channel($name: String!, $since: String) {
  channel(name: $name, since: $since) { id position channel event data at }
}`;

/** Every socket a test opened, so `closeAllSockets()` can dispose of them (afterEach/afterAll). */
const open = new Set<TestSocket>();

/**
 * Opens a graphql-ws connection with `params` as the `connection_init` payload, no retries,
 * and headers (e.g. a cookie) on the upgrade request.
 */
export function connectSocket(
  wsUrl: string,
  params: Record<string, unknown>,
  opts: { headers?: Record<string, string> } = {},
): TestSocket {
  let onAck: () => void = () => {};
  let onAckFail: (e: unknown) => void = () => {};
  let onClosed: (c: CloseInfo) => void = () => {};
  const acked = new Promise<void>((resolve, reject) => {
    onAck = resolve;
    onAckFail = reject;
  });
  acked.catch(() => {});
  const closed = new Promise<CloseInfo>((resolve) => {
    onClosed = resolve;
  });
  class WithHeaders extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, { headers: opts.headers });
    }
  }
  const client = createClient({
    url: wsUrl,
    webSocketImpl: WithHeaders,
    connectionParams: params,
    lazy: false,
    retryAttempts: 0,
    onNonLazyError: () => {},
    on: {
      connected: () => onAck(),
      closed: (event) => {
        const { code, reason } = event as CloseInfo;
        const info = { code, reason: String(reason) };
        onAckFail(new Error(`socket closed before ack: ${code} ${reason}`));
        onClosed(info);
      },
    },
  });
  const socket: TestSocket = {
    client,
    acked,
    closed,
    channel: (name, since) => new ChannelSubscription(client, name, since),
    async dispose() {
      open.delete(socket);
      await client.dispose();
    },
  };
  open.add(socket);
  return socket;
}

export async function closeAllSockets() {
  await Promise.all([...open].map((s) => s.dispose()));
}

/** One `Subscription.channel` operation, recording what it receives. */
export class ChannelSubscription {
  events: ReceivedEvent[] = [];
  /** The position of the `subscribed` event a subscription without `since` starts with. */
  cursor: string | undefined;
  errors: readonly GraphQLFormattedError[] | undefined;
  /** Resolves when the subscription ends: `complete`, `error` (GraphQL errors) or `closed` (socket). */
  readonly ended: Promise<'complete' | 'error' | 'closed'>;
  private readonly stop: () => void;
  private waiters: (() => void)[] = [];

  constructor(client: Client, name: string, since?: string) {
    let end: (how: 'complete' | 'error' | 'closed') => void = () => {};
    this.ended = new Promise((resolve) => {
      end = resolve;
    });
    this.stop = client.subscribe<{ channel: ReceivedEvent }>(
      { query: CHANNEL, variables: { name, since } },
      {
        next: (result) => {
          if (result.errors) this.errors = [...result.errors];
          // The `subscribed` event is the resume position, not a published event: kept apart.
          if (result.data?.channel.event === 'subscribed') this.cursor = result.data.channel.position;
          else if (result.data) this.events.push(result.data.channel);
          this.notify();
        },
        error: (error) => {
          if (Array.isArray(error)) {
            this.errors = error as GraphQLFormattedError[];
            end('error');
          } else {
            end('closed');
          }
          this.notify();
        },
        complete: () => {
          end('complete');
          this.notify();
        },
      },
    );
  }

  private notify() {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Event names, in order of arrival. */
  names() {
    return this.events.map((e) => e.event);
  }

  /** Waits until `predicate` holds over the events received (checked on each arrival). */
  async until(predicate: (events: ReceivedEvent[]) => boolean, what = 'the expected events', timeoutMs = WAIT_MS) {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.events)) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `timed out waiting for ${what}; got ${JSON.stringify(this.names())} errors ${JSON.stringify(this.errors)}`,
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
    return this.events;
  }

  /** Waits for at least `n` events. */
  count(n: number) {
    return this.until((events) => events.length >= n, `${n} events`);
  }

  /** Waits for an event named `name` and returns it. */
  async waitFor(name: string, match: (e: ReceivedEvent) => boolean = () => true) {
    const events = await this.until((es) => es.some((e) => e.event === name && match(e)), `event ${name}`);
    return events.find((e) => e.event === name && match(e)) as ReceivedEvent;
  }

  unsubscribe() {
    this.stop();
  }
}

/** Waits until `check` resolves truthy (polling), or fails naming `what`. */
export async function eventually<T>(check: () => Promise<T> | T, what: string, timeoutMs = WAIT_MS): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A raw `graphql-transport-ws` socket, for what the client library would not do (stall, never init). */
export function rawSocket(wsUrl: string) {
  const ws = new WebSocket(wsUrl, 'graphql-transport-ws');
  const closed = new Promise<CloseInfo>((resolve) => {
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
  });
  const opened = new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return { ws, opened, closed };
}
