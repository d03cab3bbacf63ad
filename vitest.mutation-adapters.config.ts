import { defineConfig } from 'vitest/config';
import mutation, { partTests } from './vitest.mutation.config.js';

/**
 * What the adapters' part of `npm run mutation` runs for each mutant (scripts/mutation.mjs, group
 * `adapters`): besides the domain tests, the transport unit tests and the API tests, which start
 * the gateway in-process (test/support/test-app.ts) and read it through REST, GraphQL, WebSocket
 * and Pusher. The pool, the argon2 alias and the mutant timeouts are vitest.mutation.config.ts's. Left out, each because a mutant's run cannot use it: the fuzzer
 * (random requests, no fixed answer to compare), the tests that spawn another process (its
 * coverage is not Stryker's) or build packages. The slow-header tests (test/api/slow-headers.test.ts,
 * 1 s deadlines with seconds of slack) run in the `http` part only, which names them.
 */
export const ADAPTER_TESTS = ['test/domain/**/*.test.ts', 'test/unit/**/*.test.ts', 'test/api/**/*.test.ts'];
export const ADAPTER_EXCLUDED = [
  'test/api/fuzz.test.ts',
  'test/api/bot-example.test.ts',
  'test/api/client-package.test.ts',
];

export default defineConfig({
  ...mutation,
  test: {
    ...mutation.test,
    include: partTests(ADAPTER_TESTS),
    // A wait for an event or a socket message (test/support/wait.ts) fails after 3 s, not the
    // domain's 2: these parts run 4 test processes on two cores (stryker.config.mjs).
    env: { ...mutation.test?.env, TEST_WAIT_MS: '3000' },
    exclude: [...(mutation.test?.exclude ?? ['**/node_modules/**']), ...ADAPTER_EXCLUDED],
  },
});
