import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { eq } from 'drizzle-orm';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import type { AttachmentsConfig } from '../../src/config.js';
import { attachments, merchants, messages } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { authorizeDownload } from '../../src/resolvers/attachments/download.js';
import { createImagePool } from '../../src/resolvers/attachments/images.js';
import { declareKind, prepareUpload, type Uploader, uploaderOf } from '../../src/resolvers/attachments/policy.js';
import { purgeUploads } from '../../src/resolvers/attachments/purge.js';
import { cleanFileName, receiveUpload } from '../../src/resolvers/attachments/upload.js';
import { createWorkPool } from '../../src/resolvers/attachments/work-pool.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import type { ObjectStorage } from '../../src/stores/storage/index.js';
import {
  type Factories,
  refusalOf,
  type TestDeps,
  type TestMerchant,
  useLocalAttachmentDeps,
} from '../support/deps.js';
import { animation, fakeMovie, movie, webm } from '../support/media.js';

/**
 * Attachments under abuse (issue 27): image bombs, storage exhaustion by anonymous visitors,
 * "a video must be a video", file names that read backwards, and who may download.
 */

let deps: TestDeps;
let storage: ObjectStorage;
let dir: string;
let f: Factories;
useLocalAttachmentDeps((made) => ({ deps, f, storage, dir } = made));

const ALL_ON = { upload_img: 'on', upload_file: 'on', voice: 'on' };

/** The deps with some attachment settings changed (and a pool built from them). */
function tuned(patch: Partial<AttachmentsConfig>): Deps {
  const attachmentsConfig = { ...deps.config.attachments, ...patch };
  return {
    ...deps,
    config: { ...deps.config, attachments: attachmentsConfig },
    imageWork: createImagePool(attachmentsConfig),
  };
}

async function shop(
  set: Partial<typeof merchants.$inferInsert> = {},
): Promise<{ m: TestMerchant; uploader: Uploader }> {
  const m = await f.merchant({ switches: ALL_ON });
  if (Object.keys(set).length) await deps.db.update(merchants).set(set).where(eq(merchants.id, m.merchantId));
  const v = await f.visitor(m);
  return { m, uploader: uploaderOf(v, `10.0.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`) };
}

const send = async (
  d: Deps,
  uploader: Uploader,
  bytes: Buffer,
  opts: { kind?: 'image' | 'file' | 'video' | 'voice'; name?: string } = {},
) => {
  const policy = await prepareUpload(d, uploader, {});
  if (opts.kind) declareKind(policy, opts.kind);
  return receiveUpload(d, storage, uploader, policy, { stream: Readable.from([bytes]), name: opts.name ?? 'x' });
};

/** What is kept of a merchant's uploads: rows, objects, scratch files. */
async function kept(merchantId: string) {
  const rows = await deps.db.select().from(attachments).where(eq(attachments.merchantId, merchantId));
  let incoming: string[] = [];
  try {
    incoming = readdirSync(join(dir, 'incoming'));
  } catch {}
  return { rows: rows.length, objects: (await storage.list(merchantId)).length, incoming: incoming.length };
}

async function read(key: string) {
  const chunks: Buffer[] = [];
  for await (const chunk of (await storage.get(key)) as Readable) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe('Image bombs (row 1)', () => {
  it('the pixel budget counts every frame of an animated GIF and WebP, before decoding', async () => {
    // 12 frames of 200×150 = 360,000 pixels; one frame is 30,000.
    const d = tuned({ imageMaxPixels: 100_000 });
    for (const format of ['gif', 'webp'] as const) {
      const { m, uploader } = await shop();
      const bomb = await animation(format, 12, 200, 150);
      expect((await sharp(bomb).metadata()).pages).toBe(12);
      expect(await refusalOf(send(d, uploader, bomb))).toBe(
        'PAYLOAD_TOO_LARGE: The image has 360000 pixels (every frame counted), more than the 100000 allowed (IMAGE_MAX_PIXELS)',
      );
      // Declared as a plain file, image bytes are still decoded (their metadata goes): the same budget.
      expect(await refusalOf(send(d, uploader, bomb, { kind: 'file' }))).toMatch(
        /^PAYLOAD_TOO_LARGE: The image has 360000/,
      );
      expect(await kept(m.merchantId)).toEqual({ rows: 0, objects: 0, incoming: 0 });
      // Three frames fit (90,000), and stay animated.
      const small = await send(d, uploader, await animation(format, 3, 200, 150));
      const [row] = await deps.db.select().from(attachments).where(eq(attachments.id, small.attachmentId));
      expect((await sharp(await read(row?.storageKey as string)).metadata()).pages).toBe(3);
    }
  });

  it('a still image over the budget is refused by its header, whatever its file size', async () => {
    const { uploader } = await shop();
    const wide = await sharp({ create: { width: 1000, height: 400, channels: 3, background: '#123' } })
      .png()
      .toBuffer();
    expect(await refusalOf(send(tuned({ imageMaxPixels: 399_999 }), uploader, wide))).toMatch(
      /^PAYLOAD_TOO_LARGE: The image has 400000 pixels/,
    );
    expect((await send(tuned({ imageMaxPixels: 400_000 }), uploader, wide)).kind).toBe('image');
  });

  it('libvips decodes with one thread per image and no operation cache', async () => {
    const { uploader } = await shop();
    await send(
      deps,
      uploader,
      await sharp({ create: { width: 8, height: 8, channels: 3, background: '#000' } })
        .png()
        .toBuffer(),
    );
    expect(sharp.concurrency()).toBe(1);
    expect(sharp.cache()).toMatchObject({ memory: { max: 0 }, items: { max: 0 }, files: { max: 0 } });
  });

  it('image jobs run in a bounded pool: a merchant whose slot is taken waits, then is refused with 503 and Retry-After', async () => {
    const d = tuned({
      imageWorkers: 2,
      imageWorkersPerMerchant: 1,
      imageQueueTimeoutMs: 300,
      imageQueuePerMerchant: 4,
    });
    const { m, uploader } = await shop();
    const other = await shop();
    const image = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#c33' } })
      .png()
      .toBuffer();
    let release: () => void = () => {};
    const held = d.imageWork.run(m.merchantId, () => new Promise<void>((r) => (release = r)));
    try {
      const started = Date.now();
      const refused = await send(d, uploader, image).catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryAfterSeconds: 1 });
      expect(String((refused as Error).message)).toBe('Image processing is busy (no slot within 300 ms), retry in 1 s');
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      expect(await kept(m.merchantId)).toEqual({ rows: 0, objects: 0, incoming: 0 });
      // Another merchant has a slot of its own meanwhile.
      expect((await send(d, other.uploader, image)).kind).toBe('image');
      // Once the slot is free, the merchant's upload goes through.
      const waiting = send(d, uploader, image);
      release();
      expect((await waiting).kind).toBe('image');
    } finally {
      release();
      await held;
    }
  });
});

describe('The image-work pool', () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  it('at most `slots` jobs, `slotsPerTenant` per tenant; the oldest waiter whose tenant has room goes next', async () => {
    const pool = createWorkPool({
      slots: 2,
      slotsPerTenant: 1,
      queuePerTenant: 10,
      queueTimeoutMs: 5000,
      what: 'Work',
    });
    const order: string[] = [];
    const gates = new Map<string, () => void>();
    const job = (tenant: string, name: string) =>
      pool.run(tenant, async () => {
        order.push(name);
        await new Promise<void>((r) => gates.set(name, r));
      });
    const a1 = job('A', 'a1');
    const a2 = job('A', 'a2');
    const a3 = job('A', 'a3');
    const b1 = job('B', 'b1');
    await sleep(10);
    // a2 and a3 wait behind a1 (A's one slot); b1 takes the second slot at once.
    expect(order).toEqual(['a1', 'b1']);
    expect(pool.load()).toEqual({ running: 2, waiting: 2 });
    gates.get('b1')?.();
    await b1;
    await sleep(10);
    expect(order).toEqual(['a1', 'b1']); // A is still at its share
    gates.get('a1')?.();
    await a1;
    await sleep(10);
    expect(order).toEqual(['a1', 'b1', 'a2']);
    gates.get('a2')?.();
    await a2;
    await sleep(10);
    gates.get('a3')?.();
    await a3;
    expect(order).toEqual(['a1', 'b1', 'a2', 'a3']);
    expect(pool.load()).toEqual({ running: 0, waiting: 0 });
  });

  it('a tenant with queuePerTenant jobs waiting is refused at once; a waiter past its deadline is refused', async () => {
    const pool = createWorkPool({ slots: 1, slotsPerTenant: 1, queuePerTenant: 1, queueTimeoutMs: 200, what: 'Work' });
    let release: () => void = () => {};
    const running = pool.run('A', () => new Promise<void>((r) => (release = r)));
    const waiting = pool.run('A', async () => 'late').catch((e: unknown) => e);
    expect(await refusalOf(pool.run('A', async () => 'x'))).toBe(
      'SERVICE_UNAVAILABLE: Work is busy (1 jobs already waiting), retry in 1 s',
    );
    expect(await waiting).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryAfterSeconds: 1 });
    expect(pool.load()).toEqual({ running: 1, waiting: 0 });
    release();
    await running;
    // A job that fails frees its slot too.
    await expect(pool.run('A', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(pool.load()).toEqual({ running: 0, waiting: 0 });
    expect(await pool.run('B', async () => 'ran')).toBe('ran');
  });
});

describe('Storage exhaustion (row 4)', () => {
  it('a visitor has a byte budget per hour: an upload past it is refused (429, Retry-After) and not kept', async () => {
    const d = tuned({ uploadBytesPerVisitorPerHour: 10_000 });
    const { m, uploader } = await shop();
    expect((await send(d, uploader, Buffer.alloc(6000, 'a'))).size).toBe(6000);
    const refused = await send(d, uploader, Buffer.alloc(6000, 'b')).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'RATE_LIMITED' });
    expect((refused as { retryAfterSeconds: number }).retryAfterSeconds).toBeGreaterThan(0);
    expect((refused as Error).message).toMatch(
      /^Upload budget used up: at most 10000 bytes an hour per visitor \(UPLOAD_BYTES_PER_VISITOR_PER_HOUR\), retry in \d+ s$/,
    );
    expect(await kept(m.merchantId)).toEqual({ rows: 1, objects: 1, incoming: 0 });
    // The refused bytes were given back: what is left still fits.
    expect((await send(d, uploader, Buffer.alloc(4000, 'c'))).size).toBe(4000);
    // Once used up, refused before a byte is read.
    expect(await refusalOf(prepareUpload(d, uploader, {}))).toMatch(/^RATE_LIMITED: Upload budget used up/);
  });

  it('visitors of one client address share a byte budget, whatever their tokens', async () => {
    const d = tuned({ uploadBytesPerAddressPerHour: 10_000 });
    const { m } = await shop();
    const address = `10.9.${Math.floor(Math.random() * 250)}.1`;
    const visitor = async () => uploaderOf(await f.visitor(m), address);
    expect((await send(d, await visitor(), Buffer.alloc(6000, 'a'))).size).toBe(6000);
    expect(await refusalOf(send(d, await visitor(), Buffer.alloc(6000, 'a')))).toMatch(
      /^RATE_LIMITED: Upload budget used up: at most 10000 bytes an hour per client address \(UPLOAD_BYTES_PER_ADDRESS_PER_HOUR\)/,
    );
    // Another address is not held back, nor is an agent at the same address.
    expect((await send(d, uploaderOf(await f.visitor(m), '10.8.0.1'), Buffer.alloc(6000, 'a'))).size).toBe(6000);
    expect((await send(d, uploaderOf(await f.agent(m), address), Buffer.alloc(6000, 'a'))).size).toBe(6000);
  });

  it("unreferenced uploads stay outside the merchant's quota; sending one as a message brings it in, within the quota", async () => {
    const { m, uploader } = await shop({ storageQuotaBytes: 6000 });
    const agent = await f.agent(m);
    // Anonymous uploads no message carries do not use up the quota: the agent can still upload.
    const first = await send(deps, uploader, Buffer.alloc(4000, 'a'));
    const second = await send(deps, uploader, Buffer.alloc(4000, 'b'));
    expect((await send(deps, uploaderOf(agent), Buffer.alloc(4000, 'c'))).size).toBe(4000);
    await f.online(agent);
    const chat = await f.conversation(m);
    const visitor = chat.visitor;
    const own = uploaderOf(visitor, '10.1.1.1');
    const mine = await send(deps, own, Buffer.alloc(4000, 'd'));
    const next = await send(deps, own, Buffer.alloc(2500, 'e'));
    await sendMessage(deps, visitor, { clientMsgId: 'one', type: 'file', attachmentId: mine.attachmentId });
    expect(
      await refusalOf(
        sendMessage(deps, visitor, { clientMsgId: 'two', type: 'file', attachmentId: next.attachmentId }),
      ),
    ).toBe("PAYLOAD_TOO_LARGE: The merchant's attachment storage quota of 6000 bytes is used up (storage_quota_bytes)");
    const carried = await deps.db.select().from(messages).where(eq(messages.visitorId, visitor.visitorId));
    expect(carried.filter((row) => row.attachmentId).map((row) => row.attachmentId)).toEqual([mine.attachmentId]);
    // An upload that cannot fit beside the referenced bytes is refused at once.
    expect(await refusalOf(send(deps, own, Buffer.alloc(2001, 'f')))).toMatch(
      /^PAYLOAD_TOO_LARGE: .*storage_quota_bytes/,
    );
    expect([first, second].every((a) => a.size === 4000)).toBe(true);
  });

  it('an operator purges every upload of one uploader (rows and objects); messages lose the attachment, not their text', async () => {
    const { m, uploader } = await shop();
    const other = uploaderOf(await f.visitor(m), '10.2.2.2');
    const agent = await f.agent(m);
    await f.online(agent);
    const chat = await f.conversation(m);
    const flooder = uploaderOf(chat.visitor, '10.3.3.3');
    const image = await sharp({ create: { width: 50, height: 50, channels: 3, background: '#0a0' } })
      .png()
      .toBuffer();
    const sent = await send(deps, flooder, image);
    await sendMessage(deps, chat.visitor, { clientMsgId: 'p', type: 'image', attachmentId: sent.attachmentId });
    await send(deps, flooder, Buffer.alloc(3000, 'x'));
    const kept1 = await send(deps, other, Buffer.alloc(100, 'y'));
    const kept2 = await send(deps, uploader, Buffer.alloc(100, 'z'));
    expect(await purgeUploads(deps, { bid: m.bid, visitor: flooder.id })).toEqual({
      removed: 2,
      bytes: sent.size + 3000,
    });
    const left = await deps.db.select().from(attachments).where(eq(attachments.merchantId, m.merchantId));
    expect(left.map((a) => a.id).sort()).toEqual([kept1.attachmentId, kept2.attachmentId].sort());
    expect((await storage.list(m.merchantId)).sort()).toEqual(left.map((a) => a.storageKey).sort());
    const [message] = await deps.db.select().from(messages).where(eq(messages.clientMsgId, 'p'));
    expect(message).toMatchObject({ attachmentId: null, type: 'image' });
    expect(await refusalOf(purgeUploads(deps, { bid: m.bid }))).toBe(
      'BAD_USER_INPUT: Name the uploader: --visitor or --agent',
    );
    expect(await refusalOf(purgeUploads(deps, { bid: 'no-such-bid', visitor: flooder.id }))).toBe(
      'NOT_FOUND: Merchant not found',
    );
  });
});

describe('A video must be a video (row 4)', () => {
  it('ftyp then filler is not a video, declared or derived, and is not kept', async () => {
    const { m, uploader } = await shop();
    for (const kind of ['video', undefined] as const)
      expect(await refusalOf(send(deps, uploader, fakeMovie(6000), { kind }))).toMatch(
        /^BAD_USER_INPUT: The file is not a valid MP4\/QuickTime movie: /,
      );
    expect(await kept(m.merchantId)).toEqual({ rows: 0, objects: 0, incoming: 0 });
  });

  it('a movie with a video track is a video: moov first or last, 64-bit box sizes, MP4 or QuickTime', async () => {
    const { uploader } = await shop();
    expect(await send(deps, uploader, movie({ size: 50_000 }))).toMatchObject({
      kind: 'video',
      mime: 'video/mp4',
      size: 50_000,
    });
    expect((await send(deps, uploader, movie({ size: 50_000, moovLast: true }), { kind: 'video' })).kind).toBe('video');
    expect((await send(deps, uploader, movie({ size: 9000, largeMdat: true }))).kind).toBe('video');
    expect((await send(deps, uploader, movie({ brand: 'qt  ' }))).mime).toBe('video/quicktime');
  });

  it('the boxes must chain to the last byte; the movie box must be there, with the kind’s track', async () => {
    const { uploader } = await shop();
    const good = movie({ size: 20_000 });
    const error = (bytes: Buffer, kind?: 'video' | 'voice') => refusalOf(send(deps, uploader, bytes, { kind }));
    expect(await error(good.subarray(0, good.length - 1))).toMatch(/box mdat runs past the end of the file/);
    expect(await error(Buffer.concat([good, Buffer.from('trailing')]))).toMatch(/not a valid MP4\/QuickTime movie/);
    const noMoov = movie({ size: 20_000 });
    noMoov.write('free', noMoov.indexOf('moov'), 'latin1');
    expect(await error(noMoov)).toMatch(/it has no movie box \(moov\)/);
    expect(await error(movie({ handlers: ['soun'] }), 'video')).toBe(
      'BAD_USER_INPUT: The file is not a video: it has no video track',
    );
    // Sound only: voice (declared, or derived from a movie without a picture).
    expect((await send(deps, uploader, movie({ handlers: ['soun'] }), { kind: 'voice' })).kind).toBe('voice');
    expect((await send(deps, uploader, movie({ handlers: ['soun'] }))).kind).toBe('voice');
    expect(await error(movie({ handlers: ['hint'] }), 'voice')).toBe(
      'BAD_USER_INPUT: The file is not audio: it has no sound or video track',
    );
  });
});

describe('A WebM/Matroska video must be one too (row 4)', () => {
  it('EBML magic then filler is not a video, declared or derived', async () => {
    const { m, uploader } = await shop();
    const fake = Buffer.alloc(6000, 0x42);
    Buffer.from([0x1a, 0x45, 0xdf, 0xa3]).copy(fake);
    for (const kind of ['video', undefined] as const)
      expect(await refusalOf(send(deps, uploader, fake, { kind }))).toMatch(
        /^BAD_USER_INPUT: The file is not a valid WebM\/Matroska movie: /,
      );
    expect(await kept(m.merchantId)).toEqual({ rows: 0, objects: 0, incoming: 0 });
  });

  it('a WebM with a video track is a video (segment of unknown or known size); sound only is voice', async () => {
    const { uploader } = await shop();
    expect(await send(deps, uploader, webm({ size: 30_000 }))).toMatchObject({ kind: 'video', mime: 'video/webm' });
    expect((await send(deps, uploader, webm({ size: 30_000, knownSize: true }), { kind: 'video' })).kind).toBe('video');
    expect((await send(deps, uploader, webm({ docType: 'matroska' }))).mime).toBe('video/x-matroska');
    expect(await send(deps, uploader, webm({ trackTypes: [2] }))).toMatchObject({ kind: 'voice', mime: 'audio/webm' });
    expect(await refusalOf(send(deps, uploader, webm({ trackTypes: [2] }), { kind: 'video' }))).toBe(
      'BAD_USER_INPUT: The file is not a video: it has no video track',
    );
    const good = webm({ size: 20_000, knownSize: true });
    expect(await refusalOf(send(deps, uploader, good.subarray(0, good.length - 1)))).toMatch(
      /runs past the end of the file/,
    );
    expect(await refusalOf(send(deps, uploader, webm({ docType: 'html' })))).toMatch(
      /document type is not webm or matroska/,
    );
  });
});

describe('File names (row 8)', () => {
  it('bidirectional controls and C1 control characters are stripped, as in nicknames', () => {
    expect(cleanFileName('invoice\u202Efdp.exe')).toBe('invoicefdp.exe');
    expect(cleanFileName('a\u2066b\u2067c\u2068d\u2069e\u202Af\u202Bg\u202Ch\u202Di\u200Ej\u200Fk\u061Cl.txt')).toBe(
      'abcdefghijkl.txt',
    );
    expect(cleanFileName('x\u0085y\u009Fz.pdf')).toBe('xyz.pdf');
    expect(cleanFileName('\u202E')).toBe('file');
    // Letters of right-to-left scripts stay.
    expect(cleanFileName('تقرير.pdf')).toBe('تقرير.pdf');
  });
});

describe('Downloads follow the chat’s rule (info row)', () => {
  it('a ticket agent is refused (1403) without a signed URL, as on every chat endpoint', async () => {
    const { m, uploader } = await shop();
    const view = await send(deps, uploader, Buffer.from('hello'));
    const ticket = await f.agent(m, { level: 'ticket_agent' });
    expect(
      await refusalOf(authorizeDownload(deps, { id: view.attachmentId, variant: 'file', viewer: async () => ticket })),
    ).toMatch(/^FORBIDDEN: /);
    // The signed URL itself still works for whoever holds it.
    const signed = new URL(view.url, 'http://x').searchParams;
    const row = await authorizeDownload(deps, {
      id: view.attachmentId,
      variant: 'file',
      expires: signed.get('expires') ?? undefined,
      sig: signed.get('sig') ?? undefined,
      viewer: async () => ticket,
    });
    expect(row.id).toBe(view.attachmentId);
    // Another merchant's ticket agent learns nothing: not found.
    const stranger = await f.agent(await f.merchant(), { level: 'ticket_agent' });
    expect(
      await refusalOf(
        authorizeDownload(deps, { id: view.attachmentId, variant: 'file', viewer: async () => stranger }),
      ),
    ).toBe('NOT_FOUND: No such attachment');
  });
});

describe('Image metadata goes whatever the declared kind (info row)', () => {
  it('a JPEG sent as kind=file is re-encoded without its EXIF/GPS, and stays a file without a thumbnail', async () => {
    const { uploader } = await shop();
    const original = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#c33' } })
      .jpeg()
      .withExif({ IFD0: { Copyright: 'secret-owner', ImageDescription: 'secret-location' } })
      .toBuffer();
    expect(original.includes('secret-location')).toBe(true);
    const view = await send(deps, uploader, original, { kind: 'file', name: 'me.jpg' });
    expect(view).toMatchObject({ kind: 'file', mime: 'image/jpeg', thumbnailUrl: null, name: 'me.jpg' });
    const [row] = await deps.db.select().from(attachments).where(eq(attachments.id, view.attachmentId));
    const bytes = await read(row?.storageKey as string);
    expect(bytes.includes('secret-location')).toBe(false);
    expect(bytes.includes('secret-owner')).toBe(false);
    const meta = await sharp(bytes).metadata();
    expect(meta).toMatchObject({ format: 'jpeg', width: 64, height: 48 });
    expect(meta.exif).toBeUndefined();
    expect(view.size).toBe(bytes.length);
  });
});
