import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Charge, Limit } from '../../src/stores/rate-limits.js';
import { answerOrRefusal } from '../support/budgets.js';
import { type TestDeps, testDeps } from '../support/deps.js';

/**
 * `consumeInOrder`: several limits charged as one (a send's message budgets, one Redis round trip),
 * counted exactly as the same limits' `consume` one after another would count them.
 */

let deps: TestDeps;
beforeAll(async () => {
  deps = await testDeps();
});

const limit = (points: number, durationSeconds = 60): Limit => ({
  name: `test-in-order-${randomBytes(4).toString('hex')}`,
  points,
  durationSeconds,
});
const charge = (l: Limit, subject: string, what: string): Charge => ({
  limit: l,
  subject,
  message: (wait) => `${what}: retry in ${wait} s`,
});

describe('charging several limits in order', () => {
  it('stops at the first limit spent: that one is counted and refused, the ones after it are not counted', async () => {
    const [a, b, c] = [limit(3), limit(1), limit(3)];
    const list = [charge(a, 's', 'a'), charge(b, 's', 'b'), charge(c, 's', 'c')];
    await deps.rateLimiter.consumeInOrder(list);
    await expect(deps.rateLimiter.consumeInOrder(list)).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: expect.stringMatching(/^b: retry in \d+ s$/),
    });
    // a counted twice (one point left), b over, c once (two points left).
    expect(await deps.rateLimiter(b).isBlocked('s')).toBeGreaterThan(0);
    await deps.rateLimiter(a).consume('s', () => 'a');
    expect(await answerOrRefusal(deps.rateLimiter(a).consume('s', () => 'a'))).toMatchObject({ code: 'RATE_LIMITED' });
    await deps.rateLimiter(c).consume('s', () => 'c');
    await deps.rateLimiter(c).consume('s', () => 'c');
    expect(await answerOrRefusal(deps.rateLimiter(c).consume('s', () => 'c'))).toMatchObject({ code: 'RATE_LIMITED' });
  });

  it('shares its counts with the limits’ own consume, per subject, and waits out the window of the one refused', async () => {
    const [a, b] = [limit(5, 3600), limit(2, 10)];
    await deps.rateLimiter(b).consume('x', () => 'b');
    await deps.rateLimiter.consumeInOrder([charge(a, 'x', 'a'), charge(b, 'x', 'b')]);
    const refused = await answerOrRefusal(deps.rateLimiter.consumeInOrder([charge(a, 'x', 'a'), charge(b, 'x', 'b')]));
    expect(refused).toMatchObject({ code: 'RATE_LIMITED' });
    const { retryAfter } = refused as { retryAfter: number };
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(10);
    // Another subject has budgets of its own.
    expect(await answerOrRefusal(deps.rateLimiter.consumeInOrder([charge(a, 'y', 'a'), charge(b, 'y', 'b')]))).toBe(
      'answered',
    );
    // A reset of the limit clears what the list counted.
    await deps.rateLimiter(b).reset('x');
    expect(await answerOrRefusal(deps.rateLimiter.consumeInOrder([charge(a, 'x', 'a'), charge(b, 'x', 'b')]))).toBe(
      'answered',
    );
  });
});
