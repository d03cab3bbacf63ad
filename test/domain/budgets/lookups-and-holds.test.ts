import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Deps } from '../../../src/deps.js';
import { BackendUnavailableError, DomainError } from '../../../src/errors.js';
import { unknownAppkeys, visitorTokenFailures } from '../../../src/resolvers/budgets/failed-lookups.js';
import { visitorRefusalHoldMs } from '../../../src/resolvers/budgets/refusal-hold.js';
import { chargingInOrder, type Limit, type RateLimiter } from '../../../src/stores/rate-limits.js';
import { type TestDeps, useTestDeps } from '../../support/deps.js';

/**
 * The budgets on failed credential lookups per client address (failed-lookups.ts), on the real
 * limiter and on a scripted one (its store down, a refusal), and how long a visitor's refused
 * answer is held (refusal-hold.ts). Each test counts on addresses of its own.
 */
let deps: TestDeps;
useTestDeps((made) => ({ deps } = made));

const anAddress = () => `198.51.100.${randomUUID()}`;

/** The deps with the budgets' sizes set (VISITOR_TOKEN_FAILURES_PER_MINUTE, PUSHER_UNKNOWN_APPKEYS_PER_MINUTE). */
const withBudgets = (base: Deps, tokens: number, appkeys: number): Deps => ({
  ...base,
  config: {
    ...base.config,
    hardening: {
      ...base.config.hardening,
      visitorTokenFailuresPerMinute: tokens,
      pusherUnknownAppkeysPerMinute: appkeys,
    },
  },
});

/**
 * Deps whose limiter answers as scripted: `isBlocked` and `consume` each run the given step (a wait,
 * or an error to throw). Records the limits asked for and each `consume` (subject and message).
 */
function scripted(steps: { blocked?: () => number; consume?: () => void }) {
  const limits: Limit[] = [];
  const consumed: { subject: string; message: string }[] = [];
  const limiter = (limit: Limit): RateLimiter => {
    limits.push(limit);
    return {
      isBlocked: async () => steps.blocked?.() ?? 0,
      async consume(subject, message) {
        consumed.push({ subject, message: message(9) });
        steps.consume?.();
      },
      reset: async () => {},
      reward: async () => {},
    };
  };
  return { deps: withBudgets({ ...deps, rateLimiter: chargingInOrder(limiter) }, 3, 4), limits, consumed };
}

const storeDown = () => {
  throw new BackendUnavailableError('redis');
};
const bug = new Error('not a store failure');
const throwBug = () => {
  throw bug;
};

describe('failed lookups per client address: which budget, on whom', () => {
  it('visitorTokenFailures: visitor-token-failures, VISITOR_TOKEN_FAILURES_PER_MINUTE a minute, charged on the address', async () => {
    const { deps: d, limits, consumed } = scripted({});
    const address = anAddress();
    await visitorTokenFailures(d).charge(address);
    expect(limits).toEqual([{ name: 'visitor-token-failures', points: 3, durationSeconds: 60 }]);
    expect(consumed).toEqual([{ subject: address, message: 'invalid visitor tokens' }]);
  });

  it('unknownAppkeys: pusher-unknown-appkeys, PUSHER_UNKNOWN_APPKEYS_PER_MINUTE a minute, charged on the address', async () => {
    const { deps: d, limits, consumed } = scripted({});
    const address = anAddress();
    await unknownAppkeys(d).charge(address);
    expect(limits).toEqual([{ name: 'pusher-unknown-appkeys', points: 4, durationSeconds: 60 }]);
    expect(consumed).toEqual([{ subject: address, message: 'unknown appkeys' }]);
  });

  it('refuseIfSpent counts nothing', async () => {
    const { deps: d, consumed } = scripted({});
    await visitorTokenFailures(d).refuseIfSpent(anAddress());
    expect(consumed).toEqual([]);
  });
});

describe('refuseIfSpent: RATE_LIMITED with the wait while the address is past its budget', () => {
  it('a wait of 42 s: the refusal says what, and carries the wait', async () => {
    const { deps: d } = scripted({ blocked: () => 42 });
    await expect(visitorTokenFailures(d).refuseIfSpent(anAddress())).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: 'Too many invalid visitor tokens from this address: retry in 42 s',
      retryAfterSeconds: 42,
    });
    await expect(unknownAppkeys(d).refuseIfSpent(anAddress())).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: 'Too many unknown appkeys from this address: retry in 42 s',
      retryAfterSeconds: 42,
    });
  });

  it('a wait of 1 s is refused; no wait (0) lets the lookup run', async () => {
    const once = scripted({ blocked: () => 1 });
    await expect(visitorTokenFailures(once.deps).refuseIfSpent(anAddress())).rejects.toMatchObject({
      retryAfterSeconds: 1,
    });
    const none = scripted({ blocked: () => 0 });
    await expect(visitorTokenFailures(none.deps).refuseIfSpent(anAddress())).resolves.toBeUndefined();
  });

  it('the limiter’s store down lets the lookup run; any other failure is the caller’s', async () => {
    const down = scripted({ blocked: storeDown });
    await expect(visitorTokenFailures(down.deps).refuseIfSpent(anAddress())).resolves.toBeUndefined();
    const broken = scripted({ blocked: throwBug });
    await expect(visitorTokenFailures(broken.deps).refuseIfSpent(anAddress())).rejects.toBe(bug);
  });
});

describe('charge: a failure counted; a refusal or the store down is not the caller’s answer', () => {
  it('the budget already spent (a refusal) is swallowed: the failure itself is answered as such', async () => {
    const { deps: d } = scripted({
      consume: () => {
        throw new DomainError('RATE_LIMITED', 'spent', 30);
      },
    });
    await expect(visitorTokenFailures(d).charge(anAddress())).resolves.toBeUndefined();
  });

  it('the store down is swallowed; any other failure is the caller’s', async () => {
    const down = scripted({ consume: storeDown });
    await expect(unknownAppkeys(down.deps).charge(anAddress())).resolves.toBeUndefined();
    const broken = scripted({ consume: throwBug });
    await expect(unknownAppkeys(broken.deps).charge(anAddress())).rejects.toBe(bug);
  });
});

describe('on the real limiter', () => {
  /** The refusal of `refuseIfSpent`, or 'let through'. */
  const answer = (work: Promise<void>) =>
    work.then(
      () => 'let through' as const,
      (e: unknown) => {
        if (e instanceof DomainError) return e;
        throw e;
      },
    );

  it('an address is refused once it has spent its budget of failures, for the rest of the minute; another address is not', async () => {
    const failures = visitorTokenFailures(withBudgets(deps, 2, 1));
    const [address, other] = [anAddress(), anAddress()];
    expect(await answer(failures.refuseIfSpent(address))).toBe('let through');
    await failures.charge(address);
    expect(await answer(failures.refuseIfSpent(address))).toBe('let through');
    await failures.charge(address);
    const refused = await answer(failures.refuseIfSpent(address));
    expect(refused).toBeInstanceOf(DomainError);
    const { code, retryAfterSeconds, message } = refused as DomainError;
    expect(code).toBe('RATE_LIMITED');
    expect(retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(retryAfterSeconds).toBeLessThanOrEqual(60);
    expect(message).toBe(`Too many invalid visitor tokens from this address: retry in ${retryAfterSeconds} s`);
    // A failure past the budget is still answered as a failure (the refusal is swallowed).
    await expect(failures.charge(address)).resolves.toBeUndefined();
    expect(await answer(failures.refuseIfSpent(other))).toBe('let through');
  });

  it('the unknown appkeys have a budget of their own, of their own size', async () => {
    const d = withBudgets(deps, 2, 1);
    const address = anAddress();
    await unknownAppkeys(d).charge(address);
    expect(await answer(unknownAppkeys(d).refuseIfSpent(address))).toMatchObject({
      code: 'RATE_LIMITED',
      message: expect.stringMatching(/^Too many unknown appkeys from this address: retry in \d+ s$/),
    });
    expect(await answer(visitorTokenFailures(d).refuseIfSpent(address))).toBe('let through');
  });
});

describe('visitorRefusalHoldMs: a visitor’s refused answer held VISITOR_REFUSAL_DELAY_MS, at most its Retry-After', () => {
  const hardening = (visitorRefusalDelayMs: number) => ({
    hardening: { ...deps.config.hardening, visitorRefusalDelayMs },
  });
  const limited = (retryAfterSeconds?: number) => new DomainError('RATE_LIMITED', 'Too many', retryAfterSeconds);

  it('no error, nothing held', () => {
    expect(visitorRefusalHoldMs(hardening(3000), [])).toBe(0);
  });

  it('a RATE_LIMITED refusal: the delay, cut to its Retry-After', () => {
    expect(visitorRefusalHoldMs(hardening(3000), [limited(10)])).toBe(3000);
    expect(visitorRefusalHoldMs(hardening(3000), [limited(1)])).toBe(1000);
    expect(visitorRefusalHoldMs(hardening(3000), [limited(3)])).toBe(3000);
    expect(visitorRefusalHoldMs(hardening(0), [limited(5)])).toBe(0);
  });

  it('several refusals: the longest Retry-After bounds the hold, in any order', () => {
    expect(visitorRefusalHoldMs(hardening(10_000), [limited(5), limited(2)])).toBe(5000);
    expect(visitorRefusalHoldMs(hardening(10_000), [limited(2), limited(5)])).toBe(5000);
  });

  it('a RATE_LIMITED refusal without a Retry-After is not held', () => {
    expect(visitorRefusalHoldMs(hardening(3000), [limited()])).toBe(0);
    expect(visitorRefusalHoldMs(hardening(3000), [limited(), limited(2)])).toBe(2000);
  });

  it('anything but a RATE_LIMITED DomainError is not held, whatever wait it carries', () => {
    const others = [
      new DomainError('SERVICE_UNAVAILABLE', 'busy', 5),
      { code: 'RATE_LIMITED', retryAfterSeconds: 5 },
      new Error('RATE_LIMITED'),
      'RATE_LIMITED',
    ];
    for (const other of others) expect(visitorRefusalHoldMs(hardening(3000), [other])).toBe(0);
    expect(visitorRefusalHoldMs(hardening(3000), [...others, limited(2)])).toBe(2000);
  });
});
