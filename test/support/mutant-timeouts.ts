import { parentPort } from 'node:worker_threads';
import { afterEach, inject, vi } from 'vitest';

/**
 * A setup file of the mutation run only (vitest.mutation.config.ts). In a mutant's run (not
 * Stryker's initial run, which is instrumented and keeps the domain config's generous timeouts), a
 * test that has not finished in MUTANT_TEST_TIMEOUT_MS fails: the mutant is killed in seconds
 * instead of running into Stryker's own timeout, which ends the test process and starts a new
 * one. The slowest domain test takes under 2 s.
 *
 * The timed-out test's work may still be running (a loop the mutant made endless), so the worker
 * thread tells the kept-threads pool (scripts/vitest-kept-threads.mjs), which ends it after the
 * run instead of keeping it for the next mutant.
 */
const MUTANT_TEST_TIMEOUT_MS = 5_000;

if ((inject as (key: string) => unknown)('mode') === 'mutant') {
  vi.setConfig({ testTimeout: MUTANT_TEST_TIMEOUT_MS });
  afterEach(({ task }) => {
    if (task.result?.errors?.some((error) => String(error.message).includes('timed out in')))
      parentPort?.postMessage({ parleyThreadSpoilt: true });
  });
}
