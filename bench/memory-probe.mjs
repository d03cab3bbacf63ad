// Preloaded into a benchmarked gateway (`node --import ./bench/memory-probe.mjs`, spawned with an IPC
// channel): samples the process's own memory while the runner measures something, without
// touching the gateway's code. Plain JS: it loads before tsx.
//
// {cmd: 'watch', live: false}: every 5 ms, the highest RSS, heap and arrayBuffers (what the process
//   holds, garbage included: what the operator sees).
// {cmd: 'watch', live: true}: two full collections 200 ms after the previous ones ended, then the live heap
//   (heapUsed + external, which includes arrayBuffers): what the process cannot free, i.e. what a
//   request really keeps.
// {cmd: 'stop'} answers {before, peak}: each field's value when the watch started and its highest sample.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

const fields = ['rss', 'heapUsed', 'external', 'arrayBuffers'];

// The collector without --expose-gc, so that the gateway runs as it does in production (without a
// global gc, src/stores/storage/stream-garbage.ts takes its own the same way).
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
setFlagsFromString('--no-expose-gc');

const sample = (live) => {
  // Twice: the second collection waits for the first one's sweeping of ArrayBuffer memory, which
  // otherwise may still be counted.
  if (live) {
    gc();
    gc();
  }
  const m = process.memoryUsage();
  return {
    rss: m.rss,
    heapUsed: m.heapUsed,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    live: m.heapUsed + m.external,
  };
};

let watch;
process.on('message', (message) => {
  if (message?.cmd === 'watch') {
    const live = Boolean(message.live);
    const before = sample(live);
    const peak = { ...before };
    // A chain, not an interval: a collection can take longer than the period on a busy machine.
    const next = () => {
      const now = sample(live);
      for (const f of [...fields, 'live']) peak[f] = Math.max(peak[f], now[f]);
      if (watch) watch.timer = setTimeout(next, live ? 200 : 5);
    };
    watch = { before, peak, timer: setTimeout(next, live ? 200 : 5), live };
  } else if (message?.cmd === 'stop' && watch) {
    clearTimeout(watch.timer);
    const now = sample(watch.live);
    for (const f of [...fields, 'live']) watch.peak[f] = Math.max(watch.peak[f], now[f]);
    process.send?.({ before: watch.before, peak: watch.peak });
    watch = undefined;
  }
});
// The IPC channel must not keep a gateway that was asked to stop alive.
process.channel?.unref();
