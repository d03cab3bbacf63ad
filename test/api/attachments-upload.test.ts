import { request } from 'node:http';
import sharp from 'sharp';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { attachments } from '../../src/db/schema.js';
import { agentSession, visitorToken } from '../support/clients.js';
import { movie } from '../support/media.js';
import {
  ALL_ON,
  attachmentsWorld,
  clearAttachments,
  DRIVERS,
  eventually,
  multipartFrame,
  rawUpload,
  setMerchant,
  stored,
  upload,
} from './attachments.fixtures.js';

const png = (width = 40, height = 30) =>
  sharp({ create: { width, height, channels: 3, background: '#36c' } })
    .png()
    .toBuffer();
/** A JPEG whose EXIF says who took it and where. */
const jpegWithExif = () =>
  sharp({ create: { width: 64, height: 48, channels: 3, background: '#c33' } })
    .jpeg()
    .withExif({ IFD0: { Copyright: 'secret-owner', Artist: 'secret-artist', ImageDescription: 'secret-location' } })
    .toBuffer();
/** A well-formed MP4 of exactly `size` bytes (ftyp, moov with a video track, mdat). */
const mp4 = (size: number) => movie({ size });
const ogg = (size: number) => {
  const b = Buffer.alloc(size, 3);
  Buffer.from('OggS\0\x02\0\0\0\0\0\0\0\0OpusHead', 'latin1').copy(b);
  return b;
};
const pdf = (size: number) => {
  const b = Buffer.alloc(size, 0x20);
  Buffer.from('%PDF-1.7\n', 'latin1').copy(b);
  return b;
};
/** A Windows executable's header. */
const exe = () => {
  const b = Buffer.alloc(2048, 0);
  Buffer.from('MZ\x90\0\x03\0\0\0', 'latin1').copy(b);
  return b;
};

describe.each(DRIVERS)('attachments: upload (%s storage)', (driver) => {
  const w = attachmentsWorld(driver);
  let visitor: { token: string; uid: string };

  beforeEach(async () => {
    await clearAttachments(w);
    await setMerchant(w.t, 'demo', {
      switches: { ...ALL_ON },
      imageMaxBytes: 20971520,
      fileMaxBytes: 20971520,
      videoMaxBytes: 104857600,
      voiceMaxBytes: 20971520,
      storageQuotaBytes: 10737418240,
    });
    visitor = await visitorToken(w.t.url);
  });

  /**
   * The storage is first called after every check of the upload policy (receiveUpload in
   * src/resolvers/attachments/upload.ts stores the object after the inspection, the re-encoding
   * and the byte budget), so a refusal, the type taken from the bytes and the identity and rate
   * checks prove the same on both drivers: those run on the first driver only (`policyIt`,
   * `policyDescribe`).
   * What reaches the storage runs on both: storing, the EXIF-free download and thumbnail, the
   * exact limit accepted, video and voice stored, an aborted upload, the quota refusal after the
   * objects are written.
   */
  const policyIt = (name: string, fn: () => Promise<void>) => {
    if (driver === DRIVERS[0]) it(name, fn);
  };
  const policyDescribe = (name: string, fn: () => void) => {
    if (driver === DRIVERS[0]) describe(name, fn);
  };

  const nothingStored = async () => {
    const now = await stored(w);
    expect(now.objects).toEqual([]);
    expect(now.rows).toEqual([]);
    expect(now.incoming).toEqual([]);
  };

  it('stores an image and answers {attachment_id, kind, mime, size, name, url}', async () => {
    const { status, body } = await upload(w.t.url, await png(), { bearer: visitor.token, filename: 'cat.png' });
    expect(status).toBe(200);
    expect(body.code).toBe(0);
    expect(body.msg).toBe('ok');
    expect(body.data).toMatchObject({ kind: 'image', mime: 'image/png', name: 'cat.png' });
    expect(body.data.attachment_id).toMatch(/^att_/);
    expect(body.data.url).toMatch(new RegExp(`^/attachments/${body.data.attachment_id}\\?expires=\\d+&sig=`));
    expect(body.data.thumbnail_url).toMatch(/\/thumbnail\?expires=/);
    const now = await stored(w);
    expect(now.rows).toHaveLength(1);
    expect(now.objects).toHaveLength(2); // the image and its thumbnail
    expect(now.incoming).toEqual([]);
  });

  policyDescribe('switches (absent = off)', () => {
    const cases = [
      { kind: 'image', off: 'upload_img', make: () => png() },
      { kind: 'file', off: 'upload_file', make: async () => pdf(3000) },
      { kind: 'video', off: 'upload_file', make: async () => mp4(3000) },
      { kind: 'voice', off: 'voice', make: async () => ogg(3000) },
    ] as const;
    for (const c of cases) {
      for (const how of ['off', 'absent'] as const) {
        it(`${c.off} ${how} → ${c.kind} refused, declared or derived from the bytes`, async () => {
          const switches: Record<string, string> = { ...ALL_ON };
          if (how === 'off') switches[c.off] = 'off';
          else delete switches[c.off];
          await setMerchant(w.t, 'demo', { switches });
          const bytes = await c.make();
          for (const kind of [c.kind, undefined]) {
            const { status, body } = await upload(w.t.url, bytes, { bearer: visitor.token, kind });
            expect(status).toBe(403);
            expect(body.code).toBe(1403);
            expect(body.msg).toContain(c.off);
          }
          await nothingStored();
        });
      }
    }

    it('every switch off → refused before reading', async () => {
      await setMerchant(w.t, 'demo', { switches: {} });
      const { status, body } = await upload(w.t.url, pdf(100), { bearer: visitor.token });
      expect(status).toBe(403);
      expect(body.msg).toMatch(/switched off/);
    });
  });

  describe('size limits of upload_limits', () => {
    it('a file of exactly the kind limit is accepted; one byte more is refused and nothing is stored', async () => {
      await setMerchant(w.t, 'demo', { fileMaxBytes: 5000 });
      const ok = await upload(w.t.url, pdf(5000), { bearer: visitor.token, kind: 'file' });
      expect(ok.body.code).toBe(0);
      expect(ok.body.data.size).toBe(5000);
      await clearAttachments(w);

      for (const kind of ['file', undefined]) {
        const over = await upload(w.t.url, pdf(5001), { bearer: visitor.token, kind });
        expect(over.status).toBe(413);
        expect(over.body.code).toBe(1413);
        expect(over.body.msg).toContain('file_max_bytes');
        expect(over.body.msg).toContain('5000');
      }
      await nothingStored();
    });

    policyIt('an image: the limit applies to the uploaded bytes', async () => {
      const image = await png(120, 80);
      await setMerchant(w.t, 'demo', { imageMaxBytes: image.length });
      expect((await upload(w.t.url, image, { bearer: visitor.token })).body.code).toBe(0);
      await clearAttachments(w);
      await setMerchant(w.t, 'demo', { imageMaxBytes: image.length - 1 });
      const over = await upload(w.t.url, image, { bearer: visitor.token });
      expect(over.status).toBe(413);
      expect(over.body.msg).toContain('image_max_bytes');
      await nothingStored();
    });

    it('video and voice have their own limits', async () => {
      await setMerchant(w.t, 'demo', { videoMaxBytes: 6000, voiceMaxBytes: 4000 });
      expect((await upload(w.t.url, mp4(6000), { bearer: visitor.token })).body.data.kind).toBe('video');
      expect((await upload(w.t.url, ogg(4000), { bearer: visitor.token })).body.data.kind).toBe('voice');
      await clearAttachments(w);
      expect((await upload(w.t.url, mp4(6001), { bearer: visitor.token })).body.msg).toContain('video_max_bytes');
      expect((await upload(w.t.url, ogg(4001), { bearer: visitor.token })).body.msg).toContain('voice_max_bytes');
      await nothingStored();
    });

    policyIt('a body without Content-Length is counted as it arrives and refused once past the limit', async () => {
      await setMerchant(w.t, 'demo', { fileMaxBytes: 100_000 });
      const frame = multipartFrame({ kind: 'file' });
      const answer = await rawUpload(
        `${w.t.url}/visitor/upload`,
        { authorization: `Bearer ${visitor.token}`, 'content-type': frame.contentType, 'transfer-encoding': 'chunked' },
        (req) => {
          req.write(frame.head);
          // 64 kB at a time, far more than the limit in all; stop as soon as the answer comes.
          let sent = 0;
          let answered = false;
          const more = () => {
            while (sent < 50_000_000 && !answered && !req.destroyed) {
              sent += 65536;
              if (!req.write(pdf(65536))) return void req.once('drain', more);
            }
          };
          req.on('response', () => {
            answered = true;
          });
          more();
        },
      );
      expect(answer.status).toBe(413);
      expect(answer.body?.msg).toContain('file_max_bytes');
      await eventually(
        () => stored(w),
        (s) => s.incoming.length === 0,
        'scratch file removed',
      );
      await nothingStored();
    });

    policyIt('a Content-Length over the limit is refused before a byte of the body is read', async () => {
      await setMerchant(w.t, 'demo', { fileMaxBytes: 5000 });
      const frame = multipartFrame({ kind: 'file' });
      // Announces 10 MB and sends only the head: an answer proves the server did not wait for the body.
      const answer = await rawUpload(
        `${w.t.url}/visitor/upload?kind=file`,
        {
          authorization: `Bearer ${visitor.token}`,
          'content-type': frame.contentType,
          'content-length': String(10_000_000),
        },
        (req) => {
          req.write(frame.head);
        },
      );
      expect(answer.status).toBe(413);
      expect(answer.body?.code).toBe(1413);
      expect(answer.body?.msg).toContain('file_max_bytes');
      await nothingStored();
    });
  });

  policyDescribe('the type comes from the bytes', () => {
    it('an executable named photo.png with Content-Type image/png is a file, and refused as an image', async () => {
      const derived = await upload(w.t.url, exe(), {
        bearer: visitor.token,
        filename: 'photo.png',
        contentType: 'image/png',
      });
      expect(derived.body.data).toMatchObject({ kind: 'file', mime: 'application/octet-stream', name: 'photo.png' });
      const declared = await upload(w.t.url, exe(), {
        bearer: visitor.token,
        filename: 'photo.png',
        contentType: 'image/png',
        kind: 'image',
      });
      expect(declared.status).toBe(400);
      expect(declared.body.code).toBe(1000);
      expect(declared.body.msg).toMatch(/not an image/);
    });

    it('a PNG named report.pdf sent as application/pdf is an image/png', async () => {
      const { body } = await upload(w.t.url, await png(), {
        bearer: visitor.token,
        filename: 'report.pdf',
        contentType: 'application/pdf',
      });
      expect(body.data).toMatchObject({ kind: 'image', mime: 'image/png' });
    });

    it('a PDF declared as video is refused; kind in the query works as the field does', async () => {
      const { status, body } = await upload(w.t.url, pdf(2000), { bearer: visitor.token, queryKind: 'video' });
      expect(status).toBe(400);
      expect(body.msg).toMatch(/not a video/);
      const ok = await upload(w.t.url, mp4(2000), { bearer: visitor.token, queryKind: 'video' });
      expect(ok.body.data).toMatchObject({ kind: 'video', mime: 'video/mp4' });
    });

    it('HTML and SVG are files, never images', async () => {
      const html = Buffer.from('<!DOCTYPE html><html><script>alert(1)</script></html>');
      const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>');
      expect((await upload(w.t.url, html, { bearer: visitor.token, filename: 'a.png' })).body.data).toMatchObject({
        kind: 'file',
        mime: 'text/html',
      });
      expect((await upload(w.t.url, svg, { bearer: visitor.token })).body.data).toMatchObject({
        kind: 'file',
        mime: 'image/svg+xml',
      });
      expect((await upload(w.t.url, svg, { bearer: visitor.token, kind: 'image' })).status).toBe(400);
    });
  });

  it('EXIF is removed from images (re-encoded), and the thumbnail is small', async () => {
    const original = await jpegWithExif();
    expect((await sharp(original).metadata()).exif).toBeDefined();
    expect(original.includes('secret-location')).toBe(true);
    const { body } = await upload(w.t.url, original, { bearer: visitor.token, filename: 'me.jpg' });
    expect(body.data).toMatchObject({ kind: 'image', mime: 'image/jpeg' });
    const file = Buffer.from(await (await fetch(w.t.url + body.data.url)).arrayBuffer());
    const meta = await sharp(file).metadata();
    expect(meta.format).toBe('jpeg');
    expect(meta.exif).toBeUndefined();
    expect(file.includes('secret-location')).toBe(false);
    expect(file.includes('secret-owner')).toBe(false);
    expect(body.data.size).toBe(file.length);
    const thumb = await sharp(
      Buffer.from(await (await fetch(w.t.url + body.data.thumbnail_url)).arrayBuffer()),
    ).metadata();
    expect(thumb.format).toBe('webp');
    expect(Math.max(thumb.width ?? 0, thumb.height ?? 0)).toBeLessThanOrEqual(320);
  });

  it('a client that aborts mid-upload leaves nothing', async () => {
    const frame = multipartFrame({ kind: 'file' });
    let abort: () => void = () => {};
    const answer = rawUpload(
      `${w.t.url}/visitor/upload`,
      {
        authorization: `Bearer ${visitor.token}`,
        'content-type': frame.contentType,
        'content-length': String(frame.head.length + 1_000_000 + frame.tail.length),
      },
      (req) => {
        req.write(frame.head);
        req.write(pdf(300_000));
        abort = () => req.destroy();
      },
    );
    // The upload is under way (its scratch file exists); then the client goes away.
    await eventually(
      () => stored(w),
      (s) => s.incoming.length === 1,
      'upload in progress',
    );
    abort();
    expect((await answer).status).toBe(0);
    await eventually(
      () => stored(w),
      (s) => s.incoming.length === 0,
      'scratch file removed after the abort',
    );
    await nothingStored();
  });

  policyIt('a malformed or fileless body is refused', async () => {
    const form = new FormData();
    form.append('kind', 'file');
    const res = await fetch(`${w.t.url}/visitor/upload`, {
      method: 'POST',
      body: form,
      headers: { authorization: `Bearer ${visitor.token}` },
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { msg: string }).msg).toMatch(/"file" is required/);
    const json = await fetch(`${w.t.url}/visitor/upload`, {
      method: 'POST',
      body: '{}',
      headers: { authorization: `Bearer ${visitor.token}`, 'content-type': 'application/json' },
    });
    expect(json.status).toBe(400);
    await nothingStored();
  });

  describe('identity, rate and quota', () => {
    policyIt('no visitor token → 1401; the agent upload needs a Session and online reception', async () => {
      expect((await upload(w.t.url, pdf(100), {})).body.code).toBe(1401);
      expect((await upload(w.t.url, pdf(100), { path: '/agent/upload' })).body.code).toBe(-1);
      const alice = await agentSession(w.t.url, 'alice');
      const ok = await upload(w.t.url, pdf(100), { path: '/agent/upload', agentToken: alice.token });
      expect(ok.body.data.kind).toBe('file');
      const tom = await agentSession(w.t.url, 'tom');
      const refused = await upload(w.t.url, pdf(100), { path: '/agent/upload', agentToken: tom.token });
      expect(refused.status).toBe(403);
      expect(refused.body.code).toBe(1403);
    });

    policyIt('uploads per identity per minute are limited, and the refusal names the limit', async () => {
      const config = w.t.app.deps.config.attachments;
      const before = config.uploadsPerMinute;
      config.uploadsPerMinute = 2;
      try {
        const own = await visitorToken(w.t.url);
        expect((await upload(w.t.url, pdf(100), { bearer: own.token })).body.code).toBe(0);
        expect((await upload(w.t.url, pdf(100), { bearer: own.token })).body.code).toBe(0);
        const third = await upload(w.t.url, pdf(100), { bearer: own.token });
        expect(third.status).toBe(429);
        expect(third.body.code).toBe(1429);
        expect(third.body.msg).toContain('at most 2 a minute');
        // Another identity has its own count.
        expect((await upload(w.t.url, pdf(100), { bearer: visitor.token })).body.code).toBe(0);
      } finally {
        config.uploadsPerMinute = before;
      }
    });

    it("the merchant's storage quota: an upload that does not fit beside what messages carry is refused and not kept", async () => {
      await setMerchant(w.t, 'demo', { storageQuotaBytes: 6000 });
      expect((await upload(w.t.url, pdf(4000), { bearer: visitor.token })).body.code).toBe(0);
      // As when a message carries it (README: unreferenced uploads are outside the quota).
      await w.t.app.deps.db.update(attachments).set({ referencedAt: new Date() });
      const over = await upload(w.t.url, pdf(4000), { bearer: visitor.token });
      expect(over.status).toBe(413);
      expect(over.body.msg).toContain('storage_quota_bytes');
      const now = await stored(w);
      expect(now.rows).toHaveLength(1);
      expect(now.objects).toEqual([now.rows[0]?.storageKey]);
      expect(now.incoming).toEqual([]);
    });
  });
});

/**
 * The form's fields and the body cap, on one driver (the storage is not reached before these
 * checks) and on a gateway of their own: the suite above takes a visitor token per test, and the
 * token limit (30 a minute per address) leaves no room for more.
 */
describe('attachments: upload, the form and the body cap (local storage)', () => {
  const w = attachmentsWorld('local');
  let visitor: { token: string; uid: string };

  beforeAll(async () => {
    await setMerchant(w.t, 'demo', { switches: { ...ALL_ON } });
    visitor = await visitorToken(w.t.url);
  });
  beforeEach(() => clearAttachments(w));

  const nothingStored = async () => {
    const now = await stored(w);
    expect(now.objects).toEqual([]);
    expect(now.rows).toEqual([]);
    expect(now.incoming).toEqual([]);
  };

  describe('the form, field by field', () => {
    /** Posts a form built by `build` (fetch sends it as multipart/form-data with a boundary). */
    const post = async (build: (form: FormData) => void, query = '') => {
      const form = new FormData();
      build(form);
      const res = await fetch(`${w.t.url}/visitor/upload${query}`, {
        method: 'POST',
        body: form,
        headers: { authorization: `Bearer ${visitor.token}` },
      });
      return { status: res.status, body: (await res.json()) as { code: number; msg: string; data?: { kind: string } } };
    };
    const pdfBlob = () => new Blob([new Uint8Array(pdf(500))], { type: 'application/pdf' });
    const refused = (msg: string) => ({ status: 400, body: { code: 1000, msg } });

    it('an empty kind (field or query) is no kind: derived from the bytes', async () => {
      expect((await post((f) => f.append('file', pdfBlob(), 'a.pdf'), '?kind=')).body.data?.kind).toBe('file');
      const field = await post((f) => {
        f.append('kind', '');
        f.append('file', pdfBlob(), 'a.pdf');
      });
      expect(field.body.data?.kind).toBe('file');
    });

    it('an unknown kind, in the query or the field, is refused with the kinds', async () => {
      const rule = refused('kind must be image, file, video or voice');
      expect(await post((f) => f.append('file', pdfBlob(), 'a.pdf'), '?kind=document')).toMatchObject(rule);
      expect(
        await post((f) => {
          f.append('kind', 'document');
          f.append('file', pdfBlob(), 'a.pdf');
        }),
      ).toMatchObject(rule);
      await nothingStored();
    });

    it('other fields are ignored; kind after the file is refused', async () => {
      const other = await post((f) => {
        f.append('caption', 'hello');
        f.append('file', pdfBlob(), 'a.pdf');
        f.append('note', 'image');
      });
      expect(other).toMatchObject({ status: 200, body: { code: 0, data: { kind: 'file' } } });
      await clearAttachments(w);
      const late = await post((f) => {
        f.append('file', pdfBlob(), 'a.pdf');
        f.append('kind', 'file');
      });
      expect(late).toMatchObject(refused('Give kind before the file (or as a query parameter)'));
      await eventually(
        () => stored(w),
        (s) => s.rows.length === 0 && s.objects.length === 0 && s.incoming.length === 0,
        'nothing kept of the refused upload',
      );
    });

    it('a file in another field is refused; of two files only the first is taken', async () => {
      expect(await post((f) => f.append('upload', pdfBlob(), 'a.pdf'))).toMatchObject(
        refused('The file must be in field "file"'),
      );
      await nothingStored();
      const two = await post((f) => {
        f.append('file', pdfBlob(), 'one.pdf');
        f.append('file', pdfBlob(), 'two.pdf');
      });
      expect(two).toMatchObject({ status: 200, body: { code: 0 } });
      // Had the second been taken too, it would be stored by now (it is as small as the first).
      await new Promise((r) => setTimeout(r, 300));
      const now = await stored(w);
      expect(now.rows.map((r) => r.name)).toEqual(['one.pdf']);
    });

    /** A body sent by hand with this Content-Type; the answer's status, Connection header and envelope. */
    const postRaw = (contentType: string, body: string) =>
      new Promise<{ status: number; connection?: string; body: { code: number; msg: string } }>((resolve, reject) => {
        const req = request(
          `${w.t.url}/visitor/upload`,
          {
            method: 'POST',
            headers: { authorization: `Bearer ${visitor.token}`, 'content-type': contentType },
          },
          (res) => {
            let text = '';
            res.on('data', (d) => {
              text += d;
            });
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body: JSON.parse(text) }),
            );
          },
        );
        req.on('error', reject);
        req.end(body);
      });

    it('not multipart/form-data: 400 naming the rule, and the connection is closed', async () => {
      const rule = 'The upload must be multipart/form-data with the file in field "file"';
      for (const type of ['application/json', 'text/plain; note="multipart/form-data; boundary=x"']) {
        const answer = await postRaw(type, '{}');
        expect({ type, ...answer }).toEqual({
          type,
          status: 400,
          connection: 'close',
          body: { code: 1000, msg: rule, data: [] },
        });
      }
    });

    it('multipart without a boundary, or cut off before its end: 400 "Malformed multipart body"', async () => {
      const malformed = { status: 400, body: { code: 1000, msg: 'Malformed multipart body' } };
      expect(await postRaw('multipart/form-data', 'x')).toMatchObject(malformed);
      const cut = '--b0und\r\nContent-Disposition: form-data; name="kind"\r\n\r\nfile';
      expect(await postRaw('multipart/form-data; boundary=b0und', cut)).toMatchObject(malformed);
      await nothingStored();
    });
  });

  describe('the body cap', () => {
    it("an upload, the agent's as the visitor's, passes the 64 KiB body cap of other requests", async () => {
      const alice = await agentSession(w.t.url, 'alice');
      const big = pdf(200_000);
      const agent = await upload(w.t.url, big, { path: '/agent/upload', agentToken: alice.token });
      expect(agent).toMatchObject({ status: 200, body: { code: 0, data: { kind: 'file', size: big.length } } });
      const own = await upload(w.t.url, big, { bearer: visitor.token });
      expect(own).toMatchObject({ status: 200, body: { code: 0, data: { kind: 'file', size: big.length } } });
    });

    it('any other request declaring more than 64 KiB is refused before its body is read (413)', async () => {
      /** Sends only the headers, announcing 100 kB; the answer, read before any body is sent. */
      const announce = (method: string, path: string) =>
        new Promise<{ status: number; msg?: string }>((resolve, reject) => {
          const req = request(`${w.t.url}${path}`, {
            method,
            headers: { authorization: `Bearer ${visitor.token}`, 'content-length': '100000' },
          });
          req.on('response', (res) => {
            let text = '';
            res.on('data', (d) => {
              text += d;
            });
            res.on('end', () => {
              resolve({ status: res.statusCode ?? 0, msg: text ? JSON.parse(text).msg : undefined });
              req.destroy();
            });
          });
          req.on('error', reject);
          req.flushHeaders();
        });
      const capped = { status: 413, msg: 'Request body larger than 64kb' };
      expect(await announce('POST', '/attachments/upload')).toEqual(capped);
      expect(await announce('PUT', '/visitor/upload')).toEqual(capped);
      expect(await announce('POST', '/visitor/upload/more')).toEqual(capped);
    });
  });
});
