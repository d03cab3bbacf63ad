// @ts-check
/**
 * pusher-js with Parley. The Pusher protocol has no resume, so a channel kept by this module
 * tells the application each time it is subscribed again after a reconnect (`onResubscribed`):
 * that is when to reload what the channel feeds (the message history after the last `seq`
 * shown). Reloading earlier (on `connected`) misses what is published between the reconnect and
 * the new subscription. When the channel's authorization is refused (an agent Session the server
 * forgot, a revoked visitor token), `onIdentityGone` refreshes the identity and the channel is
 * subscribed again. A kept client also reconnects promptly once its server is back (see
 * `keepConnected`). Needs nothing but pusher-js 8.
 */

/**
 * @typedef {object} PusherIdentity
 * @property {string} wsAddress The bootstrap's `ws_address` (ws:// or wss://).
 * @property {string} origin The gateway's HTTP origin, for the channel authorization endpoint (absolute: Node and workers have no page origin).
 * @property {() => Record<string, string>} headers The identity headers of `POST /pusher/auth`, read at every authorization (`{ token }` for an agent, `{ Authorization: 'Bearer …' }` for a visitor).
 */

/**
 * The pusher-js options for a Parley gateway: its host and port (the TLS port too), the
 * absolute authorization endpoint, and a prompt retry while the gateway restarts.
 * @param {PusherIdentity} identity
 */
export function pusherOptions({ wsAddress, origin, headers }) {
  const address = new URL(wsAddress);
  const tls = address.protocol === 'wss:';
  const port = Number(address.port) || (tls ? 443 : 80);
  return {
    cluster: 'parley', // required by pusher-js; wsHost and the ports take precedence
    wsHost: address.hostname,
    wsPort: port,
    wssPort: port,
    forceTLS: tls,
    enabledTransports: /** @type {('ws' | 'wss')[]} */ (tls ? ['wss'] : ['ws']),
    disableStats: true,
    // `unavailable` 2 s into a connection attempt that has not succeeded (pusher-js: 10 s), which
    // is when keepConnected tries again (pusher-js alone would wait 15 s, then 30 s, then 60 s).
    unavailableTimeout: 2000,
    channelAuthorization: {
      endpoint: new URL('/pusher/auth', origin).href,
      transport: /** @type {const} */ ('ajax'),
      headers: {},
      headersProvider: headers,
    },
  };
}

/** The pusher-js clients keepConnected already watches. */
const kept = new WeakSet();

/**
 * Keeps a pusher-js client trying while its server is away. After a refused connection (a
 * restarting gateway refuses connections until it listens again), pusher-js waits out its own
 * attempt timeout before trying again: 15 s, then 30 s, then 60 s, so a client came back up to
 * a minute after its server. Here, each time the connection turns `unavailable` (the
 * `unavailableTimeout` of `pusherOptions`, 2 s into an attempt), a fresh attempt starts after a
 * short backoff with jitter (0.25–0.5 s, doubling up to `maxDelayMs`, 5 s, reset once connected);
 * the state passes through `disconnected` to `connecting` then. Channels are resubscribed by
 * pusher-js as on any reconnect. `keepChannel` calls this; calling it again is harmless.
 * @param {{ connection: { state: string, bind(event: 'state_change', callback: (change: { previous: string, current: string }) => void): unknown }, connect(): void, disconnect(): void }} pusher A pusher-js client.
 * @param {{ maxDelayMs?: number }} [options]
 */
export function keepConnected(pusher, { maxDelayMs = 5000 } = {}) {
  if (kept.has(pusher)) return;
  kept.add(pusher);
  let attempt = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  pusher.connection.bind('state_change', ({ current }) => {
    clearTimeout(timer);
    timer = undefined;
    if (current === 'connected') attempt = 0;
    if (current !== 'unavailable') return;
    const delay = Math.min(maxDelayMs, 500 * 2 ** attempt) * (0.5 + Math.random() / 2);
    attempt += 1;
    timer = setTimeout(() => {
      if (pusher.connection.state !== 'unavailable') return;
      pusher.disconnect();
      pusher.connect();
    }, delay);
  });
}

/**
 * @typedef {object} KeepOptions
 * @property {() => void} [onResubscribed] The channel is subscribed again after a reconnect:
 *   reload what it feeds (events published while it was away are not replayed by the protocol).
 * @property {(error: { status?: number, type?: string }) => void | Promise<void>} [onIdentityGone]
 *   The authorization was refused (401/403): refresh the identity (log in again, get a new
 *   visitor token) so `headers()` returns it; the channel is then subscribed again. When it
 *   throws (the gateway is away, say), the channel is authorized again later and, if still
 *   refused, it is called again.
 * @property {number} [maxDelayMs] The longest wait before authorizing again after a failed
 *   authorization (5000 by default; the first waits 0.25–0.5 s, doubling).
 */

/**
 * Subscribes to `name` and keeps it: the same `Channel` object (bind your events on it) across
 * reconnects and identity refreshes; the client reconnects promptly (`keepConnected`).
 * pusher-js authorizes a channel once per connection: when that fails it leaves the channel
 * unsubscribed on a connection that stays up, so every channel event is missed until the next
 * reconnect. Here a refused identity is refreshed (`onIdentityGone`) and any other failure — the
 * authorization endpoint unreachable (status 0, a restarting gateway), 429, 5xx — is retried
 * after a short backoff, until the channel is subscribed.
 * @param {{ subscribe(name: string): any, channel(name: string): any } & Parameters<typeof keepConnected>[0]} pusher A pusher-js client.
 * @param {string} name
 * @param {KeepOptions} [options]
 */
export function keepChannel(pusher, name, options = {}) {
  const { maxDelayMs = 5000 } = options;
  let subscribedOnce = false;
  let failures = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let retry;
  keepConnected(pusher);
  const channel = pusher.subscribe(name);
  // Subscribes again unless it is subscribed, a request is in flight, or the application
  // unsubscribed it; while disconnected pusher-js subscribes it on `connected` by itself.
  const subscribeAgain = () => {
    if (pusher.channel(name) !== channel || channel.subscribed || channel.subscriptionPending) return;
    pusher.subscribe(name);
  };
  const subscribeLater = () => {
    if (retry) return;
    const delay = Math.min(maxDelayMs, 500 * 2 ** failures) * (0.5 + Math.random() / 2);
    failures += 1;
    retry = setTimeout(() => {
      retry = undefined;
      subscribeAgain();
    }, delay);
  };
  channel.bind('pusher:subscription_succeeded', () => {
    failures = 0;
    clearTimeout(retry);
    retry = undefined;
    if (subscribedOnce) options.onResubscribed?.();
    subscribedOnce = true;
  });
  channel.bind('pusher:subscription_error', async (/** @type {{ status?: number, type?: string }} */ error) => {
    // A refusal of the authorization endpoint leaves the channel idle (pusher-js clears
    // `subscriptionPending`). One the server sent for a subscription request leaves it pending:
    // that is the answer to a request another one replaced (a signature for the socket before a
    // reconnect, sent late by pusher-js), not a refused identity.
    if (channel.subscriptionPending) return;
    const status = error?.status;
    // Unreachable (0, or no HTTP answer at all), over a budget, or failing: it will answer again.
    if (!status || status === 408 || status === 429 || status >= 500) return subscribeLater();
    if ((status !== 401 && status !== 403) || !options.onIdentityGone) return; // a bad request, or not allowed
    try {
      await options.onIdentityGone(error);
    } catch {
      return subscribeLater(); // authorized again later: refused again, the identity is refreshed again
    }
    subscribeAgain(); // the same Channel, authorized again with the refreshed headers
  });
  return channel;
}
