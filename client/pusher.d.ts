/**
 * pusher-js with Parley. The Pusher protocol has no resume, so a channel kept by this module
 * tells the application each time it is subscribed again after a reconnect (`onResubscribed`):
 * that is when to reload what the channel feeds (the message history after the last `seq`
 * shown). Reloading earlier (on `connected`) misses what is published between the reconnect and
 * the new subscription. When the channel's authorization is refused (an agent Session the server
 * forgot, a revoked visitor token), `onIdentityGone` refreshes the identity and the channel is
 * subscribed again. Needs nothing but pusher-js 8.
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
export function pusherOptions({ wsAddress, origin, headers }: PusherIdentity): {
    cluster: string;
    wsHost: string;
    wsPort: number;
    wssPort: number;
    forceTLS: boolean;
    enabledTransports: ("ws" | "wss")[];
    disableStats: boolean;
    unavailableTimeout: number;
    channelAuthorization: {
        endpoint: string;
        transport: "ajax";
        headers: {};
        headersProvider: () => Record<string, string>;
    };
};
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
 * reconnects and identity refreshes.
 * @param {{ subscribe(name: string): any }} pusher A pusher-js client.
 * @param {string} name
 * @param {KeepOptions} [options]
 */
export function keepChannel(pusher: {
    subscribe(name: string): any;
}, name: string, options?: KeepOptions): any;
export type PusherIdentity = {
    /**
     * The bootstrap's `ws_address` (ws:// or wss://).
     */
    wsAddress: string;
    /**
     * The gateway's HTTP origin, for the channel authorization endpoint (absolute: Node and workers have no page origin).
     */
    origin: string;
    /**
     * The identity headers of `POST /pusher/auth`, read at every authorization (`{ token }` for an agent, `{ Authorization: 'Bearer …' }` for a visitor).
     */
    headers: () => Record<string, string>;
};
export type KeepOptions = {
    /**
     * The channel is subscribed again after a reconnect:
     * reload what it feeds (events published while it was away are not replayed by the protocol).
     */
    onResubscribed?: (() => void) | undefined;
    /**
     * The authorization was refused (401/403): refresh the identity (log in again, get a new
     * visitor token) so `headers()` returns it; the channel is then subscribed again.
     */
    onIdentityGone?: ((error: {
        status?: number;
        type?: string;
    }) => void | Promise<void>) | undefined;
};
