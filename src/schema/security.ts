import { blockFieldSuggestionsPlugin } from '@escape.tech/graphql-armor-block-field-suggestions';
import { costLimitPlugin } from '@escape.tech/graphql-armor-cost-limit';
import { maxAliasesPlugin } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthPlugin } from '@escape.tech/graphql-armor-max-depth';
import { maxDirectivesPlugin } from '@escape.tech/graphql-armor-max-directives';
import { maxTokensPlugin } from '@escape.tech/graphql-armor-max-tokens';
import { useDisableIntrospection } from '@graphql-yoga/plugin-disable-introspection';
import { getOperationAST } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import type { Config } from '../config.js';

/**
 * Limits every operation must pass, over HTTP and WebSocket alike (the socket server validates
 * through yoga's `getEnveloped`, so these plugins apply there too). Our deepest legitimate
 * query (the workbench) has depth 4 and costs about 150.
 */
export const GRAPHQL_LIMITS = {
  maxDepth: 8,
  maxAliases: 10,
  maxTokens: 1000,
  maxCost: 5000,
  maxDirectives: 20,
} as const;

/** Header a browser page sends on GraphQL GET requests (a simple cross-site request cannot). */
export const CSRF_HEADER = 'x-parley-csrf';

/**
 * Headers that make a request non-simple, so a browser sends it cross-site only after a CORS
 * preflight: ours, Apollo's (`apollo-require-preflight`, `x-apollo-operation-name`) and
 * graphql-yoga's default. Any one of them, with any value, lets a request through.
 */
export const CSRF_HEADERS = [CSRF_HEADER, 'apollo-require-preflight', 'x-apollo-operation-name', 'x-graphql-yoga-csrf'];

/** `extensions.code` of a request refused as a possible cross-site request forgery (HTTP 403). */
export const CSRF_REFUSED = 'CSRF_REFUSED';

// The content types a cross-site <form> or a "simple" fetch may send without a preflight.
const SIMPLE_CONTENT_TYPES = ['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain'];

/**
 * CSRF prevention for HTTP operations (docs/graphql.md "Cross-site requests"):
 * - a request with a non-simple `Content-Type` (JSON) or one of CSRF_HEADERS passes: a browser
 *   preflights it cross-site, and CORS answers only the allowed origins;
 * - a GET without either (urql's default, a link, an <img>) may run a **query** only: queries
 *   never write, a mutation over GET is refused anyway (405) and a subscription here is refused,
 *   and a page on another site cannot read the answer (no CORS grant);
 * - anything else (a form post, a `text/plain` fetch, a body without a type) is refused with
 *   403 and CSRF_REFUSED before it is parsed.
 * Sockets are not concerned: their upgrade is checked against the Origin allowlist.
 */
function csrfPrevention(): Plugin {
  const simpleGets = new WeakSet<object>();
  return {
    onRequestParse({ request }) {
      if (CSRF_HEADERS.some((name) => request.headers.has(name))) return;
      const type = request.headers.get('content-type')?.toLowerCase();
      if (type && !SIMPLE_CONTENT_TYPES.some((simple) => type.startsWith(simple))) return;
      if (request.method === 'GET') {
        simpleGets.add(request);
        return;
      }
      throw csrfRefused();
    },
    onParse() {
      return ({ result, context }) => {
        const { request, params } = context as { request?: object; params?: { operationName?: string | null } };
        if (!request || !simpleGets.has(request) || result instanceof Error) return;
        const operation = getOperationAST(result, params?.operationName);
        if (operation && operation.operation !== 'query') throw csrfRefused();
      };
    },
  };
}

function csrfRefused() {
  return createGraphQLError(
    `Cross-site request refused: send the operation as JSON (Content-Type: application/json) or with one of the headers ${CSRF_HEADERS.join(', ')}; a GET without them may run a query only`,
    { extensions: { code: CSRF_REFUSED, http: { status: 403 } } },
  );
}

export function securityPlugins(config: Pick<Config, 'env'>): Plugin[] {
  const production = config.env === 'production';
  const plugins: Plugin[] = [
    maxDepthPlugin({ n: GRAPHQL_LIMITS.maxDepth, exposeLimits: true, flattenFragments: true }),
    maxAliasesPlugin({ n: GRAPHQL_LIMITS.maxAliases, exposeLimits: true }),
    maxTokensPlugin({ n: GRAPHQL_LIMITS.maxTokens, exposeLimits: true }),
    costLimitPlugin({ maxCost: GRAPHQL_LIMITS.maxCost, exposeLimits: true }),
    maxDirectivesPlugin({ n: GRAPHQL_LIMITS.maxDirectives, exposeLimits: true }),
    // Cookie-authenticated operations must not be triggerable by a cross-site form or <img>.
    csrfPrevention(),
  ] as Plugin[];
  if (production) {
    plugins.push(useDisableIntrospection() as Plugin, blockFieldSuggestionsPlugin() as Plugin);
  }
  return plugins;
}
