import { createReadStream } from 'node:fs';
import { pipeline, Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  NoSuchKey,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import type { AttachmentsConfig } from '../../config.js';
import type { ByteRange, ObjectStorage } from './object-storage.js';
import { isSafeKey } from './object-storage.js';
import { countingStream } from './stream-garbage.js';

type S3Settings = NonNullable<AttachmentsConfig['s3']>;

/**
 * Objects in an S3-compatible bucket (AWS S3, MinIO, Cloudflare R2, Ceph…), shared by every
 * gateway instance. A PUT of a finished file with its length: S3 makes an object visible only
 * once it is complete.
 */
export function s3ObjectStorage(settings: S3Settings): ObjectStorage {
  const client = s3Client(settings);
  const Bucket = settings.bucket;
  const fullKey = (key: string) => {
    if (!isSafeKey(key)) throw new Error(`unsafe object key: ${key}`);
    return settings.keyPrefix + key;
  };
  const pages = (prefix: string) => listPages(client, settings, prefix);
  return {
    driver: 's3',
    async putFile(key, path, opts) {
      // The read stream allocates a Buffer per read: counted, so its garbage stays bounded.
      const body = countingStream();
      pipeline(createReadStream(path), body, () => {});
      try {
        await client.send(
          new PutObjectCommand({
            Bucket,
            Key: fullKey(key),
            Body: body,
            ContentLength: opts.size,
            ContentType: opts.contentType,
          }),
        );
      } finally {
        // A failed PUT may leave the file half read: close it.
        body.destroy();
      }
    },
    async get(key, range?: ByteRange) {
      try {
        const answer = await client.send(
          new GetObjectCommand({
            Bucket,
            Key: fullKey(key),
            Range: range ? `bytes=${range.start}-${range.end}` : undefined,
          }),
        );
        const body = answer.Body as Readable | undefined;
        return body && range ? exactRange(body, range, answer.ContentRange) : body;
      } catch (error) {
        if (error instanceof NoSuchKey) return undefined;
        if (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 404) return undefined;
        throw error;
      }
    },
    async delete(key) {
      await client.send(new DeleteObjectCommand({ Bucket, Key: fullKey(key) }));
    },
    async list(prefix) {
      const keys: string[] = [];
      for await (const page of pages(prefix)) keys.push(...page.map((o) => o.key));
      return keys.sort();
    },
    async *listWrittenBefore(prefix, before) {
      for await (const page of pages(prefix)) {
        const old = page.filter((o) => o.lastModified !== undefined && o.lastModified < before).map((o) => o.key);
        if (old.length) yield old;
      }
    },
    async close() {
      client.destroy();
    },
  };
}

/** The client of the configured endpoint and credentials. */
function s3Client(settings: S3Settings): S3Client {
  return new S3Client({
    region: settings.region,
    endpoint: settings.endpoint,
    forcePathStyle: settings.forcePathStyle,
    credentials:
      settings.accessKeyId && settings.secretAccessKey
        ? { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey }
        : undefined,
    // Only compute checksums where the API requires them (S3-compatible servers differ on the newer ones).
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** ListObjectsV2, a page (up to 1,000 objects) at a time, the keys without S3_KEY_PREFIX. */
async function* listPages(client: S3Client, settings: S3Settings, prefix: string) {
  let token: string | undefined;
  do {
    const page = await client.send(
      new ListObjectsV2Command({
        Bucket: settings.bucket,
        Prefix: settings.keyPrefix + prefix,
        ContinuationToken: token,
      }),
    );
    yield (page.Contents ?? []).flatMap((o) =>
      o.Key ? [{ key: o.Key.slice(settings.keyPrefix.length), lastModified: o.LastModified }] : [],
    );
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
}

/**
 * Exactly the bytes of `range`, whatever the store sent: an S3-compatible server that ignores a
 * `Range` (s3rver answers `bytes=0-0` with the whole object) or serves more than asked must not
 * put more bytes on the wire than the Content-Length the gateway announced. The answer's
 * Content-Range says where its bytes start (none: the whole object, from 0); what precedes the
 * range is skipped, what follows it is never read (the source is closed).
 */
function exactRange(body: Readable, range: ByteRange, contentRange: string | undefined): Readable {
  const served = /^bytes (\d+)-\d+\//.exec(contentRange ?? '');
  const servedStart = served ? Number(served[1]) : 0;
  if (servedStart > range.start) {
    body.destroy();
    throw new Error(`S3 served bytes from ${servedStart}, after the range asked (${range.start})`);
  }
  let skip = range.start - servedStart;
  let left = range.end - range.start + 1;
  async function* slice() {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      const from = Math.min(skip, chunk.length);
      skip -= from;
      const part = chunk.subarray(from, from + left);
      left -= part.length;
      if (part.length > 0) yield part;
      if (left <= 0) return; // leaving the loop closes the source
    }
  }
  return Readable.from(slice(), { objectMode: false });
}
