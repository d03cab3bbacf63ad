import { connect } from 'node:net';
import sharp from 'sharp';
import { beforeAll, describe, expect, it } from 'vitest';
import { visitorToken } from '../support/clients.js';
import { movie } from '../support/media.js';
import { ALL_ON, attachmentsWorld, DRIVERS, setMerchant, stored, upload } from './attachments.fixtures.js';

/**
 * Issue 28 item 4: the storage drivers' edges, on both (local disk and a real S3-protocol
 * server), with the bytes counted on the wire: a raw socket reads the whole answer until the
 * server closes it, so a driver that reads one byte too many (an S3 `Range` end off by one) or
 * streams past the end of a file shows as bytes beyond Content-Length or a wrong body.
 */
const PIXELS = 10_000;

interface WireAnswer {
  status: number;
  headers: Record<string, string>;
  /** The body bytes as they came over the socket (after the header block). */
  body: Buffer;
}

/** GET `path` over a raw socket with `Connection: close`; everything until the server closes. */
function rawGet(base: string, path: string, headers: Record<string, string> = {}): Promise<WireAnswer> {
  const { port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', reject);
    socket.on('close', () => {
      const all = Buffer.concat(chunks);
      const end = all.indexOf('\r\n\r\n');
      if (end < 0) return reject(new Error(`no header block: ${all.toString('latin1').slice(0, 200)}`));
      const [statusLine, ...lines] = all.subarray(0, end).toString('latin1').split('\r\n');
      const parsed: Record<string, string> = {};
      for (const line of lines) {
        const at = line.indexOf(':');
        parsed[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
      }
      resolve({ status: Number(statusLine?.split(' ')[1]), headers: parsed, body: all.subarray(end + 4) });
    });
    const extra = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${extra}\r\n`);
  });
}

/** The answer's body as sent: exactly Content-Length bytes, never chunked past it, nothing after. */
function exactBody(answer: WireAnswer): Buffer {
  expect(answer.headers['transfer-encoding']).toBeUndefined();
  expect(answer.headers['content-length']).toBeDefined();
  expect(answer.body.length).toBe(Number(answer.headers['content-length']));
  return answer.body;
}

describe.each(DRIVERS)('storage edges, bytes counted on the wire (%s storage)', (driver) => {
  const w = attachmentsWorld(driver, { IMAGE_MAX_PIXELS: String(PIXELS) });
  let visitor: { token: string };
  let video: { url: string; size: number };
  let bytes: Buffer;

  beforeAll(async () => {
    await setMerchant(w.t, 'demo', { switches: { ...ALL_ON } });
    visitor = await visitorToken(w.t.url);
    bytes = movie({ size: 50_000 });
    video = (await upload(w.t.url, bytes, { bearer: visitor.token, filename: 'clip.mp4' })).body.data as never;
    expect(video.size).toBe(bytes.length);
  });

  it('the whole file: exactly its bytes, nothing after', async () => {
    const answer = await rawGet(w.t.url, video.url);
    expect(answer.status).toBe(200);
    expect(exactBody(answer).equals(bytes)).toBe(true);
  });

  it('a range whose end is past the end of the file: cut at the last byte (206), exactly those bytes', async () => {
    const size = bytes.length;
    const answer = await rawGet(w.t.url, video.url, { range: `bytes=${size - 10}-${size + 100}` });
    expect(answer.status).toBe(206);
    expect(answer.headers['content-range']).toBe(`bytes ${size - 10}-${size - 1}/${size}`);
    expect(exactBody(answer).equals(bytes.subarray(size - 10))).toBe(true);
  });

  it('a range one byte too long (end = size): the whole file, not one byte more', async () => {
    const size = bytes.length;
    const answer = await rawGet(w.t.url, video.url, { range: `bytes=0-${size}` });
    expect([200, 206]).toContain(answer.status);
    if (answer.status === 206) expect(answer.headers['content-range']).toBe(`bytes 0-${size - 1}/${size}`);
    expect(exactBody(answer).equals(bytes)).toBe(true);
  });

  it('single bytes at both ends and a range inside: exactly the bytes asked for', async () => {
    const size = bytes.length;
    for (const [from, to] of [
      [0, 0],
      [size - 1, size - 1],
      [size - 2, size - 1],
      [12_345, 23_456],
    ] as const) {
      const answer = await rawGet(w.t.url, video.url, { range: `bytes=${from}-${to}` });
      expect(answer.status, `${from}-${to}`).toBe(206);
      expect(answer.headers['content-range']).toBe(`bytes ${from}-${to}/${size}`);
      expect(exactBody(answer).equals(bytes.subarray(from, to + 1)), `${from}-${to}`).toBe(true);
    }
  });

  it('a range starting at or past the end: 416 with the size, and none of the file on the wire', async () => {
    const size = bytes.length;
    for (const range of [`bytes=${size}-`, `bytes=${size}-${size + 10}`, `bytes=${size + 1000}-${size + 2000}`]) {
      const answer = await rawGet(w.t.url, video.url, { range });
      expect(answer.status, range).toBe(416);
      expect(answer.headers['content-range']).toBe(`bytes */${size}`);
      const body = exactBody(answer);
      expect(body.length).toBeLessThan(500);
      expect(body.includes(bytes.subarray(0, 16))).toBe(false);
    }
  });

  it('an image over the pixel cap: 413 before decoding, nothing stored; one under it is stored', async () => {
    const before = await stored(w);
    // 200 × 200 = 40,000 pixels, in a few hundred bytes of PNG.
    const big = await sharp({ create: { width: 200, height: 200, channels: 3, background: '#fff' } })
      .png()
      .toBuffer();
    const refused = await upload(w.t.url, big, { bearer: visitor.token, filename: 'big.png' });
    expect(refused.status).toBe(413);
    expect(refused.body.msg).toMatch(/40000 pixels.*IMAGE_MAX_PIXELS/);
    const after = await stored(w);
    expect(after.objects.sort()).toEqual(before.objects.sort());
    expect(after.rows.length).toBe(before.rows.length);
    expect(after.incoming).toEqual([]);
    const small = await sharp({ create: { width: 50, height: 50, channels: 3, background: '#fff' } })
      .png()
      .toBuffer();
    const ok = await upload(w.t.url, small, { bearer: visitor.token, filename: 'small.png' });
    expect(ok.status).toBe(200);
    const image = ok.body.data as { url: string; size: number };
    const answer = await rawGet(w.t.url, image.url);
    expect(answer.status).toBe(200);
    expect(exactBody(answer).length).toBe(image.size);
    expect((await sharp(answer.body).metadata()).width).toBe(50);
  });
});
