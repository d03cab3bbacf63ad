import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);
// PARLEY_TEST_BUILD=dist: the suite imports the compiled build (`npm run build`) instead of the
// TypeScript sources, so CI tests what production runs (`node dist/main.js`).
const compiled = process.env.PARLEY_TEST_BUILD === 'dist';

export default defineConfig({
  resolve: {
    alias: [
      // One copy of graphql, or schema objects from two realms fail instanceof checks.
      { find: 'graphql', replacement: require.resolve('graphql') },
      // New password hashes at argon2id's smallest cost (test/support/cheap-argon2.ts): the real
      // cost is about 11 ms of CPU per hash, paid for every agent a test makes; verify reads the
      // cost from the hash, so logins check real argon2id hashes as before.
      {
        find: /^@node-rs\/argon2$/,
        replacement: fileURLToPath(new URL('./test/support/cheap-argon2.ts', import.meta.url)),
      },
      ...(compiled ? [{ find: /^((?:\.\.\/)+)src\/(.*)$/, replacement: '$1dist/$2' }] : []),
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    // Builds the embedded database templates once per run (test/support/pglite-template.ts).
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // One module graph per worker, not per file: importing the gateway's modules costs seconds of
    // CPU, and no test relies on fresh module state (fake timers are restored in `finally`, apps
    // and sockets are stopped in afterAll).
    isolate: false,
    fileParallelism: true,
    maxWorkers: 2,
  },
});
