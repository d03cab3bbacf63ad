import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { conversations, messages } from '../../src/db/schema.js';
import { newId } from '../../src/ids.js';
import { claimAttachmentForMessage } from '../../src/resolvers/attachments/claim.js';
import {
  CRASH_LEFTOVER_MS,
  removeOrphanObjects,
  removeUnreferencedAttachments,
} from '../../src/resolvers/attachments/cleanup.js';
import { uploaderOf } from '../../src/resolvers/attachments/policy.js';
import { agentSession, visitorToken } from '../support/clients.js';
import { movie } from '../support/media.js';
import { withClockAhead } from '../support/test-app.js';
import { ALL_ON, attachmentsWorld, DRIVERS, setMerchant, stored, upload } from './attachments.fixtures.js';

/** A well-formed MP4 of exactly `size` bytes (ftyp, moov with a video track, mdat). */
const mp4 = (size: number) => movie({ size });

const get = (base: string, path: string, headers: Record<string, string> = {}) => fetch(base + path, { headers });
const unsigned = (url: string) => url.split('?')[0] ?? url;

describe.each(DRIVERS)('attachments: download (%s storage)', (driver) => {
  const w = attachmentsWorld(driver);
  let visitor: { token: string; uid: string };
  let image: { attachment_id: string; url: string; thumbnail_url: string; size: number };

  beforeAll(async () => {
    await setMerchant(w.t, 'demo', { switches: { ...ALL_ON } });
    await setMerchant(w.t, 'acme', { switches: { ...ALL_ON } });
    visitor = await visitorToken(w.t.url);
    const png = await sharp({ create: { width: 30, height: 20, channels: 3, background: '#0a0' } })
      .png()
      .toBuffer();
    image = (await upload(w.t.url, png, { bearer: visitor.token, filename: 'green.png' })).body.data;
  });

  describe('who may download', () => {
    it('the signed URL, with no identity at all (so <img> works), until it expires', async () => {
      const res = await get(w.t.url, image.url);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('image/png');
      expect(Number(res.headers.get('content-length'))).toBe(image.size);
      expect((await sharp(Buffer.from(await res.arrayBuffer())).metadata()).format).toBe('png');
      const later = await withClockAhead(w.t, (w.t.config.attachments.urlTtlSeconds + 600) * 1000, () =>
        get(w.t.url, image.url),
      );
      expect(later.status).toBe(404);
    });

    it('no identity and no (or a forged) signature → not found', async () => {
      expect((await get(w.t.url, unsigned(image.url))).status).toBe(404);
      const forged = image.url.replace(/sig=[^&]+/, 'sig=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
      expect((await get(w.t.url, forged)).status).toBe(404);
      // The file's signature does not open the thumbnail, nor another attachment.
      const sig = image.url.slice(image.url.indexOf('?'));
      expect((await get(w.t.url, `/attachments/${image.attachment_id}/thumbnail${sig}`)).status).toBe(404);
      const body = (await (await get(w.t.url, unsigned(image.url))).json()) as { code: number };
      expect(body.code).toBe(1404);
    });

    it('the uploading visitor, by bearer token, without a signature', async () => {
      const res = await get(w.t.url, unsigned(image.url), { authorization: `Bearer ${visitor.token}` });
      expect(res.status).toBe(200);
    });

    it("the merchant's agents, by Session, without a signature", async () => {
      const alice = await agentSession(w.t.url, 'alice');
      expect((await get(w.t.url, unsigned(image.url), { token: alice.token })).status).toBe(200);
      const cookie = [...alice.client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
      expect((await get(w.t.url, unsigned(image.url), { cookie })).status).toBe(200);
    });

    it("another merchant's agent or visitor, or another visitor of the same merchant → not found", async () => {
      const bob = await agentSession(w.t.url, 'bob');
      expect((await get(w.t.url, unsigned(image.url), { token: bob.token })).status).toBe(404);
      const acmeVisitor = await visitorToken(w.t.url, 'acme-appkey');
      expect((await get(w.t.url, unsigned(image.url), { authorization: `Bearer ${acmeVisitor.token}` })).status).toBe(
        404,
      );
      const stranger = await visitorToken(w.t.url);
      expect((await get(w.t.url, unsigned(image.url), { authorization: `Bearer ${stranger.token}` })).status).toBe(404);
    });

    it("the visitor of the conversation sees the agent's attachment once a message carries it", async () => {
      const alice = await agentSession(w.t.url, 'alice');
      const sent = (
        await upload(w.t.url, Buffer.from('%PDF-1.4 invoice'), {
          path: '/agent/upload',
          agentToken: alice.token,
          filename: 'invoice.pdf',
        })
      ).body.data;
      const other = await visitorToken(w.t.url);
      const asVisitor = { authorization: `Bearer ${other.token}` };
      expect((await get(w.t.url, unsigned(sent.url), asVisitor)).status).toBe(404);
      const deps = w.t.app.deps;
      const [agent] = await deps.db.query.agents.findMany({ where: (a, { eq }) => eq(a.username, 'alice') });
      if (!agent) throw new Error('no alice');
      const conversationId = newId('conv');
      await deps.db.transaction(async (tx) => {
        await tx.insert(conversations).values({
          id: conversationId,
          merchantId: agent.merchantId,
          visitorId: other.uid,
          agentId: agent.id,
          state: 'active',
          lastSeq: 1,
          timestamp: Math.floor(Date.now() / 1000),
        });
        const view = await claimAttachmentForMessage(
          deps,
          tx,
          { type: 'agent', id: agent.id, merchantId: agent.merchantId },
          sent.attachment_id,
          'file',
        );
        await tx.insert(messages).values({
          id: newId('msg'),
          conversationId,
          merchantId: agent.merchantId,
          visitorId: other.uid,
          seq: 1,
          senderType: 'agent',
          senderId: agent.id,
          clientMsgId: 'c1',
          type: 'file',
          attachmentId: view.attachmentId,
        });
      });
      expect((await get(w.t.url, unsigned(sent.url), asVisitor)).status).toBe(200);
    });
  });

  describe('served safely', () => {
    for (const [what, bytes, mime] of [
      ['HTML', '<!DOCTYPE html><html><body><script>alert(document.cookie)</script></body></html>', 'text/html'],
      ['SVG', '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><circle r="5"/></svg>', 'image/svg+xml'],
    ] as const) {
      it(`${what} is served as a download, with nosniff and its sniffed type, never as a page`, async () => {
        const { body } = await upload(w.t.url, Buffer.from(bytes), {
          bearer: visitor.token,
          filename: 'pretty.png',
          contentType: 'image/png',
        });
        expect(body.data.kind).toBe('file');
        const res = await get(w.t.url, body.data.url);
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toBe(mime);
        expect(res.headers.get('x-content-type-options')).toBe('nosniff');
        expect(res.headers.get('content-disposition')).toMatch(/^attachment; filename="pretty.png"/);
        expect(res.headers.get('content-security-policy')).toContain('sandbox');
      });
    }

    it('the headers of a download, by value: type, nosniff, sandbox, private cache, disposition, length, ranges', async () => {
      const res = await get(w.t.url, image.url);
      const body = Buffer.from(await res.arrayBuffer());
      expect(
        Object.fromEntries(
          [
            'content-type',
            'x-content-type-options',
            'content-security-policy',
            'cache-control',
            'content-disposition',
            'accept-ranges',
            'content-length',
            'content-range',
          ].map((h) => [h, res.headers.get(h)]),
        ),
      ).toEqual({
        'content-type': 'image/png',
        'x-content-type-options': 'nosniff',
        'content-security-policy': "default-src 'none'; sandbox",
        'cache-control': 'private, max-age=300',
        'content-disposition': `inline; filename="green.png"; filename*=UTF-8''green.png`,
        'accept-ranges': 'bytes',
        'content-length': String(image.size),
        'content-range': null,
      });
      expect(body.length).toBe(image.size);
    });

    it('the thumbnail: a WebP shown inline, its size unknown beforehand, so no byte ranges (a Range is ignored)', async () => {
      const whole = await get(w.t.url, image.thumbnail_url);
      const bytes = Buffer.from(await whole.arrayBuffer());
      expect(whole.status).toBe(200);
      expect(whole.headers.get('content-type')).toBe('image/webp');
      expect(whole.headers.get('cache-control')).toBe('private, max-age=300');
      expect(whole.headers.get('content-disposition')).toBe(`inline; filename="green.png"; filename*=UTF-8''green.png`);
      expect(whole.headers.get('accept-ranges')).toBeNull();
      const asked = await get(w.t.url, image.thumbnail_url, { range: 'bytes=0-9' });
      expect(asked.status).toBe(200);
      expect(asked.headers.get('content-range')).toBeNull();
      expect(asked.headers.get('accept-ranges')).toBeNull();
      expect(Buffer.from(await asked.arrayBuffer()).equals(bytes)).toBe(true);
    });

    it("a file name with ' ( ) * is percent-encoded in filename* (RFC 5987), as-is in filename", async () => {
      const { body } = await upload(w.t.url, Buffer.from('%PDF-1.4'), {
        bearer: visitor.token,
        filename: "it's (1)*.pdf",
      });
      expect(body.data.name).toBe("it's (1)*.pdf");
      const res = await get(w.t.url, body.data.url);
      expect(res.headers.get('content-disposition')).toBe(
        `attachment; filename="it's (1)*.pdf"; filename*=UTF-8''it%27s%20%281%29%2A.pdf`,
      );
    });

    it('images, audio and video are shown inline; the thumbnail is a small WebP', async () => {
      const res = await get(w.t.url, image.url);
      expect(res.headers.get('content-disposition')).toMatch(/^inline/);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      const thumb = await get(w.t.url, image.thumbnail_url);
      expect(thumb.status).toBe(200);
      expect(thumb.headers.get('content-type')).toBe('image/webp');
    });

    it('a file name with quotes and non-ASCII characters is encoded, never injected', async () => {
      const { body } = await upload(w.t.url, Buffer.from('%PDF-1.4'), {
        bearer: visitor.token,
        filename: '报告"; x=1.pdf',
      });
      // FormData sends the quote as %22 (the HTML rule); whatever arrives, the header stays one value.
      const name: string = body.data.name;
      expect(name).toBe('报告%22; x=1.pdf');
      const res = await get(w.t.url, body.data.url);
      expect(res.headers.get('content-disposition')).toBe(
        `attachment; filename="__%22; x=1.pdf"; filename*=UTF-8''${encodeURIComponent(name)}`,
      );
    });
  });

  describe('byte ranges (video and voice seek)', () => {
    let video: { url: string; size: number };
    let bytes: Buffer;
    beforeAll(async () => {
      bytes = mp4(50_000);
      video = (await upload(w.t.url, bytes, { bearer: visitor.token, filename: 'clip.mp4' })).body.data;
    });

    it('bytes=a-b → 206 with Content-Range and exactly those bytes', async () => {
      const res = await get(w.t.url, video.url, { range: 'bytes=1000-1999' });
      expect(res.status).toBe(206);
      expect(res.headers.get('content-range')).toBe(`bytes 1000-1999/${video.size}`);
      expect(res.headers.get('accept-ranges')).toBe('bytes');
      expect(res.headers.get('content-disposition')).toMatch(/^inline/);
      expect(Buffer.from(await res.arrayBuffer()).equals(bytes.subarray(1000, 2000))).toBe(true);
    });

    it('open-ended and suffix ranges; the whole file without Range', async () => {
      const tail = await get(w.t.url, video.url, { range: 'bytes=-100' });
      expect(tail.status).toBe(206);
      expect(Buffer.from(await tail.arrayBuffer()).equals(bytes.subarray(bytes.length - 100))).toBe(true);
      const from = await get(w.t.url, video.url, { range: 'bytes=49990-' });
      expect(Buffer.from(await from.arrayBuffer()).equals(bytes.subarray(49990))).toBe(true);
      const whole = await get(w.t.url, video.url);
      expect(whole.status).toBe(200);
      expect(Buffer.from(await whole.arrayBuffer()).equals(bytes)).toBe(true);
    });

    it('a range past the end → 416 with the size', async () => {
      const res = await get(w.t.url, video.url, { range: `bytes=${video.size}-` });
      expect(res.status).toBe(416);
      expect(res.headers.get('content-range')).toBe(`bytes */${video.size}`);
    });

    /** The answer's status, range headers and body, for one Range header. */
    const ranged = async (range: string, method = 'GET') => {
      const res = await fetch(w.t.url + video.url, { method, headers: { range } });
      return {
        status: res.status,
        contentRange: res.headers.get('content-range'),
        contentLength: res.headers.get('content-length'),
        body: Buffer.from(await res.arrayBuffer()),
      };
    };

    it('one byte, and an end past the last byte cut at the last byte: exactly those bytes', async () => {
      expect(await ranged('bytes=5-5')).toEqual({
        status: 206,
        contentRange: `bytes 5-5/${bytes.length}`,
        contentLength: '1',
        body: bytes.subarray(5, 6),
      });
      expect(await ranged('bytes=49000-99999999')).toEqual({
        status: 206,
        contentRange: `bytes 49000-49999/${bytes.length}`,
        contentLength: '1000',
        body: bytes.subarray(49000),
      });
      expect(await ranged(`bytes=49990-${bytes.length}`)).toMatchObject({
        contentRange: `bytes 49990-49999/${bytes.length}`,
        body: bytes.subarray(49990),
      });
      // A suffix longer than the file is the whole file, as a range.
      expect(await ranged('bytes=-999999')).toMatchObject({
        status: 206,
        contentRange: `bytes 0-49999/${bytes.length}`,
        body: bytes,
      });
      // Whitespace around the value is not part of it (HTTP strips it before we see it).
      expect(await ranged(' bytes=10-19 ')).toMatchObject({ status: 206, body: bytes.subarray(10, 20) });
    });

    it('a malformed Range, an empty one or several ranges: the whole file, 200, no Content-Range', async () => {
      for (const range of [
        'bytes=0-9,20-29',
        'bytes=0-9x',
        'xbytes=0-9',
        'items=0-9',
        'bytes=abc',
        'bytes=1-2-3',
        'bytes=-',
        'bytes=',
      ]) {
        expect({ range, ...(await ranged(range)) }).toEqual({
          range,
          status: 200,
          contentRange: null,
          contentLength: String(bytes.length),
          body: bytes,
        });
      }
    });

    it('a start after the end, or an empty suffix (bytes=-0) → 416 with the size, nothing of the file', async () => {
      for (const range of ['bytes=500-400', 'bytes=-0', `bytes=${bytes.length + 10}-${bytes.length + 20}`]) {
        const res = await ranged(range);
        expect({ range, status: res.status, contentRange: res.contentRange, body: res.body.length }).toEqual({
          range,
          status: 416,
          contentRange: `bytes */${bytes.length}`,
          body: 0,
        });
      }
    });

    it('HEAD answers the headers of GET and no body, and does not read the object', async () => {
      const storage = w.t.app.deps.storage;
      const real = storage.get;
      const opened: Readable[] = [];
      storage.get = async (...args) => {
        const body = await real.apply(storage, args);
        if (body) opened.push(body);
        return body;
      };
      try {
        const head = await fetch(w.t.url + video.url, { method: 'HEAD' });
        expect(head.status).toBe(200);
        expect(head.headers.get('content-length')).toBe(String(bytes.length));
        expect(head.headers.get('accept-ranges')).toBe('bytes');
        expect(head.headers.get('content-type')).toBe('video/mp4');
        expect((await head.arrayBuffer()).byteLength).toBe(0);
        expect(await ranged('bytes=100-199', 'HEAD')).toEqual({
          status: 206,
          contentRange: `bytes 100-199/${bytes.length}`,
          contentLength: '100',
          body: Buffer.alloc(0),
        });
        // Opened (so a missing object is still 404), then let go unread.
        expect(opened).toHaveLength(2);
        for (const body of opened) {
          expect(body.destroyed).toBe(true);
          expect(body.readableEnded).toBe(false);
        }
      } finally {
        storage.get = real;
      }
    });
  });

  describe('what is not there', () => {
    const notFound = async (res: Response) => {
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ code: 1404, msg: 'No such attachment' });
    };

    it('an id outside [A-Za-z0-9_-]{1,64} is not looked up (NUL, a dot, 65 characters): 404', async () => {
      const asVisitor = { authorization: `Bearer ${visitor.token}` };
      const id = image.attachment_id;
      // A NUL byte never reaches the database (PostgreSQL refuses it in text): not found, not a failure.
      for (const bad of [`${id}%00`, `%00${id}`, `${id}.png`, `.${id}`, 'a'.repeat(65)]) {
        await notFound(await get(w.t.url, `/attachments/${bad}`, asVisitor));
      }
    });

    it('the thumbnail of an attachment that has none, or an object gone from storage: 404', async () => {
      const asVisitor = { authorization: `Bearer ${visitor.token}` };
      const pdf = (await upload(w.t.url, Buffer.from('%PDF-1.4 no thumb'), { bearer: visitor.token })).body.data;
      expect(pdf.thumbnail_url).toBeNull();
      expect((await get(w.t.url, unsigned(pdf.url), asVisitor)).status).toBe(200);
      await notFound(await get(w.t.url, `/attachments/${pdf.attachment_id}/thumbnail`, asVisitor));
      const row = (await stored(w)).rows.find((r) => r.id === pdf.attachment_id);
      if (!row) throw new Error('no row');
      await w.storage.delete(row.storageKey);
      await notFound(await get(w.t.url, pdf.url));
    });
  });

  describe('messages and cleanup', () => {
    it('a message may only take a finished attachment of its own sender, of its kind', async () => {
      const deps = w.t.app.deps;
      const own = await visitorToken(w.t.url);
      const att = (await upload(w.t.url, Buffer.from('%PDF-1.4 mine'), { bearer: own.token })).body.data;
      const [row] = await deps.db.query.visitors.findMany({ where: (v, { eq }) => eq(v.id, own.uid) });
      if (!row) throw new Error('no visitor');
      const me = { type: 'visitor' as const, id: own.uid, merchantId: row.merchantId };
      const someoneElse = { ...me, id: visitor.uid };
      await expect(claimAttachmentForMessage(deps, deps.db, someoneElse, att.attachment_id)).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
      await expect(
        claimAttachmentForMessage(deps, deps.db, { ...me, merchantId: 'another' }, att.attachment_id),
      ).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(claimAttachmentForMessage(deps, deps.db, me, att.attachment_id, 'image')).rejects.toMatchObject({
        code: 'BAD_USER_INPUT',
      });
      await expect(claimAttachmentForMessage(deps, deps.db, me, 'att_nonexistent')).rejects.toMatchObject({
        code: 'NOT_FOUND',
      });
      const view = await claimAttachmentForMessage(deps, deps.db, me, att.attachment_id, 'file');
      expect(view).toMatchObject({ attachmentId: att.attachment_id, kind: 'file', mime: 'application/pdf' });
      expect(view.url).toMatch(/sig=/);
      expect(
        uploaderOf({ kind: 'visitor', visitorId: own.uid, merchantId: row.merchantId, bid: 'demo', channel: '' }),
      ).toEqual(me);
    });

    it('unreferenced uploads are removed after ATTACHMENT_UNREFERENCED_TTL_SECONDS; referenced ones stay', async () => {
      const deps = w.t.app.deps;
      const own = await visitorToken(w.t.url);
      const [row] = await deps.db.query.visitors.findMany({ where: (v, { eq }) => eq(v.id, own.uid) });
      if (!row) throw new Error('no visitor');
      const kept = (await upload(w.t.url, Buffer.from('%PDF-1.4 kept'), { bearer: own.token })).body.data;
      const dropped = (await upload(w.t.url, Buffer.from('%PDF-1.4 dropped'), { bearer: own.token })).body.data;
      await claimAttachmentForMessage(
        deps,
        deps.db,
        { type: 'visitor', id: own.uid, merchantId: row.merchantId },
        kept.attachment_id,
      );
      // Not yet due.
      await removeUnreferencedAttachments(deps, w.storage);
      expect((await stored(w)).rows.map((r) => r.id)).toContain(dropped.attachment_id);
      const ttl = w.t.config.attachments.unreferencedTtlSeconds * 1000;
      await withClockAhead(w.t, ttl + 60_000, () => removeUnreferencedAttachments(deps, w.storage));
      const after = await stored(w);
      const ids = after.rows.map((r) => r.id);
      expect(ids).toContain(kept.attachment_id);
      expect(ids).not.toContain(dropped.attachment_id);
      expect(after.objects.some((k) => k.includes(dropped.attachment_id))).toBe(false);
      expect(after.objects.some((k) => k.includes(kept.attachment_id))).toBe(true);
      expect((await get(w.t.url, dropped.url)).status).toBe(404);
      const [keptRow] = after.rows.filter((r) => r.id === kept.attachment_id);
      expect(keptRow?.referencedAt).toBeInstanceOf(Date);
    });

    it('objects no row names (a crash between storing and recording) are removed after an hour; others stay', async () => {
      const deps = w.t.app.deps;
      const own = await visitorToken(w.t.url);
      const recorded = (await upload(w.t.url, Buffer.from('%PDF-1.4 recorded'), { bearer: own.token })).body.data;
      const merchantId = (await stored(w)).rows.find((r) => r.id === recorded.attachment_id)?.merchantId;
      // What a crash after the PUT and before the row's insert leaves: the object and its thumbnail.
      const orphan = newId('att');
      const orphanKeys = [`${merchantId}/${orphan}`, `${merchantId}/${orphan}.thumb.webp`];
      // A bucket may be shared: a key that is not an upload's is never touched.
      const foreign = 'elsewhere/report.txt';
      const source = join(w.dir, 'orphan-source');
      for (const key of [...orphanKeys, foreign]) {
        writeFileSync(source, 'x');
        await w.storage.putFile(key, source, { contentType: 'application/octet-stream', size: 1 });
      }
      rmSync(source, { force: true });

      // Younger than an hour: the upload may still be about to record it.
      expect(await removeOrphanObjects(deps, w.storage)).toBe(0);
      expect((await stored(w)).objects).toEqual(expect.arrayContaining(orphanKeys));
      const removed = await withClockAhead(w.t, CRASH_LEFTOVER_MS + 60_000, () => removeOrphanObjects(deps, w.storage));
      expect(removed).toBe(2);
      const objects = (await stored(w)).objects;
      expect(objects.filter((k) => k.includes(orphan))).toEqual([]);
      expect(objects).toContain(`${merchantId}/${recorded.attachment_id}`);
      expect(objects).toContain(foreign);
      expect((await get(w.t.url, recorded.url)).status).toBe(200);
      await w.storage.delete(foreign);
    });
  });
});

/**
 * The bytes a download spends of ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR, to the byte (one driver: the
 * budget is counted above the storage; test/api/attachments-download-budget.test.ts has the rest).
 */
describe('attachments: download bytes counted exactly (local storage)', () => {
  const BUDGET = 10_000;
  const w = attachmentsWorld('local', { TRUST_PROXY: 'on', ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR: String(BUDGET) });
  const address = () => `10.${randomBytes(3).join('.')}`;
  let file: { url: string; size: number };
  let image: { thumbnail_url: string };

  beforeAll(async () => {
    await setMerchant(w.t, 'demo', { switches: { ...ALL_ON } });
    const visitor = await visitorToken(w.t.url);
    file = (await upload(w.t.url, Buffer.alloc(6000, 'a'), { bearer: visitor.token })).body.data;
    const png = await sharp({ create: { width: 30, height: 20, channels: 3, background: '#00a' } })
      .png()
      .toBuffer();
    image = (await upload(w.t.url, png, { bearer: visitor.token })).body.data;
  });

  it('a range spends its length, a HEAD nothing: two ranges of 5,000 use up 10,000 exactly', async () => {
    const from = { 'x-forwarded-for': address() };
    for (let i = 0; i < 2; i++) {
      const res = await get(w.t.url, file.url, { ...from, range: 'bytes=1000-5999' });
      expect(res.status).toBe(206);
      expect((await res.arrayBuffer()).byteLength).toBe(5000);
    }
    const refused = await get(w.t.url, file.url, { ...from, range: 'bytes=0-0' });
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { msg: string }).msg).toContain('ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR');
    // A HEAD sends none of the file: answered even with the budget used up.
    const head = await fetch(w.t.url + file.url, { method: 'HEAD', headers: from });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe('6000');
  });

  it('whole files spend their size: 6,000 then 4,000 of a range fit, then nothing does', async () => {
    const from = { 'x-forwarded-for': address() };
    expect((await (await get(w.t.url, file.url, from)).arrayBuffer()).byteLength).toBe(6000);
    const rest = await get(w.t.url, file.url, { ...from, range: 'bytes=0-3999' });
    expect(rest.status).toBe(206);
    expect((await rest.arrayBuffer()).byteLength).toBe(4000);
    expect((await get(w.t.url, file.url, { ...from, range: 'bytes=0-0' })).status).toBe(429);
  });

  it('a thumbnail (its size unknown beforehand) is counted once sent: the next download past the budget is refused', async () => {
    const from = { 'x-forwarded-for': address() };
    // 9,999 of 10,000 bytes spent: one byte left.
    for (const range of ['bytes=0-4999', 'bytes=0-4998']) {
      expect((await get(w.t.url, file.url, { ...from, range })).status).toBe(206);
    }
    const thumb = await get(w.t.url, image.thumbnail_url, from);
    expect(thumb.status).toBe(200);
    expect((await thumb.arrayBuffer()).byteLength).toBeGreaterThan(1);
    // Settled after the answer: wait for the count rather than for a fixed time.
    let next = await get(w.t.url, image.thumbnail_url, from);
    for (let i = 0; i < 40 && next.status === 200; i++) {
      await new Promise((r) => setTimeout(r, 50));
      next = await get(w.t.url, image.thumbnail_url, from);
    }
    expect(next.status).toBe(429);
  });
});
