/**
 * How long a test waits by default for something that should come (an event, a state, a socket
 * message): 10 s, or TEST_WAIT_MS. The mutation runs shorten it (2 s for the domain's tests,
 * vitest.mutation.config.ts; 3 s for the API tests, vitest.mutation-adapters.config.ts): a mutant
 * that stops what a test waits for fails that test then, instead of running into Stryker's
 * timeout, which ends the test process and starts another.
 */
export const WAIT_MS = Number(process.env.TEST_WAIT_MS) || 10_000;
