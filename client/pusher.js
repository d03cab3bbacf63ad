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
 *   visitor token) so `headers()` returns it; the channel is then subscribed again.
 */

/**
 * Subscribes to `name` and keeps it: the same `Channel` object (bind your events on it) across
 * reconnects and identity refreshes; the client reconnects promptly (`keepConnected`).
 * @param {{ subscribe(name: string): any } & Parameters<typeof keepConnected>[0]} pusher A pusher-js client.
 * @param {string} name
 * @param {KeepOptions} [options]
 */
export function keepChannel(pusher, name, options = {}) {
  let subscribedOnce = false;
  keepConnected(pusher);
  const channel = pusher.subscribe(name);
  channel.bind('pusher:subscription_succeeded', () => {
    if (subscribedOnce) options.onResubscribed?.();
    subscribedOnce = true;
  });
  channel.bind('pusher:subscription_error', async (/** @type {{ status?: number, type?: string }} */ error) => {
    if (!options.onIdentityGone || (error?.status !== 401 && error?.status !== 403)) return;
    // A refusal of the authorization endpoint leaves the channel idle (pusher-js clears
    // `subscriptionPending`). One the server sent for a subscription request leaves it pending:
    // that is the answer to a request another one replaced (a signature for the socket before a
    // reconnect, sent late by pusher-js), not a refused identity.
    if (channel.subscriptionPending) return;
    await options.onIdentityGone(error);
    pusher.subscribe(name); // the same Channel, authorized again with the refreshed headers
  });
  return channel;
}
