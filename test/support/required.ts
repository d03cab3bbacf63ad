import { describe, it } from 'vitest';

/** The variable CI sets to 1 so a missing service or tool fails instead of skipping. */
type RequiredBy = 'REQUIRE_SERVICES' | 'REQUIRE_FAULTS' | 'REQUIRE_NGINX';

/**
 * `describe` for tests that need something outside the process: a real PostgreSQL and Redis
 * (`DATABASE_URL`, `REDIS_URL`), the `redis-server` and `initdb` binaries of the fault tests, or
 * Debian's `nginx` (test/ops/nginx.test.ts).
 * Without it the suite is skipped with the reason in its name, or — when the `requiredBy`
 * variable is 1, as CI sets it — fails, so a missing service can never pass silently there.
 */
export function describeWhen(
  available: boolean,
  requiredBy: RequiredBy,
  name: string,
  missing: string,
  body: () => void,
) {
  if (available) return describe(name, body);
  if (process.env[requiredBy] === '1') {
    return describe(name, () => {
      it(`is required (${requiredBy}=1) but ${missing}`, () => {
        throw new Error(`${requiredBy}=1 but ${missing}`);
      });
    });
  }
  return describe.skip(`${name} (skipped: ${missing}; ${requiredBy}=1 turns this skip into a failure)`, body);
}

/** Whether this run has a real PostgreSQL and Redis (the second CI run). */
export const realServices = {
  postgres: Boolean(process.env.DATABASE_URL),
  redis: Boolean(process.env.REDIS_URL),
};

/** `it` for one test that needs something outside the process; see describeWhen. */
export function itWhen(
  available: boolean,
  requiredBy: RequiredBy,
  name: string,
  missing: string,
  fn: () => Promise<void>,
  timeout?: number,
) {
  if (available) return it(name, fn, timeout);
  if (process.env[requiredBy] === '1') {
    return it(`${name}: required (${requiredBy}=1) but ${missing}`, () => {
      throw new Error(`${requiredBy}=1 but ${missing}`);
    });
  }
  return it.skip(`${name} (skipped: ${missing}; ${requiredBy}=1 turns this skip into a failure)`, fn);
}
