/**
 * @typedef {object} ParleyExchangeOptions
 * @property {import('./index.js').ParleyClient} client The client (`createParleyClient`) the subscriptions run on.
 * @property {(event: import('./index.js').ChannelEvent, operation: import('@urql/core').Operation) => void} [onGap]
 *   Events were dropped from the server's history before this subscription came back: re-run the
 *   queries the channel feeds. Events carry on.
 */
/**
 * The `forwardSubscription` of urql's `subscriptionExchange`.
 * @param {ParleyExchangeOptions} options
 * @returns {import('@urql/core').SubscriptionForwarder}
 */
export function parleySubscriptions({ client, onGap }: ParleyExchangeOptions): import("@urql/core").SubscriptionForwarder;
/**
 * urql's `subscriptionExchange` over a Parley client: put it after `fetchExchange`'s siblings,
 * e.g. `exchanges: [cacheExchange, parleyExchange({ client: parley }), fetchExchange]`.
 * @param {ParleyExchangeOptions} options
 */
export function parleyExchange(options: ParleyExchangeOptions): import("@urql/core").Exchange;
export type ParleyExchangeOptions = {
    /**
     * The client (`createParleyClient`) the subscriptions run on.
     */
    client: import("./index.js").ParleyClient;
    /**
     * Events were dropped from the server's history before this subscription came back: re-run the
     * queries the channel feeds. Events carry on.
     */
    onGap?: ((event: import("./index.js").ChannelEvent, operation: import("@urql/core").Operation) => void) | undefined;
};
