// @ts-check
/**
 * urql's subscription exchange for Parley's channel subscriptions that loses nothing: each
 * operation runs on a `@parley/client` client, which reconnects by itself and resubscribes with
 * `since` = the last position delivered, so socket drops and server restarts neither lose nor
 * repeat an event.
 */
import { subscriptionExchange } from '@urql/core';
import { channelOperation } from './operation.js';

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
export function parleySubscriptions({ client, onGap }) {
  return (request, operation) => ({
    subscribe(sink) {
      const prepared = request.query
        ? channelOperation(request.query, request.variables, request.operationName)
        : undefined;
      if (!prepared) {
        sink.error(new Error('The Parley exchange serves subscriptions to `channel` only'));
        return { unsubscribe() {} };
      }
      const subscription = client.subscribeOperation(prepared, {
        onEvent: (_event, result) => sink.next(result),
        onGap: (event) => onGap?.(event, operation),
        onError: ({ message, code }) => {
          sink.next({ errors: [{ message, extensions: code ? { code } : {} }] });
          sink.complete();
        },
      });
      return { unsubscribe: () => subscription.unsubscribe() };
    },
  });
}

/**
 * urql's `subscriptionExchange` over a Parley client: put it after `fetchExchange`'s siblings,
 * e.g. `exchanges: [cacheExchange, parleyExchange({ client: parley }), fetchExchange]`.
 * @param {ParleyExchangeOptions} options
 */
export function parleyExchange(options) {
  return subscriptionExchange({ forwardSubscription: parleySubscriptions(options) });
}
