// @ts-check
/**
 * A vitest pool for mutation testing whose worker thread outlives a run. Stryker's vitest runner
 * starts one vitest run per mutant, and vitest ends a pool's workers when a run ends, so every
 * mutant paid a new thread, the domain's imports and a new embedded database before its few
 * tests ran: most of a mutant's time. This pool parks the thread at the end of a run and hands it
 * to the next one (scripts/vitest-kept-worker.mjs keeps it listening). Test files are still
 * evaluated anew each run (vitest invalidates the files it runs); the modules they import, and
 * the worker's stores (test/support/deps.ts), are kept. A thread is replaced after KEPT_RUNS runs,
 * so whatever a run leaks stays bounded, and after a run in which a test timed out.
 *
 * Used by vitest.mutation.config.ts only; the suite itself runs on vitest's own pools.
 */
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';

const ENTRY = fileURLToPath(new URL('./vitest-kept-worker.mjs', import.meta.url));
const KEPT_RUNS = Number(process.env.VITEST_KEPT_RUNS ?? 250);

/**
 * A thread with the runs it served; spoilt when a test of its current run timed out
 * (test/support/mutant-timeouts.ts): that test's work may still be running in it.
 * @typedef {{ thread: Worker, runs: number, spoilt?: boolean }} KeptThread
 */

/** @type {KeptThread[]} threads parked between runs, with the runs they served */
const parked = [];

/** @implements {import('vitest/node').PoolWorker} */
class KeptThreadWorker {
  name = 'kept-threads';
  /** @type {KeptThread | undefined} */
  kept;
  /** @type {[string, (arg: any) => void][]} listeners the runner added, removed when it lets the thread go */
  listeners = [];

  /** @param {import('vitest/node').PoolOptions} options */
  constructor(options) {
    this.options = options;
    this.stdout = options.project.vitest.logger.outputStream;
    this.stderr = options.project.vitest.logger.errorStream;
  }

  get thread() {
    if (!this.kept) throw new Error('kept-threads: no thread (not started, or stopped)');
    return this.kept.thread;
  }

  /** @param {string} event @param {(arg: any) => void} listener */
  on(event, listener) {
    this.listeners.push([event, listener]);
    this.thread.on(event, listener);
  }

  /** @param {string} event @param {(arg: any) => void} listener */
  off(event, listener) {
    this.listeners = this.listeners.filter(([e, l]) => e !== event || l !== listener);
    this.thread.off(event, listener);
  }

  /** @param {unknown} message */
  send(message) {
    this.thread.postMessage(message);
  }

  /** @param {unknown} data */
  deserialize(data) {
    return data;
  }

  async start() {
    if (this.kept) return;
    this.kept = parked.pop() ?? this.newThread();
    this.kept.runs++;
    this.kept.thread.ref();
    this.kept.thread.stdout.pipe(this.stdout);
    this.kept.thread.stderr.pipe(this.stderr);
  }

  /** @returns {KeptThread} */
  newThread() {
    /** @type {KeptThread} */
    const kept = {
      thread: new Worker(ENTRY, {
        env: /** @type {Record<string, string>} */ (this.options.env),
        execArgv: this.options.execArgv,
        stdout: true,
        stderr: true,
      }),
      runs: 0,
    };
    kept.thread.on('message', (message) => {
      if (message?.parleyThreadSpoilt === true) kept.spoilt = true;
    });
    return kept;
  }

  async stop() {
    const kept = this.kept;
    if (!kept) return;
    this.kept = undefined;
    for (const [event, listener] of this.listeners) kept.thread.off(event, listener);
    this.listeners = [];
    kept.thread.stdout.unpipe(this.stdout);
    kept.thread.stderr.unpipe(this.stderr);
    if (!kept.spoilt && kept.runs < KEPT_RUNS && kept.thread.threadId !== -1) {
      kept.thread.unref(); // a parked thread does not keep the process alive
      parked.push(kept);
    } else await kept.thread.terminate();
  }
}

/** Ends the parked threads (when vitest closes). */
export async function closeKeptThreads() {
  await Promise.all(parked.splice(0).map(({ thread }) => thread.terminate()));
}

/** The pool, for `test.pool` (set by vitest.mutation.config.ts's plugin, after Stryker's overrides). */
export const keptThreads = {
  name: 'kept-threads',
  /** @param {import('vitest/node').PoolOptions} options */
  createPoolWorker: (options) => new KeptThreadWorker(options),
};
