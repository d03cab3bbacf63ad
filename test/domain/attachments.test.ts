import { readdirSync, rmSync } from 'node:fs';
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { eq } from 'drizzle-orm';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { attachments, merchants } from '../../src/db/schema.js';
import { DomainError } from '../../src/errors.js';
import { newId } from '../../src/ids.js';
import { claimAttachmentForMessage } from '../../src/resolvers/attachments/claim.js';
import {
  CRASH_LEFTOVER_MS,
  removeUnreferencedAttachments,
  startAttachmentCleanup,
} from '../../src/resolvers/attachments/cleanup.js';
import {
  authorizeDownload,
  loadAttachmentViews,
  rendersInline,
  signedAttachmentPath,
  verifyAttachmentSignature,
} from '../../src/resolvers/attachments/download.js';
import {
  declareKind,
  MULTIPART_ALLOWANCE,
  prepareUpload,
  type Uploader,
  uploaderOf,
} from '../../src/resolvers/attachments/policy.js';
import { sniff } from '../../src/resolvers/attachments/sniff.js';
import { cleanFileName, receiveUpload, THUMBNAIL_PX } from '../../src/resolvers/attachments/upload.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import type { ObjectStorage } from '../../src/stores/storage/index.js';
import {
  eventually,
  type Factories,
  refusalOf,
  type TestDeps,
  type TestMerchant,
  useLocalAttachmentDeps,
} from '../support/deps.js';
import { movie } from '../support/media.js';

/** Attachments (docs/attachments.md): switches and limits, the type from the bytes, storage, signed downloads. */

/** The worker's deps with an attachments directory of this file's own. */
let deps: TestDeps;
let storage: ObjectStorage;
let dir: string;
let f: Factories;
useLocalAttachmentDeps((made) => ({ deps, f, storage, dir } = made));

const ALL_ON = { upload_img: 'on', upload_file: 'on', voice: 'on' };

/** A merchant with the given switches and limits, and a visitor of it as the uploader. */
async function shop(
  switches: Record<string, string> = ALL_ON,
  set: Partial<typeof merchants.$inferInsert> = {},
): Promise<{ m: TestMerchant; uploader: Uploader }> {
  const m = await f.merchant({ switches });
  if (Object.keys(set).length) await deps.db.update(merchants).set(set).where(eq(merchants.id, m.merchantId));
  const v = await f.visitor(m);
  return { m, uploader: uploaderOf(v) };
}

const bytes = (...values: number[]) => Buffer.from(values);
const latin1 = (s: string) => Buffer.from(s, 'latin1');
const upload = (policy: Awaited<ReturnType<typeof prepareUpload>>, uploader: Uploader, chunks: Buffer[], name = 'x') =>
  receiveUpload(deps, storage, uploader, policy, { stream: Readable.from(chunks), name });

/** What is kept of a merchant's uploads: rows, objects, scratch files. */
async function kept(merchantId: string) {
  const rows = await deps.db.select().from(attachments).where(eq(attachments.merchantId, merchantId));
  let incoming: string[] = [];
  try {
    incoming = readdirSync(join(dir, 'incoming'));
  } catch {}
  return { rows: rows.length, objects: (await storage.list(merchantId)).length, incoming: incoming.length };
}

const png = (width = 400, height = 300) =>
  sharp({ create: { width, height, channels: 3, background: { r: 200, g: 20, b: 20 } } })
    .png()
    .withMetadata({ exif: { IFD0: { Copyright: 'secret-gps-owner' } } })
    .toBuffer();

describe('The type comes from the bytes (sniff)', () => {
  it('images by their magic numbers, from their shortest complete signature', () => {
    expect(sniff(bytes(0xff, 0xd8, 0xff))).toEqual({ mime: 'image/jpeg', family: 'image' });
    expect(sniff(bytes(0xff, 0xd8))).not.toEqual({ mime: 'image/jpeg', family: 'image' });
    expect(sniff(bytes(0xff, 0xd8, 0x00)).mime).not.toBe('image/jpeg');
    expect(sniff(bytes(0xff, 0x00, 0xff)).mime).not.toBe('image/jpeg');
    const pngHead = bytes(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
    expect(sniff(pngHead)).toEqual({ mime: 'image/png', family: 'image' });
    expect(sniff(pngHead.subarray(0, 7)).mime).not.toBe('image/png');
    expect(sniff(latin1('GIF87a...'))).toEqual({ mime: 'image/gif', family: 'image' });
    expect(sniff(latin1('GIF89a...'))).toEqual({ mime: 'image/gif', family: 'image' });
    expect(sniff(latin1('xGIF89a')).mime).toBe('text/plain');
    expect(sniff(latin1('GIF88a')).mime).toBe('text/plain');
    expect(sniff(latin1('RIFF\0\0\0\0WEBPVP8 '))).toEqual({ mime: 'image/webp', family: 'image' });
  });

  it('audio and video containers', () => {
    expect(sniff(latin1('RIFF\0\0\0\0WAVEfmt '))).toEqual({ mime: 'audio/wav', family: 'audio' });
    expect(sniff(latin1('RIFF\0\0\0\0AVI LIST')).family).toBe('other');
    expect(sniff(latin1('\0\0\0\x20ftypM4A \0'))).toEqual({ mime: 'audio/mp4', family: 'audio' });
    expect(sniff(latin1('\0\0\0\x20ftypM4B \0'))).toEqual({ mime: 'audio/mp4', family: 'audio' });
    expect(sniff(latin1('\0\0\0\x20ftypM4V \0'))).toEqual({ mime: 'video/mp4', family: 'video' });
    expect(sniff(latin1('\0\0\0\x20ftypqt  \0'))).toEqual({ mime: 'video/quicktime', family: 'video' });
    expect(sniff(latin1('\0\0\0\x20ftypisom\0'))).toEqual({ mime: 'video/mp4', family: 'video' });
    // HEIF/AVIF images are in the same box format, but no browser shows them everywhere: files.
    for (const brand of ['heic', 'heix', 'mif1', 'msf1', 'avif', 'avis'])
      expect(sniff(latin1(`\0\0\0\x20ftyp${brand}\0`)), brand).toEqual({
        mime: 'application/octet-stream',
        family: 'other',
      });
    const ebml = bytes(0x1a, 0x45, 0xdf, 0xa3);
    expect(sniff(ebml)).toEqual({ mime: 'video/x-matroska', family: 'video' });
    expect(sniff(ebml.subarray(0, 3)).family).toBe('other');
    expect(sniff(Buffer.concat([ebml, latin1('\x42\x82\x84webm')]))).toEqual({ mime: 'video/webm', family: 'video' });
    // Only the header (the first 64 bytes) names the doctype.
    expect(sniff(Buffer.concat([ebml, Buffer.alloc(80, 0x20), latin1('webm')])).mime).toBe('video/x-matroska');
    expect(sniff(latin1('OggS\0\x02vorbis'))).toEqual({ mime: 'audio/ogg', family: 'audio' });
    expect(sniff(latin1('OggS\0\x02\x80theora'))).toEqual({ mime: 'video/ogg', family: 'video' });
    expect(sniff(Buffer.concat([latin1('OggS'), Buffer.alloc(140), latin1('theora')])).mime).toBe('audio/ogg');
    expect(sniff(latin1('ID3\x04\0'))).toEqual({ mime: 'audio/mpeg', family: 'audio' });
    expect(sniff(latin1('#!AMR\n'))).toEqual({ mime: 'audio/amr', family: 'audio' });
    expect(sniff(latin1('fLaC\0'))).toEqual({ mime: 'audio/flac', family: 'audio' });
    expect(sniff(bytes(0xff, 0xf1))).toEqual({ mime: 'audio/aac', family: 'audio' });
    expect(sniff(bytes(0xff, 0xf9))).toEqual({ mime: 'audio/aac', family: 'audio' });
    expect(sniff(bytes(0xff, 0xfb))).toEqual({ mime: 'audio/mpeg', family: 'audio' });
    expect(sniff(bytes(0xff, 0xe3))).toEqual({ mime: 'audio/mpeg', family: 'audio' });
    expect(sniff(bytes(0xff)).family).toBe('other');
    expect(sniff(bytes(0xff, 0xc0)).family).toBe('other');
  });

  it('documents, archives and text; markup is labelled as what it is', () => {
    expect(sniff(latin1('%PDF-1.7'))).toEqual({ mime: 'application/pdf', family: 'other' });
    expect(sniff(latin1('%PDF1.7')).mime).toBe('text/plain');
    expect(sniff(latin1('PK\x03\x04rest'))).toEqual({ mime: 'application/zip', family: 'other' });
    expect(sniff(Buffer.from('hello world\n'))).toEqual({ mime: 'text/plain', family: 'other' });
    expect(sniff(Buffer.from('hello\0world')).mime).toBe('application/octet-stream');
    expect(sniff(Buffer.from('\uFEFF  <SVG width="1">')).mime).toBe('image/svg+xml');
    expect(sniff(Buffer.from('<svg>')).mime).toBe('image/svg+xml');
    expect(sniff(Buffer.from('<svgfoo')).mime).toBe('text/plain');
    expect(sniff(Buffer.from(`${'x'.repeat(1100)}<svg>`)).mime).toBe('text/plain');
    for (const page of ['<!DOCTYPE html>', '<html', '<head>', '<body', '<script>', '<iframe src=x>', '<!-- x -->'])
      expect(sniff(Buffer.from(`\n ${page}`)).mime, page).toBe('text/html');
    expect(sniff(Buffer.from('text before <script>alert(1)</script>')).mime).toBe('text/html');
    expect(sniff(Buffer.from('text before <body>')).mime).toBe('text/html');
    expect(sniff(Buffer.from('a <b>bold</b> word')).mime).toBe('text/plain');
    expect(sniff(Buffer.from('<?xml version="1.0"?><a/>')).mime).toBe('application/xml');
    expect(sniff(Buffer.from('x <?xml')).mime).toBe('text/plain');
    // Bytes that are not UTF-8 are binary; a character cut by the end of the sniffed bytes is not.
    expect(sniff(Buffer.concat([Buffer.from('ab'), bytes(0xc3), Buffer.from('cd')])).mime).toBe(
      'application/octet-stream',
    );
    expect(sniff(Buffer.concat([Buffer.from('abc'), bytes(0xc3)])).mime).toBe('text/plain');
  });
});

describe('File names', () => {
  it('no path, no control characters or quotes, at most 200 characters, never empty', () => {
    expect(cleanFileName('C:\\Users\\eve\\report.pdf')).toBe('report.pdf');
    expect(cleanFileName('../../etc/passwd')).toBe('passwd');
    expect(cleanFileName('a\u0000b\u001fc\u007fd"e.txt')).toBe('abcde.txt');
    expect(cleanFileName('  spaced name.txt  ')).toBe('spaced name.txt');
    expect(cleanFileName(undefined)).toBe('file');
    expect(cleanFileName('dir/')).toBe('file');
    expect(cleanFileName('"\u0001"')).toBe('file');
    // Counted in characters, so a cut never splits one.
    const long = cleanFileName('😀'.repeat(250));
    expect([...long]).toHaveLength(200);
    expect(long).toBe('😀'.repeat(200));
  });
});

describe('Signed download URLs', () => {
  const at = (now: number) => ({ ...deps, now: () => now });

  it('expire after ATTACHMENT_URL_TTL_SECONDS, rounded up to 5 minutes so a URL can be cached', () => {
    const ttl = deps.config.attachments.urlTtlSeconds;
    const now = 1_699_999_800_000; // a multiple of 300 s
    const path = signedAttachmentPath(at(now), 'att_1');
    expect(path).toMatch(new RegExp(`^/attachments/att_1\\?expires=${now / 1000 + ttl}&sig=[\\w-]{43}$`));
    const later = signedAttachmentPath(at(now + 1000), 'att_1');
    expect(new URL(later, 'http://x').searchParams.get('expires')).toBe(String(now / 1000 + ttl + 300));
    expect(signedAttachmentPath(at(now), 'att_1', 'thumbnail')).toMatch(/^\/attachments\/att_1\/thumbnail\?expires=/);
  });

  it('is valid for its id and variant until it expires; anything else is refused', () => {
    const now = 1_699_999_800_000;
    const signed = new URL(signedAttachmentPath(at(now), 'att_1'), 'http://x').searchParams;
    const expires = signed.get('expires') as string;
    const sig = signed.get('sig') as string;
    expect(verifyAttachmentSignature(at(now), 'att_1', 'file', expires, sig)).toBe(true);
    expect(verifyAttachmentSignature(at(Number(expires) * 1000), 'att_1', 'file', expires, sig)).toBe(true);
    expect(verifyAttachmentSignature(at(Number(expires) * 1000 + 1), 'att_1', 'file', expires, sig)).toBe(false);
    expect(verifyAttachmentSignature(at(now), 'att_2', 'file', expires, sig)).toBe(false);
    expect(verifyAttachmentSignature(at(now), 'att_1', 'thumbnail', expires, sig)).toBe(false);
    expect(verifyAttachmentSignature(at(now), 'att_1', 'file', String(Number(expires) + 300), sig)).toBe(false);
    expect(verifyAttachmentSignature(at(now), 'att_1', 'file', expires, `${sig.slice(0, -1)}A`)).toBe(false);
    expect(verifyAttachmentSignature(at(now), 'att_1', 'file', expires, sig.slice(0, -1))).toBe(false);
    expect(verifyAttachmentSignature(at(now), 'att_1', 'file', expires, undefined)).toBe(false);
    expect(verifyAttachmentSignature(at(now), 'att_1', 'file', undefined, sig)).toBe(false);
    expect(verifyAttachmentSignature(at(now), 'att_1', 'file', `${expires}.0`, sig)).toBe(false);
    expect(verifyAttachmentSignature(at(0), 'att_1', 'file', '1234567890123', sig)).toBe(false);
    // Another SESSION_SECRET signs differently.
    const other = { ...at(now), config: { ...deps.config, sessionSecret: `${deps.config.sessionSecret}x` } };
    expect(verifyAttachmentSignature(other, 'att_1', 'file', expires, sig)).toBe(false);
  });

  it('are shown inline only for re-encoded images, audio and video', () => {
    expect(rendersInline({ kind: 'image', mime: 'image/jpeg' })).toBe(true);
    expect(rendersInline({ kind: 'image', mime: 'image/svg+xml' })).toBe(false);
    expect(rendersInline({ kind: 'video', mime: 'video/mp4' })).toBe(true);
    expect(rendersInline({ kind: 'voice', mime: 'audio/ogg' })).toBe(true);
    expect(rendersInline({ kind: 'voice', mime: 'video/webm' })).toBe(true);
    expect(rendersInline({ kind: 'video', mime: 'application/octet-stream' })).toBe(false);
    expect(rendersInline({ kind: 'video', mime: 'text/html; video/mp4' })).toBe(false);
    expect(rendersInline({ kind: 'file', mime: 'video/mp4' })).toBe(false);
    expect(rendersInline({ kind: 'file', mime: 'image/png' })).toBe(false);
  });
});

describe('Before a byte is read (prepareUpload)', () => {
  it('every switch off → refused; absent switches are off', async () => {
    const { uploader } = await shop({ upload_img: 'off', emoji: 'on' });
    expect(await refusalOf(prepareUpload(deps, uploader, {}))).toBe(
      'FORBIDDEN: Uploads are switched off for this merchant (upload_img, upload_file, voice)',
    );
    expect(await refusalOf(prepareUpload(deps, uploader, { declaredKind: 'image' }))).toBe(
      'FORBIDDEN: Uploads of kind image are switched off for this merchant (upload_img)',
    );
  });

  it('a declared kind: its switch and its limit; video goes with upload_file', async () => {
    const { uploader } = await shop(
      { upload_file: 'on' },
      { imageMaxBytes: 5000, fileMaxBytes: 3000, videoMaxBytes: 7000, voiceMaxBytes: 2000 },
    );
    expect((await prepareUpload(deps, uploader, { declaredKind: 'file' })).maxBytes).toBe(3000);
    expect((await prepareUpload(deps, uploader, { declaredKind: 'video' })).maxBytes).toBe(7000);
    expect(await refusalOf(prepareUpload(deps, uploader, { declaredKind: 'voice' }))).toMatch(
      /^FORBIDDEN: .*\(voice\)$/,
    );
    expect(
      (await prepareUpload(deps, uploader, { declaredKind: 'file', contentLength: 3000 + MULTIPART_ALLOWANCE }))
        .declaredKind,
    ).toBe('file');
    expect(
      await refusalOf(
        prepareUpload(deps, uploader, { declaredKind: 'file', contentLength: 3001 + MULTIPART_ALLOWANCE }),
      ),
    ).toBe('PAYLOAD_TOO_LARGE: File larger than the file limit of 3000 bytes (upload_limits.file_max_bytes)');
  });

  it('no declared kind: the largest limit of the allowed kinds, with the multipart allowance', async () => {
    const { uploader } = await shop(
      { upload_img: 'on', voice: 'on', upload_file: 'off' },
      { imageMaxBytes: 5000, fileMaxBytes: 90000, videoMaxBytes: 90000, voiceMaxBytes: 6000 },
    );
    const policy = await prepareUpload(deps, uploader, { contentLength: 6000 + MULTIPART_ALLOWANCE });
    expect(policy.maxBytes).toBe(6000);
    expect(policy.declaredKind).toBeUndefined();
    expect(await refusalOf(prepareUpload(deps, uploader, { contentLength: 6001 + MULTIPART_ALLOWANCE }))).toBe(
      'PAYLOAD_TOO_LARGE: Request larger than the largest upload limit of 6000 bytes',
    );
  });

  it('the kind, when it comes later (a form field after the file name), is declared once', async () => {
    const { uploader } = await shop(ALL_ON, {
      imageMaxBytes: 5000,
      fileMaxBytes: 3000,
      videoMaxBytes: 10,
      voiceMaxBytes: 10,
    });
    const policy = await prepareUpload(deps, uploader, {});
    expect(policy.maxBytes).toBe(5000);
    declareKind(policy, 'file');
    expect(policy).toMatchObject({ declaredKind: 'file', maxBytes: 3000 });
    declareKind(policy, 'file');
    expect(await refusalOf(() => declareKind(policy, 'image'))).toBe('BAD_USER_INPUT: kind given twice, differently');
    expect(
      await refusalOf(() => declareKind({ ...policy, declaredKind: undefined }, 'file', 3001 + MULTIPART_ALLOWANCE)),
    ).toMatch(/^PAYLOAD_TOO_LARGE/);
  });

  it('uploads per identity per minute are limited', async () => {
    const { uploader } = await shop();
    const perMinute = deps.config.attachments.uploadsPerMinute;
    for (let i = 0; i < perMinute; i++) await prepareUpload(deps, uploader, {});
    expect(await refusalOf(prepareUpload(deps, uploader, {}))).toMatch(
      new RegExp(`^RATE_LIMITED: Too many uploads: at most ${perMinute} a minute, retry in \\d+ s$`),
    );
    // Per identity: another uploader of the same merchant is not held back.
    await prepareUpload(deps, { ...uploader, id: `${uploader.id}-other` }, {});
    // Per uploader type too: an agent with the same id is another identity.
    await prepareUpload(deps, { ...uploader, type: 'agent' }, {});
  });

  it("the merchant's storage quota used up → refused; an unknown merchant is not found", async () => {
    const { m, uploader } = await shop(ALL_ON, { storageQuotaBytes: 100 });
    const referencedAt = new Date(deps.now());
    await prepareUpload(deps, uploader, {});
    await insertAttachment(m.merchantId, uploader, { size: 99, referencedAt });
    // Uploads no message carries count in their uploader's byte budgets, not in the quota.
    await insertAttachment(m.merchantId, uploader, { size: 500 });
    await prepareUpload(deps, uploader, {});
    await insertAttachment(m.merchantId, uploader, { size: 1, referencedAt });
    expect(await refusalOf(prepareUpload(deps, uploader, {}))).toBe(
      "PAYLOAD_TOO_LARGE: The merchant's attachment storage quota of 100 bytes is used up (storage_quota_bytes)",
    );
    expect(await refusalOf(prepareUpload(deps, { ...uploader, merchantId: 'no-such-merchant' }, {}))).toBe(
      'NOT_FOUND: Merchant not found',
    );
  });
});

async function insertAttachment(
  merchantId: string,
  uploader: Uploader,
  opts: { size?: number; kind?: 'image' | 'file'; createdAt?: Date; referencedAt?: Date; thumbnail?: boolean } = {},
) {
  const id = newId('att');
  await deps.db.insert(attachments).values({
    id,
    merchantId,
    uploaderType: uploader.type,
    uploaderId: uploader.id,
    kind: opts.kind ?? 'file',
    mime: 'text/plain',
    size: opts.size ?? 10,
    name: 'a.txt',
    storageKey: `${merchantId}/${id}`,
    thumbnailKey: opts.thumbnail ? `${merchantId}/${id}.thumb.webp` : null,
    createdAt: opts.createdAt ?? new Date(deps.now()),
    referencedAt: opts.referencedAt ?? null,
  });
  return id;
}

describe('Receiving a file (receiveUpload)', () => {
  it('a text file: stored under the merchant with its sniffed type, size and cleaned name', async () => {
    const { m, uploader } = await shop();
    const policy = await prepareUpload(deps, uploader, {});
    const view = await upload(policy, uploader, [Buffer.from('hello '), Buffer.from('world')], '../notes\u0007.txt');
    expect(view).toMatchObject({ kind: 'file', mime: 'text/plain', size: 11, name: 'notes.txt', thumbnailUrl: null });
    expect(view.url).toMatch(new RegExp(`^/attachments/${view.attachmentId}\\?expires=\\d+&sig=`));
    expect(await storage.list(m.merchantId)).toEqual([`${m.merchantId}/${view.attachmentId}`]);
    const [row] = await deps.db.select().from(attachments).where(eq(attachments.id, view.attachmentId));
    expect(row).toMatchObject({ uploaderType: 'visitor', uploaderId: uploader.id, referencedAt: null });
    expect((await kept(m.merchantId)).incoming).toBe(0);
  });

  it('an image is re-encoded without its metadata, with a WebP thumbnail of at most THUMBNAIL_PX', async () => {
    const { m, uploader } = await shop();
    const original = await png(800, 400);
    expect((await sharp(original).metadata()).exif).toBeDefined();
    const view = await upload(await prepareUpload(deps, uploader, {}), uploader, [original], 'photo.png');
    expect(view).toMatchObject({ kind: 'image', mime: 'image/png' });
    expect(view.thumbnailUrl).toMatch(new RegExp(`^/attachments/${view.attachmentId}/thumbnail\\?expires=`));
    const keys = (await storage.list(m.merchantId)).sort();
    expect(keys).toEqual([`${m.merchantId}/${view.attachmentId}`, `${m.merchantId}/${view.attachmentId}.thumb.webp`]);
    const read = async (key: string) => {
      const chunks: Buffer[] = [];
      for await (const chunk of (await storage.get(key)) as Readable) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    };
    const stored = await sharp(await read(keys[0] as string)).metadata();
    expect(stored).toMatchObject({ format: 'png', width: 800, height: 400 });
    expect(stored.exif).toBeUndefined();
    const thumb = await sharp(await read(keys[1] as string)).metadata();
    expect(thumb).toMatchObject({ format: 'webp', width: THUMBNAIL_PX, height: THUMBNAIL_PX / 2 });
    // A small image is not enlarged.
    const small = await upload(await prepareUpload(deps, uploader, {}), uploader, [await png(40, 30)]);
    const smallThumb = await sharp(await read(`${m.merchantId}/${small.attachmentId}.thumb.webp`)).metadata();
    expect(smallThumb).toMatchObject({ width: 40, height: 30 });
  });

  it('the kind from the bytes: audio is voice, video is video, and their switches apply', async () => {
    const { uploader } = await shop({ voice: 'on', upload_file: 'on' });
    const policy = () => prepareUpload(deps, uploader, {});
    expect((await upload(await policy(), uploader, [latin1('ID3\x04\0rest of the song')])).kind).toBe('voice');
    expect((await upload(await policy(), uploader, [movie()])).kind).toBe('video');
    // Declared voice: audio, and recorders' video containers, are accepted; a PDF is not.
    const voice = async () => declared(await policy(), 'voice');
    expect((await upload(await voice(), uploader, [latin1('OggS\0\x02vorbis')])).mime).toBe('audio/ogg');
    expect((await upload(await voice(), uploader, [movie()])).kind).toBe('voice');
    expect(await refusalOf(upload(await voice(), uploader, [latin1('%PDF-1.4')]))).toBe(
      'BAD_USER_INPUT: The file is not audio: application/pdf',
    );
    const video = async () => declared(await policy(), 'video');
    expect(await refusalOf(upload(await video(), uploader, [latin1('ID3\x04\0')]))).toBe(
      'BAD_USER_INPUT: The file is not a video: audio/mpeg',
    );
    expect((await upload(await video(), uploader, [movie({ brand: 'qt  ' })])).mime).toBe('video/quicktime');
    // An image whose switch is off: refused once the bytes say so.
    expect(await refusalOf(upload(await policy(), uploader, [await png()]))).toMatch(/^FORBIDDEN: .*\(upload_img\)$/);
    const declaredFile = async () => declared(await policy(), 'file');
    expect((await upload(await declaredFile(), uploader, [latin1('ID3\x04\0')])).kind).toBe('file');
  });

  it('declared image: only JPEG, PNG, WebP and GIF; SVG and HTML are refused; nothing is kept', async () => {
    const { m, uploader } = await shop();
    const image = async () => declared(await prepareUpload(deps, uploader, {}), 'image');
    for (const [body, mime] of [
      ['<svg xmlns="http://www.w3.org/2000/svg"/>', 'image/svg+xml'],
      ['<html><script>alert(1)</script>', 'text/html'],
    ] as const)
      expect(await refusalOf(upload(await image(), uploader, [Buffer.from(body)]))).toBe(
        `BAD_USER_INPUT: The file is not an image in an accepted format (JPEG, PNG, WebP, GIF): ${mime}`,
      );
    // Image bytes that do not decode.
    expect(await refusalOf(upload(await image(), uploader, [bytes(0xff, 0xd8, 0xff, 0, 1, 2, 3)]))).toBe(
      'BAD_USER_INPUT: The image could not be decoded (image/jpeg)',
    );
    expect(await kept(m.merchantId)).toEqual({ rows: 0, objects: 0, incoming: 0 });
  });

  it('an empty file is refused', async () => {
    const { m, uploader } = await shop();
    expect(await refusalOf(upload(await prepareUpload(deps, uploader, {}), uploader, []))).toBe(
      'BAD_USER_INPUT: The file is empty',
    );
    expect(await kept(m.merchantId)).toEqual({ rows: 0, objects: 0, incoming: 0 });
  });

  it('sizes are counted as the bytes arrive: exactly the limit passes, one byte more is refused', async () => {
    const { m, uploader } = await shop(ALL_ON, { fileMaxBytes: 6000, imageMaxBytes: 9000 });
    const policy = () => prepareUpload(deps, uploader, {});
    const text = (n: number) => [Buffer.alloc(4000, 'a'), Buffer.alloc(n - 4000, 'b')];
    expect((await upload(await policy(), uploader, text(6000))).size).toBe(6000);
    // Decided as a file after the first SNIFF_BYTES: the file limit, not the largest one, applies.
    expect(await refusalOf(upload(await policy(), uploader, text(6001)))).toBe(
      'PAYLOAD_TOO_LARGE: File larger than the file limit of 6000 bytes (upload_limits.file_max_bytes)',
    );
    // A small file decided at its end is held to its kind's limit too.
    const { uploader: u2 } = await shop(ALL_ON, { fileMaxBytes: 100, imageMaxBytes: 9000 });
    expect(await refusalOf(upload(await prepareUpload(deps, u2, {}), u2, [Buffer.alloc(101, 'a')]))).toMatch(
      /^PAYLOAD_TOO_LARGE: File larger than the file limit of 100 bytes/,
    );
    expect((await upload(await prepareUpload(deps, u2, {}), u2, [Buffer.alloc(100, 'a')])).size).toBe(100);
    // Before the kind is known, the largest limit applies to what has arrived.
    const { uploader: u3 } = await shop(ALL_ON, {
      fileMaxBytes: 100,
      imageMaxBytes: 2000,
      voiceMaxBytes: 10,
      videoMaxBytes: 10,
    });
    expect(await refusalOf(upload(await prepareUpload(deps, u3, {}), u3, [Buffer.alloc(2001, 'a')]))).toBe(
      'PAYLOAD_TOO_LARGE: File larger than 2000 bytes',
    );
    expect(await kept(m.merchantId)).toMatchObject({ rows: 1, objects: 1, incoming: 0 });
  });

  it('the quota is checked again when the row is written: two uploads cannot both take the last bytes', async () => {
    const { m, uploader } = await shop(ALL_ON, { storageQuotaBytes: 1000 });
    const policy = await prepareUpload(deps, uploader, {});
    await insertAttachment(m.merchantId, uploader, { size: 995, referencedAt: new Date(deps.now()) });
    expect(await refusalOf(upload(policy, uploader, [Buffer.from('123456')]))).toMatch(/^PAYLOAD_TOO_LARGE: .*quota/);
    expect(await kept(m.merchantId)).toEqual({ rows: 1, objects: 0, incoming: 0 });
    // Exactly the rest of the quota fits.
    expect((await upload(policy, uploader, [Buffer.from('12345')])).size).toBe(5);
  });
});

/** A policy with `kind` declared. */
function declared(policy: Awaited<ReturnType<typeof prepareUpload>>, kind: 'image' | 'file' | 'video' | 'voice') {
  declareKind(policy, kind);
  return policy;
}

describe('Who may download (authorizeDownload)', () => {
  it('a valid signature, with no identity; an unknown id is not found even signed', async () => {
    const { m, uploader } = await shop();
    const id = await insertAttachment(m.merchantId, uploader);
    const signed = new URL(signedAttachmentPath(deps, id), 'http://x').searchParams;
    const request = (attachmentId: string, viewer = async () => undefined) => {
      const sig = new URL(signedAttachmentPath(deps, attachmentId), 'http://x').searchParams;
      return {
        id: attachmentId,
        variant: 'file' as const,
        expires: sig.get('expires') ?? undefined,
        sig: sig.get('sig') ?? undefined,
        viewer,
      };
    };
    expect((await authorizeDownload(deps, request(id))).id).toBe(id);
    expect(await refusalOf(authorizeDownload(deps, request('att_missing')))).toBe('NOT_FOUND: No such attachment');
    // A forged signature is no signature: an identity is needed.
    expect(
      await refusalOf(
        authorizeDownload(deps, {
          id,
          variant: 'file',
          expires: signed.get('expires') ?? undefined,
          sig: 'forged',
          viewer: async () => undefined,
        }),
      ),
    ).toBe('NOT_FOUND: No such attachment');
  });

  it("the merchant's agents; the uploading visitor; a visitor whose conversation carries it; nobody else", async () => {
    const { m } = await shop();
    const other = await f.merchant({ switches: ALL_ON });
    const agent = await f.agent(m);
    const uploaderVisitor = await f.visitor(m);
    const otherVisitor = await f.visitor(m);
    const id = await insertAttachment(m.merchantId, uploaderOf(uploaderVisitor));
    const byAgent = await insertAttachment(m.merchantId, uploaderOf(agent));
    const as = (viewer: unknown, attachmentId = id) =>
      refusalOf(authorizeDownload(deps, { id: attachmentId, variant: 'file', viewer: async () => viewer as never }));
    expect(await as(agent)).toBe('no error');
    expect(await as(uploaderVisitor)).toBe('no error');
    expect(await as(otherVisitor)).toBe('NOT_FOUND: No such attachment');
    expect(await as(undefined)).toBe('NOT_FOUND: No such attachment');
    expect(await as(await f.agent(other))).toBe('NOT_FOUND: No such attachment');
    expect(await as(await f.visitor(other))).toBe('NOT_FOUND: No such attachment');
    expect(await as(agent, 'att_missing')).toBe('NOT_FOUND: No such attachment');
    // An identity that fails to resolve (a revoked token) is no identity.
    expect(
      await refusalOf(
        authorizeDownload(deps, {
          id,
          variant: 'file',
          viewer: async () => {
            throw new DomainError('UNAUTHENTICATED', 'revoked');
          },
        }),
      ),
    ).toBe('NOT_FOUND: No such attachment');
    // The agent's upload: not the visitor's until a message of its conversation carries it.
    expect(await as(uploaderVisitor, byAgent)).toBe('NOT_FOUND: No such attachment');
    await f.online(agent);
    const chat = await f.conversation(m);
    expect(chat.agent?.agentId).toBe(agent.agentId);
    await sendMessage(deps, agent, {
      visitorId: chat.visitor.visitorId,
      clientMsgId: 'k',
      type: 'file',
      attachmentId: byAgent,
    });
    expect(await as(chat.visitor, byAgent)).toBe('no error');
    expect(await as(uploaderVisitor, byAgent)).toBe('NOT_FOUND: No such attachment');
  });
});

describe('Messages and cleanup', () => {
  it('a claim marks the attachment referenced once; the views are scoped by the merchant', async () => {
    const { m, uploader } = await shop();
    const id = await insertAttachment(m.merchantId, uploader, { kind: 'image' });
    const first = new Date(deps.now() - 60_000);
    const tx = deps.db as never;
    expect((await claimAttachmentForMessage({ ...deps, now: () => first.getTime() }, tx, uploader, id)).kind).toBe(
      'image',
    );
    await claimAttachmentForMessage(deps, tx, uploader, id, 'image');
    const [row] = await deps.db.select().from(attachments).where(eq(attachments.id, id));
    expect(row?.referencedAt?.getTime()).toBe(first.getTime());
    expect(await refusalOf(claimAttachmentForMessage(deps, tx, uploader, id, 'file'))).toBe(
      'BAD_USER_INPUT: The attachment is of kind image, not file',
    );
    expect(await refusalOf(claimAttachmentForMessage(deps, tx, { ...uploader, type: 'agent' }, id))).toMatch(
      /^NOT_FOUND/,
    );

    const views = await loadAttachmentViews(deps, m.merchantId, [id, 'att_missing']);
    expect([...views.keys()]).toEqual([id]);
    expect(views.get(id)).toMatchObject({ attachmentId: id, kind: 'image', mime: 'text/plain', size: 10 });
    expect((await loadAttachmentViews(deps, 'another-merchant', [id])).size).toBe(0);
    expect((await loadAttachmentViews(deps, m.merchantId, [])).size).toBe(0);
  });

  it('uploads no message referenced within the TTL go (rows and objects); referenced and young ones stay', async () => {
    const { m, uploader } = await shop();
    const ttlMs = deps.config.attachments.unreferencedTtlSeconds * 1000;
    const old = new Date(deps.now() - ttlMs - 60_000);
    const put = async (id: string, thumbnail: boolean) => {
      const file = join(dir, 'put-source');
      await writeFile(file, 'x');
      await storage.putFile(`${m.merchantId}/${id}`, file, { contentType: 'text/plain', size: 1 });
      if (thumbnail) {
        await writeFile(file, 'x');
        await storage.putFile(`${m.merchantId}/${id}.thumb.webp`, file, { contentType: 'image/webp', size: 1 });
      }
    };
    const stale = await insertAttachment(m.merchantId, uploader, { createdAt: old, thumbnail: true });
    const referenced = await insertAttachment(m.merchantId, uploader, { createdAt: old, referencedAt: old });
    const young = await insertAttachment(m.merchantId, uploader);
    await put(stale, true);
    await put(referenced, false);
    await put(young, false);
    // Scratch files of uploads a crash interrupted: an hour old goes, a recent one is in progress.
    await mkdir(join(dir, 'incoming'), { recursive: true });
    await writeFile(join(dir, 'incoming', 'crashed'), 'x');
    await utimes(join(dir, 'incoming', 'crashed'), new Date(Date.now() - 3601_000), new Date(Date.now() - 3601_000));
    await writeFile(join(dir, 'incoming', 'in-progress'), 'x');

    expect(await removeUnreferencedAttachments(deps, storage)).toBe(1);
    const ids = (await deps.db.select().from(attachments).where(eq(attachments.merchantId, m.merchantId))).map(
      (a) => a.id,
    );
    expect(ids.sort()).toEqual([referenced, young].sort());
    expect((await storage.list(m.merchantId)).sort()).toEqual(
      [`${m.merchantId}/${referenced}`, `${m.merchantId}/${young}`].sort(),
    );
    expect(readdirSync(join(dir, 'incoming'))).toEqual(['in-progress']);
    expect(await removeUnreferencedAttachments(deps, storage)).toBe(0);
    rmSync(join(dir, 'incoming', 'in-progress'));
  });

  it('more than a batch of 200 leftovers all go in one run', async () => {
    const { m, uploader } = await shop();
    const old = new Date(deps.now() - deps.config.attachments.unreferencedTtlSeconds * 1000 - 60_000);
    for (let i = 0; i < 201; i++) await insertAttachment(m.merchantId, uploader, { createdAt: old });
    expect(await removeUnreferencedAttachments(deps, storage)).toBe(201);
    expect((await kept(m.merchantId)).rows).toBe(0);
  });

  it('the periodic cleanup runs by itself and stops; its first run removes objects without a row', async () => {
    const { m, uploader } = await shop();
    const old = new Date(deps.now() - deps.config.attachments.unreferencedTtlSeconds * 1000 - 60_000);
    await insertAttachment(m.merchantId, uploader, { createdAt: old });
    // An object a crash left without its row, two hours ago.
    const orphan = `${m.merchantId}/${newId('att')}`;
    const file = join(dir, 'orphan-source');
    await writeFile(file, 'x');
    await storage.putFile(orphan, file, { contentType: 'text/plain', size: 1 });
    const twoHoursAgo = new Date(deps.now() - 2 * CRASH_LEFTOVER_MS);
    await utimes(join(dir, 'objects', orphan), twoHoursAgo, twoHoursAgo);
    const cleanup = startAttachmentCleanup(deps, storage, { intervalMs: 20 });
    await eventually(async () => {
      const now = await kept(m.merchantId);
      return now.rows === 0 && now.objects === 0;
    }, 'the periodic cleanup');
    await cleanup.stop();
  });
});
