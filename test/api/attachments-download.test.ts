import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
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
