import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { type Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { and, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import type { Db } from '../db/client.js';
import { type AttachmentKind, attachments, type Merchant, messages } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { badInput, DomainError } from '../errors.js';
import { newId, newSecret } from '../ids.js';
import type { ObjectStorage } from '../stores/storage/index.js';
import { countStreamedBytes } from '../stores/storage/stream-garbage.js';
import type { AttachmentView } from './event-catalog.js';
import { loadUploadPolicy, uploadLimitsOf } from './merchant.js';
import type { AgentViewer, VisitorViewer } from './viewer.js';

export const ATTACHMENT_KINDS = ['image', 'file', 'video', 'voice'] as const satisfies readonly AttachmentKind[];

/** Images accepted as kind `image`: re-encoded in their own format, metadata dropped. */
export const IMAGE_MIMES = ['image/jpeg', 'image/png', 'image/webp', 'image/gif'] as const;
/** Longest side of a thumbnail, in pixels (WebP). */
export const THUMBNAIL_PX = 320;
/** Images with more pixels than this are refused (decompression bombs). */
const MAX_IMAGE_PIXELS = 50_000_000;
/** Bytes of a multipart body that are not the file (boundaries, part headers, the `kind` field). */
export const MULTIPART_ALLOWANCE = 16 * 1024;
/** Bytes read before the type is decided from them. */
const SNIFF_BYTES = 4096;
/**
 * Scratch files older than this, and stored objects this old that no attachment row names, are
 * leftovers of a crash (an upload takes far less), removed by the cleanup job.
 */
export const CRASH_LEFTOVER_MS = 3600_000;

/** Who uploads: an attachment belongs to its uploader and the uploader's merchant. */
export interface Uploader {
  type: 'visitor' | 'agent';
  id: string;
  merchantId: string;
}

export const uploaderOf = (viewer: VisitorViewer | AgentViewer): Uploader =>
  viewer.kind === 'visitor'
    ? { type: 'visitor', id: viewer.visitorId, merchantId: viewer.merchantId }
    : { type: 'agent', id: viewer.agentId, merchantId: viewer.merchantId };

/** The bootstrap's switch of each kind (`upload_limits` and these switches come from the same merchant row). */
const SWITCH_OF = { image: 'upload_img', file: 'upload_file', video: 'upload_file', voice: 'voice' } as const;
const LIMIT_NAME = {
  image: 'image_max_bytes',
  file: 'file_max_bytes',
  video: 'video_max_bytes',
  voice: 'voice_max_bytes',
} as const;

/** What the merchant allows: the limits of `uploadLimitsOf` (the bootstrap's `upload_limits`) and its switches. */
export interface UploadPolicy {
  merchant: Merchant;
  declaredKind?: AttachmentKind;
  /** The most bytes any allowed kind takes (the declared kind's limit when one was given). */
  maxBytes: number;
}

const limitOf = (m: Merchant, kind: AttachmentKind): number => {
  const limits = uploadLimitsOf(m);
  return {
    image: limits.imageMaxBytes,
    file: limits.fileMaxBytes,
    video: limits.videoMaxBytes,
    voice: limits.voiceMaxBytes,
  }[kind];
};

/** A switch counts as on only when it says `on`: absent (not configured) is off, as the bootstrap shows it. */
const switchOn = (m: Merchant, kind: AttachmentKind) => m.switches[SWITCH_OF[kind]] === 'on';

function requireSwitch(m: Merchant, kind: AttachmentKind) {
  if (!switchOn(m, kind)) {
    throw new DomainError(
      'FORBIDDEN',
      `Uploads of kind ${kind} are switched off for this merchant (${SWITCH_OF[kind]})`,
    );
  }
}

const tooLarge = (m: Merchant, kind: AttachmentKind) =>
  new DomainError(
    'PAYLOAD_TOO_LARGE',
    `File larger than the ${kind} limit of ${limitOf(m, kind)} bytes (upload_limits.${LIMIT_NAME[kind]})`,
  );

/**
 * Checks an upload before a byte of it is read: the identity's upload rate, the declared kind's
 * switch, a `Content-Length` that already says the file is too large, a storage quota used up.
 */
export async function prepareUpload(
  deps: Deps,
  uploader: Uploader,
  opts: { declaredKind?: AttachmentKind; contentLength?: number },
): Promise<UploadPolicy> {
  // The bootstrap's own lookup (through the configuration cache): what is advertised is what is enforced.
  const loaded = await loadUploadPolicy(deps, uploader.merchantId);
  if (!loaded) throw new DomainError('NOT_FOUND', 'Merchant not found');
  const { merchant } = loaded;
  const policy: UploadPolicy = { merchant, maxBytes: 0 };
  if (opts.declaredKind) {
    declareKind(policy, opts.declaredKind, opts.contentLength);
  } else {
    const allowed = ATTACHMENT_KINDS.filter((k) => switchOn(merchant, k));
    if (allowed.length === 0) {
      throw new DomainError('FORBIDDEN', 'Uploads are switched off for this merchant (upload_img, upload_file, voice)');
    }
    policy.maxBytes = Math.max(...allowed.map((k) => limitOf(merchant, k)));
    if (opts.contentLength !== undefined && opts.contentLength > policy.maxBytes + MULTIPART_ALLOWANCE) {
      throw new DomainError(
        'PAYLOAD_TOO_LARGE',
        `Request larger than the largest upload limit of ${policy.maxBytes} bytes`,
      );
    }
  }
  const perMinute = deps.config.attachments.uploadsPerMinute;
  await deps
    .rateLimiter({ name: 'upload', points: perMinute, durationSeconds: 60 })
    .consume(
      `${uploader.type}:${uploader.id}`,
      (wait) => `Too many uploads: at most ${perMinute} a minute, retry in ${wait} s`,
    );
  if ((await storageUsed(deps.db, merchant.id)) >= merchant.storageQuotaBytes) throw quotaExceeded(merchant);
  return policy;
}

/**
 * The client says which kind it sends (before the file): that kind's switch and limit apply
 * from the first byte, and a `Content-Length` over the limit is refused without reading.
 */
export function declareKind(policy: UploadPolicy, kind: AttachmentKind, contentLength?: number) {
  if (policy.declaredKind && policy.declaredKind !== kind) throw badInput('kind given twice, differently');
  requireSwitch(policy.merchant, kind);
  policy.declaredKind = kind;
  policy.maxBytes = limitOf(policy.merchant, kind);
  if (contentLength !== undefined && contentLength > policy.maxBytes + MULTIPART_ALLOWANCE) {
    throw tooLarge(policy.merchant, kind);
  }
}

const quotaExceeded = (m: Merchant) =>
  new DomainError(
    'PAYLOAD_TOO_LARGE',
    `The merchant's attachment storage quota of ${m.storageQuotaBytes} bytes is used up (storage_quota_bytes)`,
  );

async function storageUsed(db: Db, merchantId: string): Promise<number> {
  const [row] = await db
    .select({ used: sql<string>`coalesce(sum(${attachments.size}), 0)` })
    .from(attachments)
    .where(eq(attachments.merchantId, merchantId));
  return Number(row?.used ?? 0);
}

/** The type of a file, from its first bytes; `family` says which kinds it may be. */
export interface Sniffed {
  mime: string;
  family: 'image' | 'video' | 'audio' | 'other';
}

const ascii = (b: Buffer, start: number, end: number) => b.subarray(start, end).toString('latin1');

/**
 * Decides a file's type from its magic numbers, never from its name or the client's
 * Content-Type. Only what a chat needs is recognised; anything else is a plain file.
 */
export function sniff(head: Buffer): Sniffed {
  const b = head;
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return { mime: 'image/jpeg', family: 'image' };
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])))
    return { mime: 'image/png', family: 'image' };
  if (/^GIF8[79]a/.test(ascii(b, 0, 6))) return { mime: 'image/gif', family: 'image' };
  if (ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 12) === 'WEBP') return { mime: 'image/webp', family: 'image' };
  if (ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 12) === 'WAVE') return { mime: 'audio/wav', family: 'audio' };
  if (ascii(b, 4, 8) === 'ftyp') {
    const brand = ascii(b, 8, 12);
    if (/^M4[AB] /.test(brand)) return { mime: 'audio/mp4', family: 'audio' };
    if (brand === 'qt  ') return { mime: 'video/quicktime', family: 'video' };
    if (/^(hei[cx]|mif1|msf1|avif|avis)/.test(brand)) return { mime: 'application/octet-stream', family: 'other' };
    return { mime: 'video/mp4', family: 'video' };
  }
  if (b.length >= 4 && b.readUInt32BE(0) === 0x1a45dfa3) {
    const webm = ascii(b, 0, Math.min(b.length, 64)).includes('webm');
    return webm ? { mime: 'video/webm', family: 'video' } : { mime: 'video/x-matroska', family: 'video' };
  }
  if (ascii(b, 0, 4) === 'OggS') {
    const text = ascii(b, 0, Math.min(b.length, 128));
    return /theora/.test(text) ? { mime: 'video/ogg', family: 'video' } : { mime: 'audio/ogg', family: 'audio' };
  }
  if (ascii(b, 0, 3) === 'ID3') return { mime: 'audio/mpeg', family: 'audio' };
  if (ascii(b, 0, 5) === '#!AMR') return { mime: 'audio/amr', family: 'audio' };
  if (ascii(b, 0, 4) === 'fLaC') return { mime: 'audio/flac', family: 'audio' };
  if (b.length >= 2 && b[0] === 0xff && ((b[1] ?? 0) & 0xf6) === 0xf0) return { mime: 'audio/aac', family: 'audio' };
  if (b.length >= 2 && b[0] === 0xff && ((b[1] ?? 0) & 0xe0) === 0xe0) return { mime: 'audio/mpeg', family: 'audio' };
  if (ascii(b, 0, 5) === '%PDF-') return { mime: 'application/pdf', family: 'other' };
  if (ascii(b, 0, 4) === 'PK\x03\x04') return { mime: 'application/zip', family: 'other' };
  return { mime: textMime(b), family: 'other' };
}

/** Markup is recognised so that it is labelled as what it is (and then only ever downloaded). */
function textMime(b: Buffer): string {
  if (b.includes(0)) return 'application/octet-stream';
  const text = b
    .toString('utf8')
    .replace(/^\uFEFF/, '')
    .trimStart()
    .toLowerCase();
  if (/<svg[\s>]/.test(text.slice(0, 1024))) return 'image/svg+xml';
  if (/^<(!doctype html|html|head|body|script|iframe|!--)/.test(text) || /<(html|script|body)[\s>]/.test(text))
    return 'text/html';
  if (text.startsWith('<?xml')) return 'application/xml';
  // A character cut at the end of the sniffed bytes is not a decoding error.
  return b.toString('utf8').slice(0, -1).includes('\uFFFD') ? 'application/octet-stream' : 'text/plain';
}

/** The kind a sniffed type makes when the client did not say, or the refusal when it said otherwise. */
function kindFor(s: Sniffed, declared: AttachmentKind | undefined): AttachmentKind {
  const imageOk = (IMAGE_MIMES as readonly string[]).includes(s.mime);
  if (!declared) {
    if (imageOk) return 'image';
    if (s.family === 'video') return 'video';
    if (s.family === 'audio') return 'voice';
    return 'file';
  }
  if (declared === 'image' && !imageOk)
    throw badInput(`The file is not an image in an accepted format (JPEG, PNG, WebP, GIF): ${s.mime}`);
  if (declared === 'video' && s.family !== 'video') throw badInput(`The file is not a video: ${s.mime}`);
  // Recorders produce voice in audio containers and in WebM/Matroska/MP4.
  if (declared === 'voice' && s.family !== 'audio' && s.family !== 'video')
    throw badInput(`The file is not audio: ${s.mime}`);
  return declared;
}

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

const incomingDir = (deps: Deps) => join(deps.config.attachments.dir, 'incoming');

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

// ---- download URLs ----------------------------------------------------------------------------

export type AttachmentVariant = 'file' | 'thumbnail';

const urlKeys = new Map<string, Buffer>();
/** The URL signing key, derived from SESSION_SECRET (never the secret itself). */
function urlKey(secret: string): Buffer {
  let key = urlKeys.get(secret);
  if (!key) {
    key = Buffer.from(hkdfSync('sha256', secret, 'parley', 'attachment download urls v1', 32));
    urlKeys.set(secret, key);
  }
  return key;
}

const signature = (deps: Deps, id: string, variant: AttachmentVariant, expires: number) =>
  createHmac('sha256', urlKey(deps.config.sessionSecret)).update(`${id}\n${variant}\n${expires}`).digest('base64url');

/** Expiry rounded up to 5 minutes, so a browser can cache the same URL for a while. */
const EXPIRY_STEP_SECONDS = 300;

/** A signed, expiring download path; whoever holds it may fetch the attachment until it expires. */
export function signedAttachmentPath(deps: Deps, id: string, variant: AttachmentVariant = 'file'): string {
  const earliest = Math.floor(deps.now() / 1000) + deps.config.attachments.urlTtlSeconds;
  const expires = Math.ceil(earliest / EXPIRY_STEP_SECONDS) * EXPIRY_STEP_SECONDS;
  const path = variant === 'file' ? `/attachments/${id}` : `/attachments/${id}/thumbnail`;
  return `${path}?expires=${expires}&sig=${signature(deps, id, variant, expires)}`;
}

/** Whether a download's `expires` and `sig` are this server's and still valid. */
export function verifyAttachmentSignature(
  deps: Deps,
  id: string,
  variant: AttachmentVariant,
  expires: string | undefined,
  sig: string | undefined,
): boolean {
  if (!expires || !sig || !/^\d{1,12}$/.test(expires)) return false;
  const at = Number(expires);
  if (at * 1000 < deps.now()) return false;
  const expected = Buffer.from(signature(deps, id, variant, at));
  const given = Buffer.from(sig);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

type AttachmentRow = typeof attachments.$inferSelect;

/** An attachment as clients see it, with freshly signed URLs. */
export const attachmentViewOf = (deps: Deps, a: AttachmentRow): AttachmentView => ({
  attachmentId: a.id,
  kind: a.kind,
  mime: a.mime,
  size: a.size,
  name: a.name,
  url: signedAttachmentPath(deps, a.id),
  thumbnailUrl: a.thumbnailKey ? signedAttachmentPath(deps, a.id, 'thumbnail') : null,
});

/** The views of several attachments (history pages), keyed by id, scoped by the merchant. */
export async function loadAttachmentViews(
  deps: Deps,
  merchantId: string,
  ids: string[],
): Promise<Map<string, AttachmentView>> {
  if (ids.length === 0) return new Map();
  const rows = await deps.db
    .select()
    .from(attachments)
    .where(and(eq(attachments.merchantId, merchantId), inArray(attachments.id, ids)));
  return new Map(rows.map((r) => [r.id, attachmentViewOf(deps, r)]));
}

/**
 * Authorizes a download: a valid signed URL, or an identity that may see the attachment (any
 * agent of its merchant; the visitor who uploaded it or whose conversation carries it). Anything
 * else, another merchant included, is "not found", so ids leak nothing.
 */
export async function authorizeDownload(
  deps: Deps,
  request: {
    id: string;
    variant: AttachmentVariant;
    expires?: string;
    sig?: string;
    /** Resolved only when the URL is not validly signed. */
    viewer: () => Promise<VisitorViewer | AgentViewer | undefined>;
  },
): Promise<AttachmentRow> {
  const notFound = () => new DomainError('NOT_FOUND', 'No such attachment');
  const [row] = await deps.db.select().from(attachments).where(eq(attachments.id, request.id)).limit(1);
  if (verifyAttachmentSignature(deps, request.id, request.variant, request.expires, request.sig)) {
    if (!row) throw notFound();
    return row;
  }
  const viewer = await request.viewer().catch(() => undefined);
  if (!row || !viewer || viewer.merchantId !== row.merchantId) throw notFound();
  if (viewer.kind === 'agent') return row;
  if (row.uploaderType === 'visitor' && row.uploaderId === viewer.visitorId) return row;
  const [carried] = await deps.db
    .select({ id: messages.id })
    .from(messages)
    .where(
      and(
        eq(messages.attachmentId, row.id),
        eq(messages.visitorId, viewer.visitorId),
        eq(messages.merchantId, viewer.merchantId),
      ),
    )
    .limit(1);
  if (!carried) throw notFound();
  return row;
}

/** Whether a browser may show the attachment in place: re-encoded images, audio and video only. */
export const rendersInline = (a: Pick<AttachmentRow, 'kind' | 'mime'>) =>
  (a.kind === 'image' && (IMAGE_MIMES as readonly string[]).includes(a.mime)) ||
  ((a.kind === 'video' || a.kind === 'voice') && /^(audio|video)\//.test(a.mime));

// ---- messages ---------------------------------------------------------------------------------

/**
 * For the message domain, inside its send transaction: the attachment a message refers to must
 * be a finished upload of the same sender (uploader and merchant) and, when given, of the
 * message's kind; it is then marked referenced, which keeps the cleanup job away from it.
 */
export async function claimAttachmentForMessage(
  deps: Deps,
  tx: Db,
  sender: Uploader,
  attachmentId: string,
  expectedKind?: AttachmentKind,
): Promise<AttachmentView> {
  const [row] = await tx
    .select()
    .from(attachments)
    .where(
      and(
        eq(attachments.id, attachmentId),
        eq(attachments.merchantId, sender.merchantId),
        eq(attachments.uploaderType, sender.type),
        eq(attachments.uploaderId, sender.id),
      ),
    )
    .for('update')
    .limit(1);
  if (!row)
    throw new DomainError('NOT_FOUND', 'No such attachment: upload the file first (only its uploader may send it)');
  if (expectedKind && row.kind !== expectedKind) {
    throw badInput(`The attachment is of kind ${row.kind}, not ${expectedKind}`);
  }
  if (!row.referencedAt) {
    await tx
      .update(attachments)
      .set({ referencedAt: new Date(deps.now()) })
      .where(eq(attachments.id, row.id));
  }
  return attachmentViewOf(deps, row);
}

// ---- cleanup ----------------------------------------------------------------------------------

/**
 * Removes the uploads no message referenced within ATTACHMENT_UNREFERENCED_TTL_SECONDS (rows
 * and objects), and scratch files that a crash left behind. Returns how many uploads went.
 */
export async function removeUnreferencedAttachments(deps: Deps, storage: ObjectStorage): Promise<number> {
  const cutoff = new Date(deps.now() - deps.config.attachments.unreferencedTtlSeconds * 1000);
  let removed = 0;
  for (;;) {
    // A claim locks the row and sets referenced_at in its transaction: this delete skips it or waits for it.
    const batch = await deps.db
      .delete(attachments)
      .where(
        inArray(
          attachments.id,
          deps.db
            .select({ id: attachments.id })
            .from(attachments)
            .where(and(isNull(attachments.referencedAt), lt(attachments.createdAt, cutoff)))
            .limit(200),
        ),
      )
      .returning({ storageKey: attachments.storageKey, thumbnailKey: attachments.thumbnailKey });
    for (const a of batch) {
      await storage.delete(a.storageKey);
      if (a.thumbnailKey) await storage.delete(a.thumbnailKey);
    }
    removed += batch.length;
    if (batch.length < 200) break;
  }
  const entries = await readdir(incomingDir(deps)).catch(() => [] as string[]);
  for (const entry of entries) {
    const path = join(incomingDir(deps), entry);
    const info = await stat(path).catch(() => undefined);
    if (info && Date.now() - info.mtimeMs > CRASH_LEFTOVER_MS) await rm(path, { force: true });
  }
  if (removed > 0) deps.log.info({ removed }, 'unreferenced attachments removed');
  return removed;
}

/** An object key of an upload (`{merchant_id}/{attachment_id}`, or its thumbnail's): the attachment id. */
const UPLOAD_KEY = /^[^/]+\/(att_[A-Za-z0-9_-]+)(\.thumb\.webp)?$/;

/**
 * Removes stored objects that no attachment row names, written more than CRASH_LEFTOVER_MS ago:
 * an upload's object is stored before its row is written, so a crash in between (or a failed
 * removal) leaves one. Only keys shaped as an upload's are considered, so other objects in a
 * shared bucket are never touched. Returns how many objects went.
 */
export async function removeOrphanObjects(deps: Deps, storage: ObjectStorage): Promise<number> {
  const before = new Date(deps.now() - CRASH_LEFTOVER_MS);
  let removed = 0;
  for await (const keys of storage.listWrittenBefore('', before)) {
    const idOfKey = new Map<string, string>();
    for (const key of keys) {
      const id = UPLOAD_KEY.exec(key)?.[1];
      if (id) idOfKey.set(key, id);
    }
    if (idOfKey.size === 0) continue;
    const rows = await deps.db
      .select({ id: attachments.id })
      .from(attachments)
      .where(inArray(attachments.id, [...new Set(idOfKey.values())]));
    const recorded = new Set(rows.map((r) => r.id));
    for (const [key, id] of idOfKey) {
      if (recorded.has(id)) continue;
      await storage.delete(key);
      removed++;
    }
  }
  if (removed > 0) deps.log.info({ removed }, 'attachment objects without a row removed');
  return removed;
}

/**
 * The periodic cleanup, started and stopped by the composition root: unreferenced uploads and
 * scratch files on every run, objects without a row on the first run and then once an hour
 * (that lists the whole bucket).
 */
export function startAttachmentCleanup(
  deps: Deps,
  storage: ObjectStorage,
  opts: { intervalMs?: number } = {},
): { stop(): Promise<void> } {
  const intervalMs = opts.intervalMs ?? Math.min(300_000, deps.config.attachments.unreferencedTtlSeconds * 250);
  let orphansDue = 0;
  const run = async () => {
    await removeUnreferencedAttachments(deps, storage);
    if (Date.now() < orphansDue) return;
    orphansDue = Date.now() + CRASH_LEFTOVER_MS;
    await removeOrphanObjects(deps, storage);
  };
  let running: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    running ??= run()
      .catch((error) => deps.log.warn({ err: String(error) }, 'attachment cleanup failed'))
      .finally(() => {
        running = undefined;
      });
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
