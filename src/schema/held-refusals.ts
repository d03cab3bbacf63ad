import type { Plugin } from 'graphql-yoga';
import type { Config } from '../config.js';
import { DomainError } from '../errors.js';

/**
 * A visitor's RATE_LIMITED answer over HTTP is held `VISITOR_REFUSAL_DELAY_MS` (at most its
 * `retryAfter`) before it is written, as the REST endpoints hold theirs (src/rest/route.ts): a
 * flood's client that sends again as soon as it is refused makes one request a second per
 * connection instead of keeping the instance refusing as fast as it can. Over a socket nothing
 * is held (operations are multiplexed there: holding one would not slow the next).
 */
export function heldVisitorRefusals(config: Pick<Config, 'hardening'>): Plugin {
  return {
    onExecute({ args }) {
      const ctx = args.contextValue as { identity?: string; socketContext?: unknown };
      if (ctx.identity !== 'visitor' || ctx.socketContext) return;
      return {
        onExecuteDone({ result }) {
          if (!('errors' in result) || !result.errors) return;
          let retryAfterSeconds = 0;
          for (const error of result.errors) {
            const original = error.originalError;
            if (original instanceof DomainError && original.code === 'RATE_LIMITED')
              retryAfterSeconds = Math.max(retryAfterSeconds, original.retryAfterSeconds ?? 0);
          }
          const delay = Math.min(config.hardening.visitorRefusalDelayMs, retryAfterSeconds * 1000);
          if (delay > 0) return new Promise<void>((resolve) => setTimeout(resolve, delay));
        },
      };
    },
  };
}
