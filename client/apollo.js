// @ts-check
/**
 * An Apollo Client link for Parley's channel subscriptions that loses nothing: each operation
 * runs on a `@parley/client` client, which reconnects by itself and resubscribes with `since` =
 * the last position delivered, so socket drops and server restarts neither lose nor repeat an
 * event. Use it where GraphQLWsLink would go (the `split` of subscriptions).
 */
import { ApolloLink } from '@apollo/client';
import { Observable } from 'rxjs';
import { channelOperation } from './operation.js';

/**
 * @typedef {object} ParleyLinkOptions
 * @property {import('./index.js').ParleyClient} client The client (`createParleyClient`) the subscriptions run on.
 * @property {(event: import('./index.js').ChannelEvent, operation: ApolloLink.Operation) => void} [onGap]
 *   Events were dropped from the server's history before this subscription came back: refetch
 *   what the channel feeds (e.g. `client.refetchQueries({ include: 'active' })`). Events carry on.
 */

/**
 * @param {ParleyLinkOptions} options
 * @returns {ApolloLink}
 */
export function createParleyLink({ client, onGap }) {
  return new ApolloLink(
    (operation) =>
      new Observable((observer) => {
        const prepared = channelOperation(operation.query, operation.variables, operation.operationName);
        if (!prepared) {
          observer.error(
            new Error('The Parley link serves subscriptions to `channel` only: route other operations to HttpLink'),
          );
          return undefined;
        }
        const subscription = client.subscribeOperation(prepared, {
          onEvent: (_event, result) => observer.next(result),
          onGap: (event) => onGap?.(event, operation),
          onError: ({ message, code }) => {
            observer.next({ errors: [{ message, extensions: code ? { code } : {} }] });
            observer.complete();
          },
        });
        return () => subscription.unsubscribe();
      }),
  );
}
