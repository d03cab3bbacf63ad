// Preloaded into a benchmarked server (`node --import ./bench/elu-probe.mjs`): writes its cumulative
// event-loop utilisation to BENCH_ELU_FILE four times a second, so the runner can compute the
// utilisation of any window without touching the server's code. Plain JS: it loads before tsx.
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const file = process.env.BENCH_ELU_FILE;
if (file) {
  const timer = setInterval(() => {
    const { idle, active } = performance.eventLoopUtilization();
    writeFileSync(file, JSON.stringify({ idle, active }));
  }, 250);
  timer.unref();
}
