import { getOperationAST } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';

/** `extensions.code` of a subscription sent over HTTP (docs/realtime.md). */
export const SUBSCRIPTION_OVER_HTTP = 'SUBSCRIPTION_OVER_HTTP';

/**
 * Subscriptions are served over WebSocket only (graphql-ws at `/graphql`, or the Pusher
 * protocol at `/app/{appkey}`): yoga's HTTP event streams (`Accept: text/event-stream`,
 * multipart) would skip every socket rule — identity re-checks, Session end, caps, Origin,
 * back-pressure. A subscription operation over HTTP is refused with 400 before it runs;
 * queries and mutations are untouched. Sockets reach yoga through `getEnveloped` with a
 * `socketContext`, which is how they are told apart.
 */
export function subscriptionsOverSocketsOnly(): Plugin {
  return {
    onParse() {
      return ({ result, context }) => {
        const { socketContext, params } = context as {
          socketContext?: unknown;
          params?: { operationName?: string | null };
        };
        if (socketContext || result instanceof Error) return;
        if (getOperationAST(result, params?.operationName)?.operation !== 'subscription') return;
        throw createGraphQLError(
          'Subscriptions are served over WebSocket only: graphql-ws (subprotocol graphql-transport-ws) at /graphql',
          { extensions: { code: SUBSCRIPTION_OVER_HTTP, http: { status: 400 } } },
        );
      };
    },
  };
}
