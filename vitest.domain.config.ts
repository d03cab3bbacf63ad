import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * The fast domain-level tests: no HTTP server, real stores through test/support/deps.ts (or the
 * bus itself). `npm run mutation` runs Stryker over src/resolvers/ and src/stores/bus.ts with
 * these; `npx vitest run -c vitest.domain.config.ts` runs them alone. Only tests of the domain
 * and the bus belong here: an adapter's test (src/schema/, src/subscriptions/, src/rest/) tests
 * code Stryker does not mutate, and would fail every mutation run whenever its adapter changes
 * (Stryker's sandbox is a copy of the working tree, uncommitted edits included).
 */
export const DOMAIN_TESTS = ['test/domain/**/*.test.ts'];

// Spread, not mergeConfig: that would append these globs to the base's `test/**/*.test.ts`.
// Generous timeouts: Stryker's initial run is instrumented and this machine is shared, and one
// timed-out test there aborts the whole run (a mutant that hangs is caught by Stryker's own timeout).
export default defineConfig({
  ...base,
  test: { ...base.test, include: DOMAIN_TESTS, testTimeout: 120_000, hookTimeout: 240_000 },
});
