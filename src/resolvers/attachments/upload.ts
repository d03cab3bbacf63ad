import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { type Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type AttachmentKind, attachments } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { badInput, DomainError } from '../../errors.js';
import { newId, newSecret } from '../../ids.js';
import type { ObjectStorage } from '../../stores/storage/index.js';
import { countStreamedBytes } from '../../stores/storage/stream-garbage.js';
import type { AttachmentView } from '../event-catalog.js';
import { UNSAFE_IN_NAMES } from '../inputs.js';
import { spendByteBudget } from './budgets.js';
import { attachmentViewOf } from './download.js';
import { EbmlWalker } from './ebml.js';
import { reencodeImage } from './images.js';
import { IsoBoxWalker, type IsoMovie } from './iso-boxes.js';
import {
  limitOf,
  lockQuota,
  quotaExceeded,
  requireSwitch,
  storageUsed,
  tooLarge,
  type Uploader,
  type UploadPolicy,
} from './policy.js';
import { IMAGE_MIMES, kindFor, SNIFF_BYTES, type Sniffed, sniff } from './sniff.js';

/** Receiving an upload: streamed to a scratch file while inspected, images re-encoded, stored, recorded. */

export { THUMBNAIL_PX } from './images.js';

/**
 * Counts and inspects the bytes as they pass: the kind is decided from the first bytes, and
 * the stream fails as soon as the kind's limit is passed (the caller then stops reading).
 */
class UploadInspector extends Transform {
  bytes = 0;
  decided?: { kind: AttachmentKind; sniffed: Sniffed; limit: number };
  private head: Buffer[] = [];
  private headBytes = 0;
  /** The structure of an MP4/QuickTime or WebM/Matroska video or voice upload, checked as it passes. */
  private movie?: { push(chunk: Buffer): void; end(): IsoMovie };

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
      } else {
        this.movie?.push(chunk);
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
      if (this.movie) this.checkMovie(this.movie);
      this.checkSize();
      done();
    } catch (error) {
      done(error as Error);
    }
  }

  private decide() {
    const head = Buffer.concat(this.head);
    const sniffed = sniff(head.subarray(0, SNIFF_BYTES));
    this.head = [];
    const kind = kindFor(sniffed, this.policy.declaredKind);
    requireSwitch(this.policy.merchant, kind);
    this.decided = { kind, sniffed, limit: limitOf(this.policy.merchant, kind) };
    // "A video must be a video": an ftyp box at byte 4, or EBML's magic, is only a claim.
    if (kind === 'video' || kind === 'voice') {
      if (head.toString('latin1', 4, 8) === 'ftyp') this.movie = new IsoBoxWalker();
      else if (head.length >= 4 && head.readUInt32BE(0) === 0x1a45dfa3) this.movie = new EbmlWalker();
      this.movie?.push(head);
    }
  }

  /** At the end of a movie: its structure, and a track of its kind (a derived video with sound only is voice). */
  private checkMovie(walker: { end(): IsoMovie }) {
    const { handlers } = walker.end();
    const decided = this.decided;
    if (!decided) return;
    if (decided.kind === 'voice' && !handlers.has('soun') && !handlers.has('vide'))
      throw badInput('The file is not audio: it has no sound or video track');
    if (decided.kind !== 'video' || handlers.has('vide')) return;
    if (this.policy.declaredKind === 'video' || !handlers.has('soun'))
      throw badInput('The file is not a video: it has no video track');
    requireSwitch(this.policy.merchant, 'voice');
    const mime = decided.sniffed.mime.replace(/^video\/(mp4|webm)$/, 'audio/$1');
    this.decided = { kind: 'voice', sniffed: { mime, family: 'audio' }, limit: limitOf(this.policy.merchant, 'voice') };
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

/**
 * A file name fit to show and to put in a Content-Disposition: no path, no quotes, and, as in
 * nicknames, no control or bidirectional characters (`invoice\u202Efdp.exe` would read
 * `invoiceexe.pdf`).
 */
export function cleanFileName(raw: string | undefined): string {
  const base = (raw ?? '').split(/[\\/]/).pop() ?? '';
  const cleaned = base.replace(UNSAFE_IN_NAMES, '').replaceAll('"', '').trim();
  return [...(cleaned || 'file')].slice(0, 200).join('');
}

export const incomingDir = (deps: Deps) => join(deps.config.attachments.dir, 'incoming');

/**
 * Receives one uploaded file: streams it to a scratch file while counting and sniffing it (a
 * movie's box structure included), refuses it as soon as it breaks a rule, re-encodes image
 * bytes whatever the declared kind (dropping EXIF and other metadata, under the pixel budget and
 * in the image-work pool; a thumbnail for kind image), spends the uploader's byte budgets,
 * stores the finished object(s), then records the attachment (its bytes count in the merchant's
 * quota once a message carries it: the check here keeps an upload that could never fit out). Whatever fails (a refusal, a client that aborts, a storage
 * error), nothing is left behind: no scratch file, no object, no row.
 */
export async function receiveUpload(
  deps: Deps,
  storage: ObjectStorage,
  uploader: Uploader,
  policy: UploadPolicy,
  file: {
    stream: Readable;
    name?: string;
    /** Aborted when the adapter refuses the request meanwhile: the upload then stops and cleans up. */
    signal?: AbortSignal;
  },
): Promise<AttachmentView> {
  const { signal } = file;
  const id = newId('att');
  await mkdir(incomingDir(deps), { recursive: true });
  const spool = join(incomingDir(deps), `${id}.${newSecret(6)}`);
  const scratch = [spool];
  const stored: string[] = [];
  let refund: (() => Promise<void>) | undefined;
  try {
    const inspector = new UploadInspector(policy);
    const scratchFile = createWriteStream(spool, { flags: 'wx' });
    // Opened before anything can fail, so the removal below never races the file's creation.
    await once(scratchFile, 'open');
    await pipeline(file.stream, inspector, scratchFile);
    signal?.throwIfAborted();
    const decided = inspector.decided;
    if (!decided) throw badInput('The file is empty');
    const { kind } = decided;
    const mime = decided.sniffed.mime;
    let body = spool;
    let thumbnail: string | undefined;
    // Image bytes lose their metadata (EXIF, GPS…) whatever the declared kind; only images get a thumbnail.
    if ((IMAGE_MIMES as readonly string[]).includes(mime)) {
      body = `${spool}.clean`;
      thumbnail = kind === 'image' ? `${spool}.thumb` : undefined;
      scratch.push(body, ...(thumbnail ? [thumbnail] : []));
      await reencodeImage(deps, uploader.merchantId, { source: spool, target: body, thumbnail, mime }, signal);
      signal?.throwIfAborted();
    }
    const size = (await stat(body)).size;
    refund = await spendByteBudget(deps, uploader, size);
    const storageKey = `${uploader.merchantId}/${id}`;
    const thumbnailKey = thumbnail ? `${storageKey}.thumb.webp` : null;
    stored.push(storageKey);
    await storage.putFile(storageKey, body, { contentType: mime, size });
    if (thumbnail && thumbnailKey) {
      stored.push(thumbnailKey);
      const thumbSize = (await stat(thumbnail)).size;
      await storage.putFile(thumbnailKey, thumbnail, { contentType: 'image/webp', size: thumbSize });
    }
    signal?.throwIfAborted();
    const row = await recordAttachment(deps, uploader, policy, {
      id,
      kind,
      mime,
      size,
      name: cleanFileName(file.name),
      storageKey,
      thumbnailKey,
    });
    if (!row) throw new Error('attachment insert returned nothing');
    stored.length = 0;
    deps.log.info({ attachmentId: id, kind, mime, size, uploader: uploader.type }, 'attachment stored');
    return attachmentViewOf(deps, row);
  } catch (error) {
    file.stream.destroy();
    await Promise.all(stored.map((key) => storage.delete(key).catch(() => {})));
    await refund?.().catch(() => {});
    throw error;
  } finally {
    await Promise.all(scratch.map((path) => rm(path, { force: true })));
  }
}

/** The attachment's row, written only if its bytes still fit in the merchant's storage quota. */
function recordAttachment(
  deps: Deps,
  uploader: Uploader,
  policy: UploadPolicy,
  file: Pick<typeof attachments.$inferInsert, 'id' | 'kind' | 'mime' | 'size' | 'name' | 'storageKey' | 'thumbnailKey'>,
) {
  return deps.db.transaction(async (tx) => {
    // One upload at a time per merchant passes the quota check, so two cannot both fit in the last bytes.
    await lockQuota(tx, uploader.merchantId);
    if ((await storageUsed(tx, uploader.merchantId)) + file.size > policy.merchant.storageQuotaBytes) {
      throw quotaExceeded(policy.merchant);
    }
    const [inserted] = await tx
      .insert(attachments)
      .values({
        ...file,
        merchantId: uploader.merchantId,
        uploaderType: uploader.type,
        uploaderId: uploader.id,
        createdAt: new Date(deps.now()),
      })
      .returning();
    return inserted;
  });
}
