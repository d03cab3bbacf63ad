import { Transform } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Keeps the garbage of streamed files small. Every chunk of a file that streams through the
 * process is a new Buffer: Node's HTTP parser copies each piece of a request body, a file read
 * stream allocates one per read. They are garbage as soon as they are written on, but V8 frees
 * young ArrayBuffer memory only at a young-generation collection, and forces one only after
 * 32 MiB of it has piled up (twice its default semi-space); JavaScript allocation is too light
 * on this path to trigger one sooner. So a 100 MiB upload raised the resident set by 20–30 MiB,
 * kept by the allocator afterwards (BENCHMARKS.md, "Attachments"). A young-generation collection
 * after every STREAMED_BYTES_PER_COLLECTION bytes (about 0.2 ms each, 25 per 100 MiB) bounds that
 * garbage to a few MiB, whatever the number of uploads at once (the count is per process).
 */
const STREAMED_BYTES_PER_COLLECTION = 4 * 1024 * 1024;

let streamed = 0;
let collectYoung: (() => void) | null | undefined;

/** Counts `bytes` of a streamed file; every STREAMED_BYTES_PER_COLLECTION, a young-generation collection. */
export function countStreamedBytes(bytes: number): void {
  streamed += bytes;
  if (streamed < STREAMED_BYTES_PER_COLLECTION) return;
  streamed = 0;
  collectYoung ??= youngCollector();
  collectYoung?.();
}

/** A pass-through stream that counts what passes with countStreamedBytes. */
export const countingStream = () =>
  new Transform({
    transform(chunk: Buffer, _encoding, done) {
      countStreamedBytes(chunk.length);
      done(null, chunk);
    },
  });

/**
 * V8's collector function: the global one when the process runs with --expose-gc, otherwise
 * taken from a fresh context with the flag on for that moment only (as jest's leak detector
 * does), so no `gc` global appears; null where the runtime refuses, and then nothing is forced.
 */
function youngCollector(): (() => void) | null {
  let gc = globalThis.gc;
  if (!gc) {
    try {
      setFlagsFromString('--expose-gc');
      gc = runInNewContext('gc') as NodeJS.GCFunction | undefined;
    } catch {
      gc = undefined;
    } finally {
      setFlagsFromString('--no-expose-gc');
    }
  }
  const collect = gc;
  return collect ? () => collect({ type: 'minor' }) : null;
}
