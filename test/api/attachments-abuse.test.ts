import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { beforeEach, describe, expect, it } from 'vitest';
import { agentSession, visitorToken } from '../support/clients.js';
import {
  ALL_ON,
  attachmentsWorld,
  clearAttachments,
  multipartFrame,
  rawUpload,
  setMerchant,
  stored,
  upload,
} from './attachments.fixtures.js';

/**
 * Uploads under abuse over HTTP (issue 27): what a refusal leaves behind when it is answered,
 * the busy image pool's 503, the byte budget per client address, file names with bidirectional
 * controls, and a ticket agent's downloads. The gateway trusts X-Forwarded-For here, so each test
 * can come from an address of its own.
 */

const w = attachmentsWorld('local', {
  TRUST_PROXY: 'on',
  IMAGE_WORKERS: '2',
  IMAGE_WORKERS_PER_MERCHANT: '1',
  IMAGE_QUEUE_TIMEOUT_MS: '1000',
  UPLOAD_BYTES_PER_ADDRESS_PER_HOUR: '20000',
});
const address = () => `10.${randomBytes(3).join('.')}`;
const png = () =>
  sharp({ create: { width: 64, height: 48, channels: 3, background: '#36c' } })
    .png()
    .toBuffer();
/** The demo merchant's id (the seed's). */
const DEMO = 'm_demo';

let visitor: { token: string; uid: string };
beforeEach(async () => {
  await clearAttachments(w);
  await setMerchant(w.t, 'demo', { switches: { ...ALL_ON }, storageQuotaBytes: 10737418240 });
  visitor = await visitorToken(w.t.url);
});

/** Holds the demo merchant's one image slot until the returned function is called. */
function holdImageSlot() {
  let release: () => void = () => {};
  const held = w.t.app.deps.imageWork.run(DEMO, () => new Promise<void>((r) => (release = r)));
  return async () => {
    release();
    await held;
  };
}

async function waitFor(check: () => boolean, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 10));
  }
}

const incoming = () => {
  try {
    return readdirSync(join(w.dir, 'incoming'));
  } catch {
    return [];
  }
};

describe('a refused upload leaves nothing behind by the time it is answered', () => {
  it('a form that breaks right after the file: 400, no scratch file when answered, and nothing stored later', async () => {
    // The merchant's image slot is taken, so the image would wait in line when the form breaks.
    const release = holdImageSlot();
    try {
      const frame = multipartFrame({ filename: 'a.png' });
      const boundary = frame.contentType.split('boundary=')[1];
      const image = await png();
      let atAnswer: string[] | undefined;
      const answer = await rawUpload(
        `${w.t.url}/visitor/upload`,
        { authorization: `Bearer ${visitor.token}`, 'content-type': frame.contentType, 'transfer-encoding': 'chunked' },
        (req) => {
          req.on('response', () => {
            atAnswer = incoming();
          });
          req.write(frame.head);
          req.write(image);
          // Once the upload is under way (its scratch file exists), the file part ends and the
          // body ends inside the next part's headers: a malformed form.
          void waitFor(() => incoming().length === 1).then(() =>
            req.end(`\r\n--${boundary}\r\nContent-Disposition: form-da`),
          );
        },
      );
      expect(answer.status).toBe(400);
      expect(answer.body?.msg).toBe('Malformed multipart body');
      expect(atAnswer).toEqual([]);
      // The refused upload is not finished behind the answer's back either.
      await new Promise((r) => setTimeout(r, 300));
      const now = await stored(w);
      expect(now.rows).toEqual([]);
      expect(now.objects).toEqual([]);
      expect(now.incoming).toEqual([]);
    } finally {
      await release();
    }
  });
});

describe('image bombs: the bounded pool answers 503 with Retry-After', () => {
  it("a merchant whose image slot stays taken past IMAGE_QUEUE_TIMEOUT_MS gets 1503; another merchant's upload is not held", async () => {
    const release = holdImageSlot();
    try {
      const refused = await upload(w.t.url, await png(), { bearer: visitor.token });
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.body).toMatchObject({
        code: 1503,
        msg: 'Image processing is busy (no slot within 1000 ms), retry in 1 s',
      });
      expect((await stored(w)).rows).toEqual([]);
      expect(incoming()).toEqual([]);
      await setMerchant(w.t, 'acme', { switches: { ...ALL_ON } });
      const other = await visitorToken(w.t.url, 'acme-appkey');
      const started = Date.now();
      const ok = await upload(w.t.url, await png(), { bearer: other.token });
      expect(ok.body.code).toBe(0);
      expect(Date.now() - started).toBeLessThan(1000);
    } finally {
      await release();
    }
    expect((await upload(w.t.url, await png(), { bearer: visitor.token })).body.code).toBe(0);
  });
});

describe('storage: a byte budget per client address', () => {
  it('visitors of one address share UPLOAD_BYTES_PER_ADDRESS_PER_HOUR whatever their tokens: 429 with Retry-After', async () => {
    const from = { 'x-forwarded-for': address() };
    const text = (n: number) => Buffer.alloc(n, 'a');
    expect((await upload(w.t.url, text(15_000), { bearer: visitor.token, headers: from })).body.code).toBe(0);
    const second = await visitorToken(w.t.url);
    const refused = await upload(w.t.url, text(15_000), { bearer: second.token, headers: from });
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe(1429);
    expect(refused.body.msg).toContain('UPLOAD_BYTES_PER_ADDRESS_PER_HOUR');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await stored(w)).rows).toHaveLength(1);
    // What is left of the budget still fits; another address has its own.
    expect((await upload(w.t.url, text(5000), { bearer: second.token, headers: from })).body.code).toBe(0);
    const elsewhere = { 'x-forwarded-for': address() };
    expect((await upload(w.t.url, text(15_000), { bearer: second.token, headers: elsewhere })).body.code).toBe(0);
  });
});

describe('file names and who may download', () => {
  it('bidirectional controls are stripped from file names (invoice\\u202Efdp.exe), in the answer and the download', async () => {
    const { body } = await upload(w.t.url, Buffer.from('MZ not really'), {
      bearer: visitor.token,
      filename: 'invoice\u202Efdp.exe',
    });
    expect(body.data.name).toBe('invoicefdp.exe');
    const res = await fetch(w.t.url + body.data.url);
    expect(res.headers.get('content-disposition')).toBe(
      `attachment; filename="invoicefdp.exe"; filename*=UTF-8''invoicefdp.exe`,
    );
  });

  it("a ticket agent's Session downloads nothing without a signed URL (1403, as on the chat endpoints)", async () => {
    const { body } = await upload(w.t.url, Buffer.from('hello'), { bearer: visitor.token });
    const path = body.data.url.split('?')[0];
    const tom = await agentSession(w.t.url, 'tom');
    const refused = await fetch(w.t.url + path, { headers: { token: tom.token } });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { code: number }).code).toBe(1403);
    const alice = await agentSession(w.t.url, 'alice');
    expect(await (await fetch(w.t.url + path, { headers: { token: alice.token } })).text()).toBe('hello');
    expect((await fetch(w.t.url + body.data.url)).status).toBe(200);
  });
});
