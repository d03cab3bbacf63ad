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
export function comparePositions(a: string, b: string): number;
/**
 * Opens a Parley real-time client. Nothing connects until the first `subscribe`.
 * @param {ParleyClientOptions} options
 * @returns {ParleyClient}
 */
export function createParleyClient(options: ParleyClientOptions): ParleyClient;
/**
 * The field of a channel event that `since` accepts: the per-channel resume position (`id` is
 * unique across channels, `<channel>:<position>`, for normalizing caches).
 */
export const POSITION_FIELD: "position";
/**
 * The `connection_init` payload: an agent `{appkey, token}` (or `{appkey}` with the Session
 * cookie in a browser), a visitor `{appkey, authorization: 'Bearer <visitor token>'}`.
 */
export type Identity = {
    appkey: string;
    token?: string;
    authorization?: string;
};
export type ChannelEvent = {
    id: string;
    position: string;
    channel: string;
    event: string;
    data: any;
    at: string;
};
export type CloseInfo = {
    code: number;
    reason: string;
};
export type Status = ({
    state: "connecting";
} | {
    state: "connected";
    resumed: boolean;
} | {
    state: "reconnecting";
    attempt: number;
    delayMs: number;
    close?: CloseInfo;
} | {
    state: "closed";
    close?: CloseInfo;
    error?: unknown;
});
export type ChannelHandlers = {
    /**
     * Every published event, in order, exactly once.
     */
    onEvent: (event: ChannelEvent) => void;
    /**
     * Events after the last one seen were dropped
     * from the server's history: reload your state (the bootstrap), then carry on; events keep coming.
     */
    onGap?: ((event: ChannelEvent) => void) | undefined;
    /**
     * The server refused or
     * ended this channel with an error (e.g. FORBIDDEN): it is not resubscribed.
     */
    onError?: ((error: {
        message: string;
        code?: string;
    }) => void) | undefined;
};
/**
 * A subscription document of your own over the `channel` root
 * field (what GraphQL libraries send): the client keeps its resume position and sets the `since`
 * variable on every (re)subscription. Prepare a library's document with `@parley/client/operation`.
 */
export type ChannelOperation = {
    /**
     * The document; its `channel` field takes `since: $<sinceVariable>` and selects `position` and `event`.
     */
    query: string;
    /**
     * Its variables.
     */
    variables: Record<string, unknown>;
    /**
     * The channel it subscribes to.
     */
    channel: string;
    /**
     * The response key of the `channel` field (its alias, or `channel`).
     */
    responseKey: string;
    /**
     * The variable bound to the `since` argument.
     */
    sinceVariable: string;
};
export type OperationHandlers = {
    /**
     * Every
     * published event, in order, exactly once, with the whole execution result of the operation.
     */
    onEvent: (event: ChannelEvent, result: {
        data: Record<string, unknown>;
    }) => void;
    /**
     * As for `subscribe`.
     */
    onGap?: ((event: ChannelEvent) => void) | undefined;
    /**
     * As for `subscribe`.
     */
    onError?: ((error: {
        message: string;
        code?: string;
    }) => void) | undefined;
};
export type ChannelSubscription = {
    channel: string;
    /**
     * The last position delivered (what `since` gets).
     */
    position: () => string | undefined;
    unsubscribe: () => void;
};
export type ParleyClientOptions = {
    /**
     * The `ws_address` of the bootstrap (ws:// or wss://, path /graphql).
     */
    url: string;
    /**
     * Called before every connection.
     */
    identity: () => Identity | Promise<Identity>;
    /**
     * The server closed the
     * socket because the identity is gone (4401 Session ended, 4403 token revoked, expired or
     * refused). Refresh it (log in again, fetch a new visitor token) so the next `identity()` call
     * returns the new one; the client then reconnects and resumes. Without it, or when it throws,
     * the client stops.
     */
    onIdentityGone?: ((close: CloseInfo) => void | Promise<void>) | undefined;
    onStatus?: ((status: Status) => void) | undefined;
    /**
     * A WebSocket class where there is no global one (Node 20: `ws`).
     */
    webSocketImpl?: unknown;
    /**
     * First reconnect delay in ms (500 by default), doubled
     * after each failed attempt up to maxRetryDelayMs, with jitter; back to it once connected.
     */
    initialRetryDelayMs?: number | undefined;
    /**
     * The longest reconnect delay in ms (15000 by default).
     */
    maxRetryDelayMs?: number | undefined;
    /**
     * How often the client pings the server (20000 by default; 0: never).
     * A socket whose pong does not come back within `keepAliveMs` is closed (4408) and replaced:
     * a silently dead connection (a phone changing networks, a NAT forgetting it) is noticed.
     */
    keepAliveMs?: number | undefined;
};
export type ParleyClient = {
    /**
     * Subscribes to `channel` (resuming after `since` when given) and keeps it subscribed.
     */
    subscribe: (channel: string, handlers: ChannelHandlers, options?: {
        since?: string;
    }) => ChannelSubscription;
    /**
     * The same for a document of your own (the Apollo link and the urql exchange use it): resumes
     * from the last position it delivered, or from the operation's own `since` at first.
     */
    subscribeOperation: (operation: ChannelOperation, handlers: OperationHandlers) => ChannelSubscription;
    /**
     * Unsubscribes everything and closes the socket for good.
     */
    close: () => Promise<void>;
};
