import type { Request } from 'express';
import { GraphQLError } from 'graphql';
import { createYoga, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import type { Deps } from '../deps.js';
import { classifyError, DomainError, graphqlCodeOf, notLoggedIn } from '../errors.js';
import { bearerToken, clientIp, wsAddressFor } from '../http/request.js';
import { requestSessionPort, sessionDirectory } from '../http/session.js';
import { isApiKeyShaped } from '../ids.js';
import { loggableError } from '../log.js';
import { observabilityPlugin } from '../observability/graphql.js';
import { type ApiKeyViewer, authenticateApiKey } from '../resolvers/integration/api-keys/authenticate.js';
import { requireAgent, requireVisitor } from '../resolvers/viewer.js';
import type { GraphQLContext } from './builder.js';
import { graphqlJsExecution } from './execution.js';
import { heldVisitorRefusals } from './held-refusals.js';
import { schema } from './index.js';
import { securityPlugins } from './security.js';
import { subscriptionsOverSocketsOnly } from './subscription-transport.js';

/** Server context: the express request, or (for sockets) the context already built by ws.ts. */
interface ServerContext {
  req: Request;
  socketContext?: GraphQLContext;
}

export type GraphQLServer = YogaServerInstance<ServerContext, GraphQLContext>;

/**
 * graphql-yoga over the Pothos schema, mounted in express at /graphql so the Session
 * middleware has run; sockets reuse it through `getEnveloped` (src/subscriptions/ws.ts).
 * `extraPlugins`: e.g. the direct path's (src/schema/yoga-direct.ts).
 */
export function createGraphQLServer(deps: Deps, extraPlugins: Plugin[] = []): GraphQLServer {
  return createYoga<ServerContext, GraphQLContext>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    // CORS comes from the gateway's Origin allowlist (src/http/cors.ts), not yoga's reflect-all default.
    cors: false,
    // The in-browser IDE is a development tool: never served in test or production.
    graphiql: deps.config.env === 'development',
    logging: false,
    // One operation per request: batching would multiply every limit below.
    batching: false,
    plugins: [
      graphqlJsExecution(),
      ...securityPlugins(deps.config),
      observabilityPlugin(deps),
      subscriptionsOverSocketsOnly(),
      heldVisitorRefusals(deps.config),
      ...extraPlugins,
    ],
    context: ({ req, socketContext }) => socketContext ?? httpContext(deps, req),
    maskedErrors: { maskError: (error) => toGraphQLError(error, deps) },
  });
}

/**
 * One identity per request, never both merged: a request carrying a visitor bearer token is a
 * visitor (agent fields answer UNAUTHENTICATED even if a Session cookie rides along); one
 * carrying an API key (`prly_…`) is that key (agent and visitor fields refuse it).
 */
function httpContext(deps: Deps, req: Request): GraphQLContext {
  const bearer = bearerToken(req);
  const isKey = bearer !== undefined && isApiKeyShaped(bearer);
  // Bearer requests skip the Session middleware (app.ts): they have no agent Session.
  const session = bearer ? undefined : requestSessionPort(req);
  const address = clientIp(req, deps.config);
  let apiKey: Promise<ApiKeyViewer> | undefined;
  return {
    deps,
    agent: () => (session ? requireAgent(deps, session, address) : Promise.reject(notLoggedIn())),
    visitor: () => requireVisitor(deps, bearer, address),
    // Once per operation: one request counts once against the key's budget.
    apiKey: () => {
      apiKey ??= authenticateApiKey(deps, isKey ? bearer : undefined, address);
      return apiKey;
    },
    visitorToken: isKey ? undefined : bearer,
    session,
    identity: isKey ? 'apiKey' : bearer ? 'visitor' : 'agent',
    wsAddress: wsAddressFor(req, deps.config),
    clientIp: address,
    sessionDirectory: () => {
      if (!req.sessionStore) throw notLoggedIn();
      return sessionDirectory(req.sessionStore);
    },
  };
}

/**
 * Domain errors keep their message and get `extensions.code` (and `retryAfter` when limited);
 * GraphQL's own validation errors pass; anything else is masked as INTERNAL_SERVER_ERROR.
 */
export function toGraphQLError(error: unknown, deps: Deps): GraphQLError {
  const original = error instanceof GraphQLError ? (error.originalError ?? undefined) : error;
  // graphql-js's own errors (parse, validation, variable coercion — possibly wrapping a scalar's
  // GraphQLError) are about the client's request: kept, with BAD_USER_INPUT when they carry no code.
  if (error instanceof GraphQLError && (!original || (original as Error).name === 'GraphQLError')) {
    if (error.extensions?.code) return error;
    return new GraphQLError(error.message, {
      nodes: error.nodes,
      path: error.path,
      extensions: { ...error.extensions, code: 'BAD_USER_INPUT' },
    });
  }
  const domain = classifyError(original);
  if (!(original instanceof DomainError)) {
    deps.log.error({ err: loggableError(original) }, 'graphql resolver failed');
  }
  return new GraphQLError(domain.message, {
    path: error instanceof GraphQLError ? error.path : undefined,
    // Kept (never serialized) so a transport can recognise an error by its type (e.g. SlowConsumerError).
    originalError: original instanceof Error ? original : undefined,
    extensions: {
      code: graphqlCodeOf(domain.code),
      ...(domain.retryAfterSeconds ? { retryAfter: domain.retryAfterSeconds } : {}),
    },
  });
}
