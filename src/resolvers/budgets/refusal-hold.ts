import type { Config } from '../../config.js';
import { DomainError } from '../../errors.js';

/**
 * How long a visitor's answer over HTTP is held before it is written, given the errors it carries:
 * a RATE_LIMITED refusal waits `VISITOR_REFUSAL_DELAY_MS`, at most its `Retry-After` (the longest
 * of them, when a GraphQL answer carries several); anything else is not held (0). Anyone can be a
 * visitor, and a flood's client that sends again as soon as it is refused would otherwise keep the
 * instance refusing as fast as it can, the other merchants' requests waiting in line behind the
 * refusals (BENCHMARKS.md, chat flood). Held, each of its connections makes one request a second;
 * a held answer keeps nothing but the connection it came on (capped per address). The adapters
 * decide what is a visitor's answer over HTTP (src/rest/route.ts, src/schema/held-refusals.ts):
 * over a socket nothing is held, operations are multiplexed there.
 */
export function visitorRefusalHoldMs(config: Pick<Config, 'hardening'>, errors: readonly unknown[]): number {
  let retryAfterSeconds = 0;
  for (const error of errors)
    if (error instanceof DomainError && error.code === 'RATE_LIMITED')
      retryAfterSeconds = Math.max(retryAfterSeconds, error.retryAfterSeconds ?? 0);
  return Math.min(config.hardening.visitorRefusalDelayMs, retryAfterSeconds * 1000);
}
