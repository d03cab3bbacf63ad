import type { Plugin } from 'graphql-yoga';
import type { Config } from '../config.js';
import { visitorRefusalHoldMs } from '../resolvers/budgets/refusal-hold.js';

/**
 * A visitor's RATE_LIMITED answer over HTTP is held as the REST endpoints hold theirs, by the one
 * rule (src/resolvers/budgets/refusal-hold.ts). Over a socket nothing is held (operations are
 * multiplexed there: holding one would not slow the next).
 */
export function heldVisitorRefusals(config: Pick<Config, 'hardening'>): Plugin {
  return {
    onExecute({ args }) {
      const ctx = args.contextValue as { identity?: string; socketContext?: unknown };
      if (ctx.identity !== 'visitor' || ctx.socketContext) return;
      return {
        onExecuteDone({ result }) {
          if (!('errors' in result) || !result.errors) return;
          const delay = visitorRefusalHoldMs(
            config,
            result.errors.map((error) => error.originalError),
          );
          if (delay > 0) return new Promise<void>((resolve) => setTimeout(resolve, delay));
        },
      };
    },
  };
}
