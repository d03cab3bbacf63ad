import type { Deps } from '../../deps.js';
import { BackendUnavailableError, DomainError } from '../../errors.js';
import type { Limit } from '../../stores/rate-limits.js';

/**
 * Budgets on failed credential lookups per client address (issue 27): an unknown or revoked
 * visitor token, or an unknown Pusher appkey, costs a database lookup that no cache can answer,
 * and anyone on the internet can make one. Only failures are counted (a real client's credential
 * never fails again and again); an address past its budget is refused RATE_LIMITED before the
 * lookup. The limiter's store being down is not the visitor's fault: the check then lets the
 * lookup run (the database answers as it did before the budget), rather than failing every
 * visitor request.
 */
export interface FailedLookups {
  /** RATE_LIMITED (with the wait) when `address` is past the budget; counts nothing. */
  refuseIfSpent(address: string): Promise<void>;
  /** Counts one failed lookup of `address`. */
  charge(address: string): Promise<void>;
}

function failedLookups(deps: Deps, limit: Limit, what: string): FailedLookups {
  const limiter = deps.rateLimiter(limit);
  const storeDown = (error: unknown) => {
    if (!(error instanceof BackendUnavailableError)) throw error;
  };
  return {
    async refuseIfSpent(address) {
      let wait = 0;
      try {
        wait = await limiter.isBlocked(address);
      } catch (error) {
        storeDown(error);
      }
      if (wait > 0)
        throw new DomainError('RATE_LIMITED', `Too many ${what} from this address: retry in ${wait} s`, wait);
    },
    async charge(address) {
      // The failure itself is answered as such; a refusal here only means the budget was already spent.
      await limiter
        .consume(address, () => what)
        .catch((error) => {
          if (error instanceof DomainError) return;
          storeDown(error);
        });
    },
  };
}

/** Failed visitor-token checks per client address: VISITOR_TOKEN_FAILURES_PER_MINUTE. */
export const visitorTokenFailures = (deps: Deps) =>
  failedLookups(
    deps,
    {
      name: 'visitor-token-failures',
      points: deps.config.hardening.visitorTokenFailuresPerMinute,
      durationSeconds: 60,
    },
    'invalid visitor tokens',
  );

/** Pusher upgrades naming an unknown appkey per client address: PUSHER_UNKNOWN_APPKEYS_PER_MINUTE. */
export const unknownAppkeys = (deps: Deps) =>
  failedLookups(
    deps,
    {
      name: 'pusher-unknown-appkeys',
      points: deps.config.hardening.pusherUnknownAppkeysPerMinute,
      durationSeconds: 60,
    },
    'unknown appkeys',
  );
