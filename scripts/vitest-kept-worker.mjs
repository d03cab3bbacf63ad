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

/** The runtime's listeners: its own message handler first, then the RPC channel of the current run. */
const listeners = [];
port.on('message', (message) => {
  // Each run's `start` opens a new RPC channel; the previous run's is done with.
  if (message?.__vitest_worker_request__ === true && message.type === 'start') listeners.splice(1);
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
