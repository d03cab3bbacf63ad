import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { type Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { sql } from 'drizzle-orm';
import { type AttachmentKind, attachments } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { badInput, DomainError } from '../../errors.js';
import { newId, newSecret } from '../../ids.js';
import type { ObjectStorage } from '../../stores/storage/index.js';
import { countStreamedBytes } from '../../stores/storage/stream-garbage.js';
import type { AttachmentView } from '../event-catalog.js';
import { attachmentViewOf } from './download.js';
import {
  limitOf,
  quotaExceeded,
  requireSwitch,
  storageUsed,
  tooLarge,
  type Uploader,
  type UploadPolicy,
} from './policy.js';
import { kindFor, SNIFF_BYTES, type Sniffed, sniff } from './sniff.js';

/** Receiving an upload: streamed to a scratch file while inspected, images re-encoded, stored, recorded. */

/** Longest side of a thumbnail, in pixels (WebP). */
export const THUMBNAIL_PX = 320;
/** Images with more pixels than this are refused (decompression bombs). */
const MAX_IMAGE_PIXELS = 50_000_000;

/**
 * Counts and inspects the bytes as they pass: the kind is decided from the first bytes, and
 * the stream fails as soon as the kind's limit is passed (the caller then stops reading).
 */
class UploadInspector extends Transform {
  bytes = 0;
  decided?: { kind: AttachmentKind; sniffed: Sniffed; limit: number };
  private head: Buffer[] = [];
  private headBytes = 0;

  constructor(private readonly policy: UploadPolicy) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
    try {
      this.bytes += chunk.length;
      // Each body chunk is a fresh Buffer (the HTTP parser's copy): keep their garbage bounded.
      countStreamedBytes(chunk.length);
      if (!this.decided) {
        this.head.push(chunk);
        this.headBytes += chunk.length;
        if (this.headBytes >= SNIFF_BYTES) this.decide();
      }
      this.checkSize();
      done(null, chunk);
    } catch (error) {
      done(error as Error);
    }
  }

  override _flush(done: TransformCallback) {
    try {
      if (this.bytes === 0) throw badInput('The file is empty');
      if (!this.decided) this.decide();
      this.checkSize();
      done();
    } catch (error) {
      done(error as Error);
    }
  }

  private decide() {
    const sniffed = sniff(Buffer.concat(this.head).subarray(0, SNIFF_BYTES));
    this.head = [];
    const kind = kindFor(sniffed, this.policy.declaredKind);
    requireSwitch(this.policy.merchant, kind);
    this.decided = { kind, sniffed, limit: limitOf(this.policy.merchant, kind) };
  }

  private checkSize() {
    const limit = this.decided?.limit ?? this.policy.maxBytes;
    if (this.bytes > limit) {
      throw this.decided
        ? tooLarge(this.policy.merchant, this.decided.kind)
        : new DomainError('PAYLOAD_TOO_LARGE', `File larger than ${limit} bytes`);
    }
  }
}

/** A file name fit to show and to put in a Content-Disposition: no path, no control characters. */
export function cleanFileName(raw: string | undefined): string {
  const base = (raw ?? '').split(/[\\/]/).pop() ?? '';
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
  const cleaned = base.replace(/[\u0000-\u001f\u007f"]/g, '').trim();
  return [...(cleaned || 'file')].slice(0, 200).join('');
}

export const incomingDir = (deps: Deps) => join(deps.config.attachments.dir, 'incoming');

/**
 * Receives one uploaded file: streams it to a scratch file while counting and sniffing it,
 * refuses it as soon as it breaks a rule, re-encodes images (dropping EXIF and other
 * metadata) with a thumbnail, stores the finished object(s), then records the attachment
 * under the merchant's quota. Whatever fails (a refusal, a client that aborts, a storage
 * error), nothing is left behind: no scratch file, no object, no row.
 */
export async function receiveUpload(
  deps: Deps,
  storage: ObjectStorage,
  uploader: Uploader,
  policy: UploadPolicy,
  file: { stream: Readable; name?: string },
): Promise<AttachmentView> {
  const id = newId('att');
  await mkdir(incomingDir(deps), { recursive: true });
  const spool = join(incomingDir(deps), `${id}.${newSecret(6)}`);
  const scratch = [spool];
  const stored: string[] = [];
  try {
    const inspector = new UploadInspector(policy);
    const scratchFile = createWriteStream(spool, { flags: 'wx' });
    // Opened before anything can fail, so the removal below never races the file's creation.
    await once(scratchFile, 'open');
    await pipeline(file.stream, inspector, scratchFile);
    const decided = inspector.decided;
    if (!decided) throw badInput('The file is empty');
    const { kind } = decided;
    let mime = decided.sniffed.mime;
    let body = spool;
    let thumbnail: string | undefined;
    if (kind === 'image') {
      body = `${spool}.clean`;
      thumbnail = `${spool}.thumb`;
      scratch.push(body, thumbnail);
      mime = await cleanImage(spool, body, thumbnail, mime);
    }
    const size = (await stat(body)).size;
    const storageKey = `${uploader.merchantId}/${id}`;
    const thumbnailKey = thumbnail ? `${storageKey}.thumb.webp` : null;
    stored.push(storageKey);
    await storage.putFile(storageKey, body, { contentType: mime, size });
    if (thumbnail && thumbnailKey) {
      stored.push(thumbnailKey);
      const thumbSize = (await stat(thumbnail)).size;
      await storage.putFile(thumbnailKey, thumbnail, { contentType: 'image/webp', size: thumbSize });
    }
    const row = await deps.db.transaction(async (tx) => {
      // One upload at a time per merchant passes the quota check, so two cannot both fit in the last bytes.
      await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`attachments:${uploader.merchantId}`}))`);
      if ((await storageUsed(tx, uploader.merchantId)) + size > policy.merchant.storageQuotaBytes) {
        throw quotaExceeded(policy.merchant);
      }
      const [inserted] = await tx
        .insert(attachments)
        .values({
          id,
          merchantId: uploader.merchantId,
          uploaderType: uploader.type,
          uploaderId: uploader.id,
          kind,
          mime,
          size,
          name: cleanFileName(file.name),
          storageKey,
          thumbnailKey,
          createdAt: new Date(deps.now()),
        })
        .returning();
      return inserted;
    });
    if (!row) throw new Error('attachment insert returned nothing');
    stored.length = 0;
    deps.log.info({ attachmentId: id, kind, mime, size, uploader: uploader.type }, 'attachment stored');
    return attachmentViewOf(deps, row);
  } catch (error) {
    file.stream.destroy();
    await Promise.all(stored.map((key) => storage.delete(key).catch(() => {})));
    throw error;
  } finally {
    await Promise.all(scratch.map((path) => rm(path, { force: true })));
  }
}

/** Re-encodes an image in its own format without its metadata (EXIF, GPS, XMP…), and writes a thumbnail. */
async function cleanImage(source: string, target: string, thumbnail: string, mime: string): Promise<string> {
  const animated = mime === 'image/gif' || mime === 'image/webp';
  const { default: sharp } = await import('sharp'); // on first use, as for the captcha
  try {
    let image = sharp(source, { limitInputPixels: MAX_IMAGE_PIXELS, animated, failOn: 'error' });
    // Apply the EXIF orientation before the EXIF goes (a no-op for animations, which carry none).
    if (!animated) image = image.rotate();
    const encoded =
      mime === 'image/jpeg'
        ? image.jpeg({ quality: 90, mozjpeg: false })
        : mime === 'image/png'
          ? image.png()
          : mime === 'image/webp'
            ? image.webp({ quality: 90 })
            : image.gif();
    await encoded.toFile(target);
    await sharp(target, { limitInputPixels: MAX_IMAGE_PIXELS })
      .resize(THUMBNAIL_PX, THUMBNAIL_PX, { fit: 'inside', withoutEnlargement: true })
      .webp({ quality: 70 })
      .toFile(thumbnail);
  } catch (error) {
    if (error instanceof DomainError) throw error;
    throw badInput(`The image could not be decoded (${mime})`);
  }
  return mime;
}
