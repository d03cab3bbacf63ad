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
export function createParleyLink({ client, onGap }: ParleyLinkOptions): ApolloLink;
export type ParleyLinkOptions = {
    /**
     * The client (`createParleyClient`) the subscriptions run on.
     */
    client: import("./index.js").ParleyClient;
    /**
     * Events were dropped from the server's history before this subscription came back: refetch
     * what the channel feeds (e.g. `client.refetchQueries({ include: 'active' })`). Events carry on.
     */
    onGap?: ((event: import("./index.js").ChannelEvent, operation: ApolloLink.Operation) => void) | undefined;
};
import { ApolloLink } from '@apollo/client';
