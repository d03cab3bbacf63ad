import { createReadStream } from 'node:fs';
import { pipeline, type Readable } from 'node:stream';
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
  const client = new S3Client({
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
  const Bucket = settings.bucket;
  const fullKey = (key: string) => {
    if (!isSafeKey(key)) throw new Error(`unsafe object key: ${key}`);
    return settings.keyPrefix + key;
  };
  /** ListObjectsV2, a page (up to 1,000 objects) at a time, the keys without S3_KEY_PREFIX. */
  async function* pages(prefix: string) {
    let token: string | undefined;
    do {
      const page = await client.send(
        new ListObjectsV2Command({ Bucket, Prefix: settings.keyPrefix + prefix, ContinuationToken: token }),
      );
      yield (page.Contents ?? []).flatMap((o) =>
        o.Key ? [{ key: o.Key.slice(settings.keyPrefix.length), lastModified: o.LastModified }] : [],
      );
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }
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
        return answer.Body as Readable | undefined;
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
