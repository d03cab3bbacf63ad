import { parentPort } from 'node:worker_threads';
import { afterEach, inject } from 'vitest';

/**
 * A setup file of the mutation run only (vitest.mutation.config.ts). In a mutant's run a test
 * fails after a few seconds (scripts/vitest-kept-worker.mjs), but the work of a test that timed
 * out may still be running (a loop the mutant made endless): the thread tells the kept-threads
 * pool (scripts/vitest-kept-threads.mjs), which ends it after the run instead of keeping it for
 * the next mutant.
 */
if ((inject as (key: string) => unknown)('mode') === 'mutant') {
  afterEach(({ task }) => {
    if (task.result?.errors?.some((error) => String(error.message).includes('timed out in')))
      parentPort?.postMessage({ parleyThreadSpoilt: true });
  });
}
