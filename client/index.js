// @ts-check
/**
 * @parley/client — a small real-time client for Parley's channel subscriptions, on graphql-ws.
 *
 * It keeps every channel subscribed across socket drops and server restarts without losing or
 * repeating an event: it reconnects with backoff (refused connections included) and
 * resubscribes each channel with `since` = the last position it delivered, so the server
 * replays what was missed. See client/README.md for the published shape.
 */
import { createClient } from 'graphql-ws';

/**
 * The field of a channel event that `since` accepts: the per-channel resume position (`id` is
 * unique across channels, `<channel>:<position>`, for normalizing caches).
 */
export const POSITION_FIELD = 'position';

const FIELDS = `id ${POSITION_FIELD} channel event data at`;
const CHANNEL_SUBSCRIPTION = `subscription ParleyChannel($name: String!, $since: String) {
  channel(name: $name, since: $since) { ${FIELDS} }
}`;

/** Close codes of src/subscriptions/close-codes.ts that mean "this identity is gone". */
const IDENTITY_GONE = new Set([4401, 4403]);
/** Close codes after which reconnecting cannot help: the client itself is wrong. */
const FATAL = new Set([4400, 4409, 1007, 1009]);

/**
 * @typedef {{ appkey: string, token?: string, authorization?: string }} Identity
 *   The `connection_init` payload: an agent `{appkey, token}` (or `{appkey}` with the Session
 *   cookie in a browser), a visitor `{appkey, authorization: 'Bearer <visitor token>'}`.
 *
 * @typedef {{ id: string, position: string, channel: string, event: string, data: any, at: string }} ChannelEvent
 *
 * @typedef {{ code: number, reason: string }} CloseInfo
 *
 * @typedef {(
 *   | { state: 'connecting' }
 *   | { state: 'connected', resumed: boolean }
 *   | { state: 'reconnecting', attempt: number, delayMs: number, close?: CloseInfo }
 *   | { state: 'closed', close?: CloseInfo, error?: unknown }
 * )} Status
 *
 * @typedef {object} ChannelHandlers
 * @property {(event: ChannelEvent) => void} onEvent Every published event, in order, exactly once.
 * @property {(event: ChannelEvent) => void} [onGap] Events after the last one seen were dropped
 *   from the server's history: reload your state (the bootstrap), then carry on; events keep coming.
 * @property {(error: { message: string, code?: string }) => void} [onError] The server refused or
 *   ended this channel with an error (e.g. FORBIDDEN): it is not resubscribed.
 *
 * @typedef {object} ChannelOperation A subscription document of your own over the `channel` root
 *   field (what GraphQL libraries send): the client keeps its resume position and sets the `since`
 *   variable on every (re)subscription. Prepare a library's document with `@parley/client/operation`.
 * @property {string} query The document; its `channel` field takes `since: $<sinceVariable>` and selects `position` and `event`.
 * @property {Record<string, unknown>} variables Its variables.
 * @property {string} channel The channel it subscribes to.
 * @property {string} responseKey The response key of the `channel` field (its alias, or `channel`).
 * @property {string} sinceVariable The variable bound to the `since` argument.
 *
 * @typedef {object} OperationHandlers
 * @property {(event: ChannelEvent, result: { data: Record<string, unknown> }) => void} onEvent Every
 *   published event, in order, exactly once, with the whole execution result of the operation.
 * @property {(event: ChannelEvent) => void} [onGap] As for `subscribe`.
 * @property {(error: { message: string, code?: string }) => void} [onError] As for `subscribe`.
 *
 * @typedef {object} ChannelSubscription
 * @property {string} channel
 * @property {() => string | undefined} position The last position delivered (what `since` gets).
 * @property {() => void} unsubscribe
 *
 * @typedef {object} ParleyClientOptions
 * @property {string} url The `ws_address` of the bootstrap (ws:// or wss://, path /graphql).
 * @property {() => Identity | Promise<Identity>} identity Called before every connection.
 * @property {(close: CloseInfo) => void | Promise<void>} [onIdentityGone] The server closed the
 *   socket because the identity is gone (4401 Session ended, 4403 token revoked, expired or
 *   refused). Refresh it (log in again, fetch a new visitor token) so the next `identity()` call
 *   returns the new one; the client then reconnects and resumes. Without it, or when it throws,
 *   the client stops.
 * @property {(status: Status) => void} [onStatus]
 * @property {unknown} [webSocketImpl] A WebSocket class where there is no global one (Node 20: `ws`).
 * @property {number} [initialRetryDelayMs] First reconnect delay in ms (500 by default), doubled
 *   after each failed attempt up to maxRetryDelayMs, with jitter; back to it once connected.
 * @property {number} [maxRetryDelayMs] The longest reconnect delay in ms (15000 by default).
 * @property {number} [keepAliveMs] How often the client pings the server (20000 by default; 0: never).
 *   A socket whose pong does not come back within `keepAliveMs` is closed (4408) and replaced:
 *   a silently dead connection (a phone changing networks, a NAT forgetting it) is noticed.
 *
 * @typedef {object} ParleyClient
 * @property {(channel: string, handlers: ChannelHandlers, options?: { since?: string }) => ChannelSubscription} subscribe
 *   Subscribes to `channel` (resuming after `since` when given) and keeps it subscribed.
 * @property {(operation: ChannelOperation, handlers: OperationHandlers) => ChannelSubscription} subscribeOperation
 *   The same for a document of your own (the Apollo link and the urql exchange use it): resumes
 *   from the last position it delivered, or from the operation's own `since` at first.
 * @property {() => Promise<void>} close Unsubscribes everything and closes the socket for good.
 */

/**
 * Compares two positions of one channel: `<ms>-<seq>` part by part, a plain integer as a number;
 * NaN when they cannot be compared (then only equality is known).
 * @param {string} a
 * @param {string} b
 * @returns {number}
 */
export function comparePositions(a, b) {
  const pattern = /^\d+(-\d+)?$/;
  if (!pattern.test(a) || !pattern.test(b)) return a === b ? 0 : Number.NaN;
  const [am = 0n, as = 0n] = a.split('-').map(BigInt);
  const [bm = 0n, bs = 0n] = b.split('-').map(BigInt);
  if (am !== bm) return am < bm ? -1 : 1;
  if (as !== bs) return as < bs ? -1 : 1;
  return 0;
}

/**
 * Opens a Parley real-time client. Nothing connects until the first `subscribe`.
 * @param {ParleyClientOptions} options
 * @returns {ParleyClient}
 */
export function createParleyClient(options) {
  const initialDelay = options.initialRetryDelayMs ?? 500;
  const maxDelay = options.maxRetryDelayMs ?? 15_000;
  const keepAlive = options.keepAliveMs ?? 20_000;
  const status = options.onStatus ?? (() => {});

  /**
   * @typedef {object} ChannelEntry
   * @property {string} channel
   * @property {OperationHandlers} handlers
   * @property {string | undefined} last
   * @property {boolean} ended
   * @property {(since: string | null) => { query: string, variables: Record<string, unknown> }} payload
   * @property {string} responseKey
   * @property {() => void} [dispose]
   */
  /** Live subscriptions: by channel for `subscribe`, by a key of their own for `subscribeOperation`. @type {Map<unknown, ChannelEntry>} */
  const channels = new Map();
  /** @type {import('graphql-ws').Client | undefined} */
  let socketClient;
  let connectedOnce = false;
  let attempt = 0;
  let stopped = false;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let retryTimer;

  // One graphql-ws client per connection, without its own retries: graphql-ws would resend the
  // original subscribe payloads (without `since`) and gives up on a refused connection. Each new
  // connection subscribes every live channel afresh with `since` = its last position.
  function connect() {
    if (stopped || socketClient) return;
    status({ state: 'connecting' });
    /** @type {WebSocket | undefined} */
    let socket;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let pongDeadline;
    const client = createClient({
      url: options.url,
      connectionParams: async () => ({ ...(await options.identity()) }),
      retryAttempts: 0,
      lazy: false,
      onNonLazyError: () => {}, // reported by `closed` below
      ...(options.webSocketImpl ? { webSocketImpl: options.webSocketImpl } : {}),
      keepAlive,
      on: {
        opened: (opened) => {
          socket = /** @type {WebSocket} */ (opened);
        },
        // Our ping unanswered within keepAlive: the connection is dead without having said so.
        ping: (received) => {
          if (received || pongDeadline) return;
          pongDeadline = setTimeout(() => {
            if (socket?.readyState === 1) socket.close(4408, 'Pong timeout');
          }, keepAlive);
        },
        pong: (received) => {
          if (!received) return;
          clearTimeout(pongDeadline);
          pongDeadline = undefined;
        },
        connected: () => {
          attempt = 0;
          status({ state: 'connected', resumed: connectedOnce });
          connectedOnce = true;
        },
        closed: (event) => {
          clearTimeout(pongDeadline);
          onSocketClosed(client, closeInfo(event));
        },
      },
    });
    socketClient = client;
    for (const entry of channels.values()) if (!entry.ended) subscribeOn(client, entry);
  }

  /** @param {import('graphql-ws').Client} client @param {CloseInfo | undefined} close */
  async function onSocketClosed(client, close) {
    if (socketClient !== client) return;
    socketClient = undefined;
    for (const entry of channels.values()) entry.dispose = undefined;
    await disposeQuietly(client);
    if (stopped) return;
    if (close && FATAL.has(close.code)) return stop({ state: 'closed', close });
    if (close && IDENTITY_GONE.has(close.code)) {
      if (!options.onIdentityGone) return stop({ state: 'closed', close });
      try {
        await options.onIdentityGone(close);
      } catch (error) {
        return stop({ state: 'closed', close, error });
      }
    }
    scheduleReconnect(close);
  }

  /** @param {CloseInfo | undefined} close */
  function scheduleReconnect(close) {
    if (stopped || retryTimer || ![...channels.values()].some((entry) => !entry.ended)) return;
    const base = Math.min(initialDelay * 2 ** attempt, maxDelay);
    const delayMs = Math.round(base / 2 + Math.random() * (base / 2)); // jitter: instances restart together
    attempt += 1;
    status({ state: 'reconnecting', attempt, delayMs, ...(close ? { close } : {}) });
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      connect();
    }, delayMs);
  }

  /** @param {Status} final */
  function stop(final) {
    stopped = true;
    if (retryTimer) clearTimeout(retryTimer);
    retryTimer = undefined;
    status(final);
  }

  /**
   * @param {import('graphql-ws').Client} client
   * @param {ChannelEntry} entry
   */
  function subscribeOn(client, entry) {
    // A fresh payload per subscription: the resume position is explicit, never patched into an
    // object graphql-ws keeps.
    const payload = entry.payload(entry.last ?? null);
    let failed = false;
    entry.dispose = client.subscribe(payload, {
      next(result) {
        if (client !== socketClient || entry.ended) return;
        if (result.errors?.length) {
          failed = true;
          const [first] = result.errors;
          entry.ended = true;
          entry.handlers.onError?.({
            message: first?.message ?? 'Subscription refused',
            code: /** @type {string | undefined} */ (first?.extensions?.code),
          });
          return;
        }
        const event = /** @type {ChannelEvent | undefined} */ (result.data?.[entry.responseKey]);
        if (!event) return;
        const position = String(event[POSITION_FIELD]);
        if (event.event === 'history.gap') {
          entry.handlers.onGap?.(event);
          return;
        }
        // Replays start after `since`; this guards against a repeat all the same.
        if (entry.last !== undefined && (position === entry.last || comparePositions(position, entry.last) < 0)) return;
        entry.last = position;
        // `subscribed` only carries the starting position: never shown.
        if (event.event !== 'subscribed')
          entry.handlers.onEvent(event, { data: /** @type {Record<string, unknown>} */ (result.data) });
      },
      error(error) {
        // A closed socket reaches every sink: handled once, by `closed`.
        if (!Array.isArray(error) || client !== socketClient) return;
        failed = true;
        entry.ended = true;
        const [first] = /** @type {{ message?: string, extensions?: { code?: string } }[]} */ (error);
        entry.handlers.onError?.({ message: first?.message ?? 'Subscription failed', code: first?.extensions?.code });
      },
      complete() {
        // The server completes an agent's subscriptions after `session.ended`, then closes the
        // socket (4401): the channel is resubscribed once the identity is refreshed.
        if (failed) entry.ended = true;
      },
    });
  }

  /**
   * @param {unknown} key
   * @param {ChannelEntry} entry
   * @returns {ChannelSubscription}
   */
  function keep(key, entry) {
    if (stopped) throw new Error('This Parley client is closed');
    channels.set(key, entry);
    if (socketClient) subscribeOn(socketClient, entry);
    else if (!retryTimer) connect();
    return {
      channel: entry.channel,
      position: () => entry.last,
      unsubscribe() {
        entry.ended = true;
        entry.dispose?.();
        channels.delete(key);
      },
    };
  }

  return {
    subscribe(channel, handlers, subscribeOptions = {}) {
      if (channels.has(channel)) throw new Error(`Already subscribed to ${channel}`);
      return keep(channel, {
        channel,
        handlers,
        last: subscribeOptions.since,
        ended: false,
        responseKey: 'channel',
        payload: (since) => ({ query: CHANNEL_SUBSCRIPTION, variables: { name: channel, since } }),
      });
    },
    subscribeOperation(operation, handlers) {
      const { query, variables, channel, responseKey, sinceVariable } = operation;
      const since = variables[sinceVariable];
      return keep(Symbol(channel), {
        channel,
        handlers,
        last: typeof since === 'string' ? since : undefined,
        ended: false,
        responseKey,
        payload: (last) => ({ query, variables: { ...variables, [sinceVariable]: last } }),
      });
    },
    async close() {
      stop({ state: 'closed' });
      for (const entry of channels.values()) entry.dispose?.();
      channels.clear();
      const client = /** @type {import('graphql-ws').Client | undefined} */ (socketClient);
      socketClient = undefined;
      if (client) await disposeQuietly(client);
    },
  };
}

/**
 * graphql-ws's dispose awaits the pending connection and rejects with its close event when that
 * connection failed: already handled through `closed`.
 * @param {import('graphql-ws').Client} client
 */
async function disposeQuietly(client) {
  try {
    await client.dispose();
  } catch {}
}

/**
 * @param {unknown} event
 * @returns {CloseInfo | undefined}
 */
function closeInfo(event) {
  if (event && typeof event === 'object' && 'code' in event && typeof event.code === 'number') {
    return { code: event.code, reason: 'reason' in event ? String(event.reason) : '' };
  }
  return undefined;
}
