import { randomBytes } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { getHeapSpaceStatistics } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AttachmentsConfig } from '../../src/config.js';
import { createObjectStorage, type ObjectStorage } from '../../src/stores/storage/index.js';
import { localObjectStorage } from '../../src/stores/storage/local.js';
import { isSafeKey } from '../../src/stores/storage/object-storage.js';
import { s3ObjectStorage } from '../../src/stores/storage/s3.js';
import { type S3Server, startS3Server } from '../support/s3.js';

/**
 * The object-storage drivers called directly (no gateway): the local driver on a temporary
 * directory, the S3 driver against a real S3-protocol server (s3rver in its own process,
 * test/support/s3.ts). Each answer is checked by value: the exact bytes of a range, the exact keys
 * of a listing and of each page of the orphan sweep's listing, the error of an unsafe key.
 */

const scratch = mkdtempSync(join(tmpdir(), 'parley-storage-drivers-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let scratchFiles = 0;

/** A new file with `bytes` in the scratch directory (putFile may move it away). */
function fileOf(bytes: Buffer | string): string {
  const path = join(scratch, `source-${++scratchFiles}`);
  writeFileSync(path, bytes);
  return path;
}

async function readAll(stream: Readable | undefined): Promise<Buffer> {
  if (!stream) throw new Error('no such object');
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function pagesOf(pages: AsyncIterable<string[]>): Promise<string[][]> {
  const all: string[][] = [];
  for await (const page of pages) all.push(page);
  return all;
}

/** Larger than a few read chunks (64 KiB each), so a range spans several of them. */
const BIG = randomBytes(300_000);

/** The ranges both drivers must serve byte for byte (inclusive ends, as HTTP gives them). */
const RANGES: { name: string; start: number; end: number; bytes: () => Buffer }[] = [
  { name: 'the first byte (0-0)', start: 0, end: 0, bytes: () => BIG.subarray(0, 1) },
  { name: 'the first ten bytes (0-9)', start: 0, end: 9, bytes: () => BIG.subarray(0, 10) },
  { name: 'one byte in the middle', start: 150_000, end: 150_000, bytes: () => BIG.subarray(150_000, 150_001) },
  { name: 'a middle range over several chunks', start: 1_000, end: 250_000, bytes: () => BIG.subarray(1_000, 250_001) },
  { name: 'the last byte', start: BIG.length - 1, end: BIG.length - 1, bytes: () => BIG.subarray(BIG.length - 1) },
  {
    name: 'an end past the end of the object: cut at the last byte',
    start: BIG.length - 10,
    end: BIG.length + 100,
    bytes: () => BIG.subarray(BIG.length - 10),
  },
];

const UNSAFE_KEYS = [
  '../escape',
  'a/../../escape',
  'a/..',
  '/etc/passwd',
  '',
  'a b',
  'a\\b',
  'a/b?c',
  '.hidden',
  'a//b',
  'a/',
];

const attachments = (over: Partial<AttachmentsConfig>): AttachmentsConfig => ({
  driver: 'local',
  dir: join(scratch, 'from-config'),
  urlTtlSeconds: 3600,
  unreferencedTtlSeconds: 3600,
  uploadsPerMinute: 20,
  uploadBytesPerVisitorPerHour: 1024 ** 2,
  uploadBytesPerAddressPerHour: 1024 ** 2,
  downloadsPerMinute: 1200,
  downloadBytesPerHour: 1024 ** 3,
  imageMaxPixels: 1_000_000,
  imageWorkers: 1,
  imageWorkersPerMerchant: 1,
  imageQueuePerMerchant: 1,
  imageQueueTimeoutMs: 1000,
  ...over,
});

describe('object keys', () => {
  it('a key is one or more segments of letters, digits, _ and - (later segments may hold dots)', () => {
    for (const key of ['abc', 'a_b-C9', 'm1/att_2/photo.jpg', 'a/b/c/d.e.f', 'a/.hidden'])
      expect(isSafeKey(key)).toBe(true);
    for (const key of UNSAFE_KEYS) expect(isSafeKey(key)).toBe(false);
  });
});

/** What both drivers do alike; `make` gives a driver on an empty store. */
function commonBehaviour(name: string, make: () => ObjectStorage) {
  describe(`${name} driver: what both drivers do`, () => {
    let storage: ObjectStorage;
    beforeAll(async () => {
      storage = make();
      await storage.putFile('big/one', fileOf(BIG), { contentType: 'application/octet-stream', size: BIG.length });
    });

    it('get: the whole object, exactly its bytes, as a byte stream', async () => {
      const stream = await storage.get('big/one');
      expect(stream?.readableObjectMode).toBe(false);
      expect((await readAll(stream)).equals(BIG)).toBe(true);
    });

    for (const range of RANGES) {
      it(`get with a range, ${name}: ${range.name} (${range.start}-${range.end})`, async () => {
        const stream = await storage.get('big/one', { start: range.start, end: range.end });
        expect(stream?.readableObjectMode).toBe(false);
        const got = await readAll(stream);
        const want = range.bytes();
        expect(got.length).toBe(want.length);
        expect(got.equals(want)).toBe(true);
      });
    }

    it('get of a missing key: undefined (with and without a range)', async () => {
      expect(await storage.get('no-such/object')).toBeUndefined();
      expect(await storage.get('no-such/object', { start: 0, end: 0 })).toBeUndefined();
      expect(await storage.get('nothing-here-at-all')).toBeUndefined();
    });

    it('keys of one segment and of several are stored and read back', async () => {
      await storage.putFile('single', fileOf('one segment'), { contentType: 'text/plain', size: 11 });
      await storage.putFile('x/y/z.txt', fileOf('three segments'), { contentType: 'text/plain', size: 14 });
      expect((await readAll(await storage.get('single'))).toString()).toBe('one segment');
      expect((await readAll(await storage.get('x/y/z.txt'))).toString()).toBe('three segments');
    });

    it('an unsafe key is refused by every operation, with the key in the message', async () => {
      for (const key of UNSAFE_KEYS) {
        const message = `unsafe object key: ${key}`;
        await expect(storage.get(key)).rejects.toThrow(message);
        await expect(storage.get(key, { start: 0, end: 0 })).rejects.toThrow(message);
        await expect(storage.putFile(key, fileOf('x'), { contentType: 'text/plain', size: 1 })).rejects.toThrow(
          message,
        );
        await expect(storage.delete(key)).rejects.toThrow(message);
      }
    });

    it('delete removes the object; deleting an absent one is not an error', async () => {
      await storage.putFile('del/me', fileOf('bye'), { contentType: 'text/plain', size: 3 });
      expect(await storage.list('del/')).toEqual(['del/me']);
      await storage.delete('del/me');
      expect(await storage.get('del/me')).toBeUndefined();
      expect(await storage.list('del/')).toEqual([]);
      await expect(storage.delete('del/me')).resolves.toBeUndefined();
    });

    it('list: the keys under the prefix, sorted (as strings), nothing else', async () => {
      for (const key of ['list/b', 'list/a/2', 'list/a/10', 'list/a/1', 'listing/other', 'lis/t']) {
        await storage.putFile(key, fileOf(key), { contentType: 'text/plain', size: key.length });
      }
      expect(await storage.list('list/')).toEqual(['list/a/1', 'list/a/10', 'list/a/2', 'list/b']);
      expect(await storage.list('list/a/')).toEqual(['list/a/1', 'list/a/10', 'list/a/2']);
      expect(await storage.list('list')).toEqual(['list/a/1', 'list/a/10', 'list/a/2', 'list/b', 'listing/other']);
      expect(await storage.list('nothing/')).toEqual([]);
    });

    it('listWrittenBefore: nothing written before the time is no page at all (not an empty one)', async () => {
      expect(await pagesOf(storage.listWrittenBefore('list/', new Date(Date.now() - 3_600_000)))).toEqual([]);
      expect(await pagesOf(storage.listWrittenBefore('nothing/', new Date(Date.now() + 3_600_000)))).toEqual([]);
      expect(await pagesOf(storage.listWrittenBefore('list/a/', new Date(Date.now() + 3_600_000)))).toEqual([
        ['list/a/1', 'list/a/10', 'list/a/2'],
      ]);
    });
  });
}

describe('local driver', () => {
  const dir = join(scratch, 'local');
  commonBehaviour('local', () => localObjectStorage(dir));

  it('is named local, and createObjectStorage picks it when STORAGE_DRIVER is local', async () => {
    expect(localObjectStorage(dir).driver).toBe('local');
    const fromConfig = await createObjectStorage(attachments({ driver: 'local', dir: join(scratch, 'cfg-local') }));
    expect(fromConfig.driver).toBe('local');
    await fromConfig.putFile('cfg/key', fileOf('via config'), { contentType: 'text/plain', size: 10 });
    expect(readFileSync(join(scratch, 'cfg-local', 'objects', 'cfg', 'key'), 'utf8')).toBe('via config');
  });

  it('stores an object as <dir>/objects/<key>, moving the file in', async () => {
    const storage = localObjectStorage(join(scratch, 'layout'));
    const source = fileOf('moved');
    await storage.putFile('m/n', source, { contentType: 'text/plain', size: 5 });
    expect(readFileSync(join(scratch, 'layout', 'objects', 'm', 'n'), 'utf8')).toBe('moved');
    expect(() => statSync(source)).toThrow(/ENOENT/);
    expect(readdirSync(join(scratch, 'layout'))).toEqual(['objects']);
    expect(await storage.list('')).toEqual(['m/n']);
  });

  it('a store never written: list is empty, get is undefined', async () => {
    const storage = localObjectStorage(join(scratch, 'never-written'));
    expect(await storage.list('')).toEqual([]);
    expect(await pagesOf(storage.listWrittenBefore('', new Date(Date.now() + 60_000)))).toEqual([]);
    expect(await storage.get('a/b')).toBeUndefined();
  });

  it('an error other than a missing file is thrown, not taken for a missing object', async () => {
    const storage = localObjectStorage(join(scratch, 'errors'));
    await storage.putFile('file', fileOf('a file'), { contentType: 'text/plain', size: 6 });
    // A key under an object (a file where a directory would be): ENOTDIR, not "no such object".
    await expect(storage.get('file/below')).rejects.toMatchObject({ code: 'ENOTDIR' });
    // The objects directory is a file: listing fails rather than answering "no keys".
    const broken = join(scratch, 'objects-is-a-file');
    mkdirSync(broken);
    writeFileSync(join(broken, 'objects'), 'not a directory');
    await expect(localObjectStorage(broken).list('')).rejects.toMatchObject({ code: 'ENOTDIR' });
  });

  it('a failed move (no such source file) throws the rename error and stores nothing', async () => {
    const storage = localObjectStorage(join(scratch, 'failed-move'));
    const missing = join(scratch, 'no-such-source');
    await expect(storage.putFile('k', missing, { contentType: 'text/plain', size: 1 })).rejects.toMatchObject({
      code: 'ENOENT',
      syscall: 'rename',
    });
    expect(await storage.list('')).toEqual([]);
  });

  it('listWrittenBefore: strictly older than `before` (an object written at that very moment is not listed)', async () => {
    const storage = localObjectStorage(join(scratch, 'ages'));
    const at = 1_700_000_000; // whole seconds: the file's mtime is exactly this
    for (const [key, seconds] of [
      ['gc/older', at - 1],
      ['gc/exact', at],
      ['gc/newer', at + 1],
      ['other/older', at - 1],
    ] as const) {
      await storage.putFile(key, fileOf(key), { contentType: 'text/plain', size: key.length });
      utimesSync(join(scratch, 'ages', 'objects', key), seconds, seconds);
    }
    expect(await pagesOf(storage.listWrittenBefore('gc/', new Date(at * 1000)))).toEqual([['gc/older']]);
    expect(await pagesOf(storage.listWrittenBefore('gc/', new Date(at * 1000 + 1)))).toEqual([
      ['gc/exact', 'gc/older'],
    ]);
    expect(await pagesOf(storage.listWrittenBefore('gc/', new Date((at + 2) * 1000)))).toEqual([
      ['gc/exact', 'gc/newer', 'gc/older'],
    ]);
  });

  it('listWrittenBefore: pages of 1,000 keys in order, each key once', async () => {
    const root = join(scratch, 'many');
    await mkdir(join(root, 'objects', 'p'), { recursive: true });
    const keys = Array.from({ length: 1001 }, (_, i) => `p/k${String(i).padStart(4, '0')}`);
    await Promise.all(keys.map((k) => writeFile(join(root, 'objects', k), 'x')));
    const storage = localObjectStorage(root);
    const pages = await pagesOf(storage.listWrittenBefore('p/', new Date(Date.now() + 60_000)));
    expect(pages.map((p) => p.length)).toEqual([1000, 1]);
    expect(pages.flat()).toEqual(keys);
    expect(await storage.list('p/')).toEqual(keys);
  });

  describe('across file systems (the source on another device: rename fails with EXDEV)', () => {
    // /dev/shm is a tmpfs on Linux; the scratch directory is on the disk. Skipped where they are one device.
    const other = '/dev/shm';
    let crossDevice = false;
    try {
      crossDevice = statSync(other).isDirectory() && statSync(other).dev !== statSync(scratch).dev;
    } catch {}
    let otherDir = '';
    beforeAll(() => {
      if (crossDevice) otherDir = mkdtempSync(join(other, 'parley-storage-drivers-'));
    });
    afterAll(() => {
      if (otherDir) rmSync(otherDir, { recursive: true, force: true });
    });
    const otherFile = (bytes: Buffer | string) => {
      const path = join(otherDir, `source-${++scratchFiles}`);
      writeFileSync(path, bytes);
      return path;
    };

    it.skipIf(!crossDevice)(
      'the file is copied in: the object has its bytes, and no temporary file is left',
      async () => {
        const root = join(scratch, 'cross');
        const storage = localObjectStorage(root);
        await storage.putFile('c/d', otherFile(BIG), { contentType: 'application/octet-stream', size: BIG.length });
        expect((await readAll(await storage.get('c/d'))).equals(BIG)).toBe(true);
        expect(readdirSync(join(root, 'objects', 'c'))).toEqual(['d']);
        expect(await storage.list('')).toEqual(['c/d']);
      },
    );

    it.skipIf(!crossDevice)(
      'a copy that cannot be renamed into place throws and leaves no temporary file',
      async () => {
        const root = join(scratch, 'cross-failed');
        const storage = localObjectStorage(root);
        // `d` is a directory (it holds `d/e`): the copy lands beside it, its rename onto `d` fails (EISDIR).
        await storage.putFile('d/e', fileOf('below'), { contentType: 'text/plain', size: 5 });
        await expect(
          storage.putFile('d', otherFile('the copy'), { contentType: 'text/plain', size: 8 }),
        ).rejects.toMatchObject({ code: 'EISDIR' });
        expect(readdirSync(join(root, 'objects'))).toEqual(['d']);
        expect(await storage.list('')).toEqual(['d/e']);
      },
    );
  });
});

/**
 * Not checked here: the S3 driver's paging past 1,000 keys (ListObjectsV2's continuation token).
 * s3rver makes its tokens with DES, which Node's OpenSSL 3 refuses without --openssl-legacy-provider:
 * the second page is an InternalError, whatever the driver does.
 */
describe('S3 driver (a real S3-protocol server)', () => {
  let s3: S3Server;
  let sdk: S3Client;
  const KEY_PREFIX = 'tenant-a/';
  const settings = (
    over: Partial<NonNullable<AttachmentsConfig['s3']>> = {},
  ): NonNullable<AttachmentsConfig['s3']> => ({
    endpoint: s3.endpoint,
    region: 'us-east-1',
    bucket: s3.bucket,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    forcePathStyle: true,
    keyPrefix: KEY_PREFIX,
    ...over,
  });
  const opened: ObjectStorage[] = [];
  const driver = (over: Partial<NonNullable<AttachmentsConfig['s3']>> = {}) => {
    const storage = s3ObjectStorage(settings(over));
    opened.push(storage);
    return storage;
  };
  /** The bucket's own listing (full keys, LastModified), read with the SDK. */
  const bucketListing = async (prefix: string) =>
    (await sdk.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }))).Contents ?? [];

  beforeAll(async () => {
    s3 = await startS3Server();
    sdk = new S3Client({
      region: 'us-east-1',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      // As the driver's client: no checksums the API does not require (cheaper PUTs).
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  });
  afterAll(async () => {
    for (const storage of opened) await storage.close();
    sdk?.destroy();
    await s3?.stop();
  });

  commonBehaviour('s3', () => driver());

  it('is named s3, and createObjectStorage picks it when STORAGE_DRIVER is s3', async () => {
    expect(driver().driver).toBe('s3');
    const fromConfig = await createObjectStorage(attachments({ driver: 's3', s3: settings({ keyPrefix: 'cfg-s3/' }) }));
    opened.push(fromConfig);
    expect(fromConfig.driver).toBe('s3');
    await fromConfig.putFile('cfg/key', fileOf('via config'), { contentType: 'text/plain', size: 10 });
    expect((await bucketListing('cfg-s3/')).map((o) => o.Key)).toEqual(['cfg-s3/cfg/key']);
  });

  it('STORAGE_DRIVER=s3 without S3 settings (no S3_BUCKET) is refused', async () => {
    await expect(createObjectStorage(attachments({ driver: 's3' }))).rejects.toThrow(
      new Error('STORAGE_DRIVER=s3 needs S3_BUCKET'),
    );
  });

  it('objects live under S3_KEY_PREFIX; listings give the keys without it, and nothing outside it', async () => {
    const storage = driver({ keyPrefix: 'tenant-p/' });
    await storage.putFile('docs/b', fileOf('b'), { contentType: 'text/plain', size: 1 });
    await storage.putFile('docs/a', fileOf('a'), { contentType: 'text/plain', size: 1 });
    // The same key in another deployment's prefix of the bucket.
    await sdk.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'tenant-q/docs/c', Body: 'c' }));
    expect((await bucketListing('tenant-p/')).map((o) => o.Key)).toEqual(['tenant-p/docs/a', 'tenant-p/docs/b']);
    expect(await storage.list('docs/')).toEqual(['docs/a', 'docs/b']);
    expect(await pagesOf(storage.listWrittenBefore('docs/', new Date(Date.now() + 3_600_000)))).toEqual([
      ['docs/a', 'docs/b'],
    ]);
    expect(await driver({ keyPrefix: 'tenant-q/' }).get('docs/c').then(readAll)).toEqual(Buffer.from('c'));
    expect(await storage.get('docs/c')).toBeUndefined();
  });

  it("listWrittenBefore: strictly older than `before` (the object's own LastModified is not before it)", async () => {
    const storage = driver();
    await storage.putFile('aged/one', fileOf('one'), { contentType: 'text/plain', size: 3 });
    const [listed] = await bucketListing(`${KEY_PREFIX}aged/`);
    const written = listed?.LastModified;
    if (!written) throw new Error('no LastModified in the listing');
    expect(await pagesOf(storage.listWrittenBefore('aged/', written))).toEqual([]);
    expect(await pagesOf(storage.listWrittenBefore('aged/', new Date(written.getTime() + 1)))).toEqual([['aged/one']]);
  });

  it('a missing bucket (404) is "no such object"; any other refusal (an unknown access key, 403) is thrown', async () => {
    expect(await driver({ bucket: 'no-such-bucket' }).get('a/b')).toBeUndefined();
    // (s3rver checks the access key id, not a V4 signature.)
    const stranger = driver({ accessKeyId: 'NOT-A-KEY', secretAccessKey: 'whatever' });
    for (const key of ['big/one', 'no-such/object']) {
      await expect(stranger.get(key)).rejects.toMatchObject({
        name: 'InvalidAccessKeyId',
        $metadata: { httpStatusCode: 403 },
      });
    }
  });
});

describe('countStreamedBytes: a young-generation collection every 4 MiB streamed', () => {
  const THRESHOLD = 4 * 1024 * 1024;
  type StreamGarbage = typeof import('../../src/stores/storage/stream-garbage.js');
  let instances = 0;
  /** A fresh copy of the module (its count at 0, no collector yet): the count is per process, and other tests stream bytes too. */
  const freshModule = async (): Promise<StreamGarbage> => {
    const specifier = `../../src/stores/storage/stream-garbage.js?instance=${++instances}`;
    return (await import(/* @vite-ignore */ specifier)) as StreamGarbage;
  };
  const newSpaceUsed = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_used_size ?? 0;
  /** Short-lived objects in the young generation. */
  const litter = () => {
    let junk: unknown[] | undefined = Array.from({ length: 5_000 }, (_, i) => ({ i, s: `item ${i}` }));
    junk = undefined;
    return junk;
  };

  it('with --expose-gc (a global gc): a minor collection when the count reaches 4 MiB, not one byte before', async () => {
    const calls: unknown[] = [];
    const saved = Object.getOwnPropertyDescriptor(globalThis, 'gc');
    Object.defineProperty(globalThis, 'gc', {
      configurable: true,
      writable: true,
      value: (options: unknown) => {
        calls.push(options);
      },
    });
    try {
      const { countStreamedBytes } = await freshModule();
      countStreamedBytes(THRESHOLD - 1);
      expect(calls).toEqual([]);
      countStreamedBytes(1);
      expect(calls).toEqual([{ type: 'minor' }]);
      countStreamedBytes(THRESHOLD - 1);
      expect(calls).toHaveLength(1);
      countStreamedBytes(2 * THRESHOLD);
      expect(calls).toHaveLength(2);
      countStreamedBytes(THRESHOLD - 1);
      expect(calls).toHaveLength(2);
    } finally {
      if (saved) Object.defineProperty(globalThis, 'gc', saved);
      else delete (globalThis as { gc?: unknown }).gc;
    }
  });

  it.skipIf(typeof globalThis.gc === 'function')(
    'without it: the collection still happens (young garbage freed), and no gc function is left exposed',
    async () => {
      const { countStreamedBytes } = await freshModule();
      countStreamedBytes(THRESHOLD); // the first collection (and the collector made)
      // Just after a collection: nothing below the threshold frees anything.
      litter();
      const before = newSpaceUsed();
      countStreamedBytes(THRESHOLD - 1);
      const after = newSpaceUsed();
      expect(after).toBeGreaterThanOrEqual(before);
      // The byte that reaches the threshold: the young garbage is gone.
      litter();
      const full = newSpaceUsed();
      countStreamedBytes(1);
      const collected = newSpaceUsed();
      expect(collected).toBeLessThan(full / 2);
      // The flag was on only while the collector was taken: no gc here, none in a new context.
      expect(typeof globalThis.gc).toBe('undefined');
      expect(runInNewContext('typeof gc')).toBe('undefined');
    },
  );
});
