// Preloaded into a benchmarked server (`node --expose-gc --import ./bench/elu-probe.mjs`): writes its
// cumulative event-loop utilisation to BENCH_ELU_FILE four times a second, so the runner can compute
// the utilisation of any window without touching the server's code; on SIGUSR2 it collects garbage
// and writes the live heap to BENCH_HEAP_FILE (memory per idle subscriber is measured on the live
// heap: RSS moves with the allocator and the collector, not with what is kept). Plain JS: it loads
// before tsx.
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const eluFile = process.env.BENCH_ELU_FILE;
if (eluFile) {
  const timer = setInterval(() => {
    const { idle, active } = performance.eventLoopUtilization();
    writeFileSync(eluFile, JSON.stringify({ idle, active }));
  }, 250);
  timer.unref();
}

const heapFile = process.env.BENCH_HEAP_FILE;
if (heapFile && typeof globalThis.gc === 'function') {
  process.on('SIGUSR2', () => {
    globalThis.gc();
    globalThis.gc();
    const { heapUsed, external, rss } = process.memoryUsage();
    writeFileSync(heapFile, JSON.stringify({ heapUsed, external, rss, at: Date.now() }));
  });
}
