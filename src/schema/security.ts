import { blockFieldSuggestionsPlugin } from '@escape.tech/graphql-armor-block-field-suggestions';
import { costLimitPlugin } from '@escape.tech/graphql-armor-cost-limit';
import { maxAliasesPlugin } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthPlugin } from '@escape.tech/graphql-armor-max-depth';
import { maxDirectivesPlugin } from '@escape.tech/graphql-armor-max-directives';
import { maxTokensPlugin } from '@escape.tech/graphql-armor-max-tokens';
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import { useDisableIntrospection } from '@graphql-yoga/plugin-disable-introspection';
import type { Plugin } from 'graphql-yoga';
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

export function securityPlugins(config: Pick<Config, 'env'>): Plugin[] {
  const production = config.env === 'production';
  const plugins: Plugin[] = [
    maxDepthPlugin({ n: GRAPHQL_LIMITS.maxDepth, exposeLimits: true, flattenFragments: true }),
    maxAliasesPlugin({ n: GRAPHQL_LIMITS.maxAliases, exposeLimits: true }),
    maxTokensPlugin({ n: GRAPHQL_LIMITS.maxTokens, exposeLimits: true }),
    costLimitPlugin({ maxCost: GRAPHQL_LIMITS.maxCost, exposeLimits: true }),
    maxDirectivesPlugin({ n: GRAPHQL_LIMITS.maxDirectives, exposeLimits: true }),
    // Cookie-authenticated operations must not be triggerable by a cross-site form or <img>:
    // a request needs a non-simple content type (JSON, which forces a CORS preflight) or our header.
    useCSRFPrevention({ requestHeaders: [CSRF_HEADER] }),
  ] as Plugin[];
  if (production) {
    plugins.push(useDisableIntrospection() as Plugin, blockFieldSuggestionsPlugin() as Plugin);
  }
  return plugins;
}
