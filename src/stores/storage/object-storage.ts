import type { Readable } from 'node:stream';

/** An inclusive byte range, as HTTP `Range: bytes=start-end` gives it. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * Where attachment bytes live: one small interface, two drivers (a local directory, an
 * S3-compatible bucket). An object appears whole or not at all: `putFile` copies a finished
 * local file, so a reader never sees a partial upload.
 */
export interface ObjectStorage {
  readonly driver: 'local' | 's3';
  /** Stores the finished file at `path` under `key`. The file may be moved: the caller removes `path` if it is still there. */
  putFile(key: string, path: string, opts: { contentType: string; size: number }): Promise<void>;
  /** The object's bytes (or a range of them); undefined when there is no such object. */
  get(key: string, range?: ByteRange): Promise<Readable | undefined>;
  /** Removes an object; removing one that is absent is not an error. */
  delete(key: string): Promise<void>;
  /** The keys that start with `prefix` (maintenance and tests). */
  list(prefix: string): Promise<string[]>;
  /** The keys that start with `prefix` of objects written before `before`, a page at a time (the orphan sweep). */
  listWrittenBefore(prefix: string, before: Date): AsyncIterable<string[]>;
  close(): Promise<void>;
}

/** Object keys are made by the server only (ids), never from a client's file name. */
export const isSafeKey = (key: string) => /^[A-Za-z0-9_-]+(\/[A-Za-z0-9_.-]+)*$/.test(key) && !key.includes('..');
