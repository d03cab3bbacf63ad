// @ts-check
/**
 * The worker thread of the kept-threads pool (scripts/vitest-kept-threads.mjs): vitest's own
 * worker runtime (`vitest/worker`), except that a `stop` leaves the thread listening, so the
 * next run (the next mutant) finds the modules it imported and the stores it opened.
 */
import { parentPort } from 'node:worker_threads';
import { init, runBaseTests, setupEnvironment } from 'vitest/worker';

if (!parentPort) throw new Error('vitest-kept-worker runs in a worker thread');
const port = parentPort;

/**
 * In a mutant's run (not Stryker's initial run, which is instrumented and keeps the config's
 * generous timeouts), a test that has not finished in MUTANT_TEST_TIMEOUT_MS (5 s; the API tests of
 * the adapters' parts take PARLEY_MUTANT_TEST_TIMEOUT_MS, stryker.config.mjs) fails: the mutant is
 * killed in seconds instead of running into Stryker's own timeout, which ends the test process
 * and starts a new one. The slowest domain test takes under 2 s. (Not `vi.setConfig`: vitest
 * restores, after every file, the config it saw at the first such call, which in a kept thread is
 * the first mutant's, test filter included.)
 */
const MUTANT_TEST_TIMEOUT_MS = Number(process.env.PARLEY_MUTANT_TEST_TIMEOUT_MS) || 5_000;

/** The runtime's listeners: its own message handler first, then the RPC channel of the current run. */
const listeners = [];
/** The config of the current run, as its `start` message brought it. */
let runConfig;
port.on('message', (message) => {
  if (message?.__vitest_worker_request__ === true) {
    // Each run's `start` opens a new RPC channel; the previous run's is done with.
    if (message.type === 'start') {
      listeners.splice(1);
      runConfig = message.context?.config;
    }
    if (message.type === 'run' && message.context?.providedContext?.mode === 'mutant' && runConfig)
      message.context.config = { ...runConfig, testTimeout: MUTANT_TEST_TIMEOUT_MS };
  }
  for (const listener of [...listeners]) listener(message);
});

init({
  post: (message) => port.postMessage(message),
  on: (listener) => {
    listeners.push(listener);
  },
  off: (listener) => {
    const index = listeners.indexOf(listener);
    if (index >= 0) listeners.splice(index, 1);
  },
  // vitest's thread worker removes its listeners here and waits to be terminated; this one waits
  // for the next run instead.
  teardown: () => {},
  runTests: (state, traces) => runBaseTests('run', state, traces),
  collectTests: (state, traces) => runBaseTests('collect', state, traces),
  setup: setupEnvironment,
});
