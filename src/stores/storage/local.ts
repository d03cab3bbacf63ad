import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { copyFile, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import type { ByteRange, ObjectStorage } from './object-storage.js';
import { isSafeKey } from './object-storage.js';

/**
 * Objects as files under `<dir>/objects/<key>`. A file is moved in with one rename (or copied
 * to a temporary name and renamed), so it is never visible half-written.
 */
export function localObjectStorage(dir: string): ObjectStorage {
  const root = join(dir, 'objects');
  const pathOf = (key: string) => {
    if (!isSafeKey(key)) throw new Error(`unsafe object key: ${key}`);
    return join(root, key);
  };
  return {
    driver: 'local',
    async putFile(key, path) {
      const target = pathOf(key);
      await mkdir(dirname(target), { recursive: true });
      try {
        await rename(path, target);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
        // Another file system: copy beside the target, then rename into place.
        const temporary = `${target}.${randomBytes(6).toString('hex')}.partial`;
        try {
          await copyFile(path, temporary);
          await rename(temporary, target);
        } finally {
          await rm(temporary, { force: true });
        }
      }
    },
    async get(key, range?: ByteRange) {
      const path = pathOf(key);
      const stream = createReadStream(path, range ? { start: range.start, end: range.end } : {});
      // Open before answering, so a missing object is `undefined` rather than a stream error.
      return new Promise((resolve, reject) => {
        stream.once('open', () => resolve(stream));
        stream.once('error', (error: NodeJS.ErrnoException) =>
          error.code === 'ENOENT' ? resolve(undefined) : reject(error),
        );
      });
    },
    async delete(key) {
      await rm(pathOf(key), { force: true });
    },
    list: (prefix) => keysUnder(root, prefix),
    async *listWrittenBefore(prefix, before) {
      const keys = await keysUnder(root, prefix);
      for (let i = 0; i < keys.length; i += PAGE) {
        const page: string[] = [];
        for (const key of keys.slice(i, i + PAGE)) {
          // A file removed meanwhile is no longer listed.
          const info = await stat(join(root, key)).catch(() => undefined);
          if (info && info.mtimeMs < before.getTime()) page.push(key);
        }
        if (page.length) yield page;
      }
    },
    async close() {},
  };
}

/** Keys per page of listWrittenBefore (as S3 lists them). */
const PAGE = 1000;

/** The keys of the files under `root` that start with `prefix`, sorted. */
async function keysUnder(root: string, prefix: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true }).catch(
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [];
      throw error;
    },
  );
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)).split('\\').join('/'))
    .filter((key) => key.startsWith(prefix))
    .sort();
}
