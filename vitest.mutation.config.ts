import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { closeKeptThreads, keptThreads } from './scripts/vitest-kept-threads.mjs';
import domain from './vitest.domain.config.js';

/**
 * What `npm run mutation` runs for each mutant: the domain-level tests (vitest.domain.config.ts)
 * on a pool whose worker thread outlives a run (scripts/vitest-kept-threads.mjs), so a mutant
 * costs its tests, not a new thread, the imports and a new database. Stryker's runner asks for
 * `pool: 'threads'` when it creates vitest; the plugin puts this pool back after that.
 * TEST_WAIT_MS shortens a test's waits (test/support/wait.ts): a mutant that stops an
 * event fails its test in 2 s instead of running into Stryker's timeout, which restarts vitest;
 * a test that hangs fails after 5 s (scripts/vitest-kept-worker.mjs).
 */
/** A part's own test files (stryker.config.mjs `tests`), else the config's set. */
export const partTests = (fallback: string[]) => process.env.PARLEY_MUTATION_TESTS?.split(',') ?? fallback;

export default defineConfig({
  ...domain,
  resolve: {
    ...domain.resolve,
    alias: [
      ...((domain.resolve?.alias as { find: string | RegExp; replacement: string }[] | undefined) ?? []),
      {
        find: /^@node-rs\/argon2$/,
        replacement: fileURLToPath(new URL('./test/support/cheap-argon2.ts', import.meta.url)),
      },
    ],
  },
  test: {
    ...domain.test,
    include: partTests(domain.test?.include ?? []),
    env: { ...domain.test?.env, TEST_WAIT_MS: '2000' },
    setupFiles: ['test/support/mutant-activation.ts', 'test/support/mutant-timeouts.ts'],
  },
  plugins: [
    {
      name: 'parley:kept-threads',
      configureVitest({ project, vitest }) {
        Object.assign(project.config, { pool: keptThreads.name, poolRunner: keptThreads });
        vitest.onClose(closeKeptThreads);
      },
    },
  ],
});
