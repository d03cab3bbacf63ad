import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type S3Server, startS3Server } from '../test/support/s3.js';
import { type Gateway, startEmbeddedGateway, visitorToken } from './lib.js';

/**
 * `npx tsx bench/attachments-memory.ts [MiB] [--driver=local|s3]`: how much the gateway's memory
 * grows while it receives one large video upload (default 100 MiB, the demo merchant's video
 * limit), on each storage driver (default both; s3 against an s3rver process, as the tests do).
 *
 * The gateway runs as its own process (embedded PGlite, the scratch directory in a temporary
 * directory) with `bench/memory-probe.mjs` preloaded. After a 4 MiB warm-up upload:
 * - RSS rounds (the first is the first large upload after start): the probe samples the process
 *   every 5 ms and reports the highest resident set, heap and arrayBuffers against their values
 *   just before the upload. Garbage not yet collected counts: this is what an operator sees.
 * - live rounds: the probe forces full collections 200 ms after the previous ones during the upload and reports the
 *   highest live heap (heapUsed + external) against the live heap just before: what the upload
 *   really holds. A gateway that buffered the body would show the file's size in both.
 */

const MIB = 1048576;
const args = process.argv.slice(2);
const sizeMiB = Number(args.find((a) => /^\d+$/.test(a)) ?? 100);
const size = sizeMiB * MIB;
const driverArg = args.find((a) => a.startsWith('--driver='))?.slice('--driver='.length);
const drivers = driverArg ? [driverArg as 'local' | 's3'] : (['local', 's3'] as const);
const RSS_ROUNDS = 5;
const LIVE_ROUNDS = 3;

type Memory = Record<'rss' | 'heapUsed' | 'external' | 'arrayBuffers' | 'live', number>;

const fmt = (n: number) => (n / MIB).toFixed(1);

async function measure(driver: 'local' | 's3') {
  const dir = mkdtempSync(join(tmpdir(), 'parley-bench-attachments-'));
  let s3: S3Server | undefined;
  let started: Gateway | undefined;
  try {
    s3 = driver === 's3' ? await startS3Server('parley-bench') : undefined;
    started = await startEmbeddedGateway(
      {
        ATTACHMENTS_DIR: dir,
        // The live rounds' forced collections slow the upload down: more than the default 30 s.
        HTTP_REQUEST_TIMEOUT_MS: '3600000',
        ...(s3 ? s3.env() : { STORAGE_DRIVER: 'local' }),
      },
      { memoryProbe: true },
    );
    const gateway = started.child;
    const base = started.url;
    const token = await visitorToken(base, 'demo-appkey');

    /** One upload while the probe watches; the probe's {before, peak}. */
    const watched = async (live: boolean) => {
      await new Promise((r) => setTimeout(r, 300));
      gateway.send({ cmd: 'watch', live });
      const started = performance.now();
      const answer = await uploadVideo(base, token, size);
      const seconds = (performance.now() - started) / 1000;
      if (answer.code !== 0) throw new Error(`upload refused: ${JSON.stringify(answer)}`);
      const report = new Promise<{ before: Memory; peak: Memory }>((resolve) => gateway.once('message', resolve));
      gateway.send({ cmd: 'stop' });
      return { seconds, ...(await report) };
    };

    await uploadVideo(base, token, 4 * MIB); // warm-up: every code path loaded once
    console.log(`\n${driver} storage, ${sizeMiB} MiB video uploads:`);
    console.log('| round | upload | RSS before | RSS growth | heapUsed growth | arrayBuffers growth |');
    console.log('|---|---|---|---|---|---|');
    const rss: number[] = [];
    for (let round = 1; round <= RSS_ROUNDS; round++) {
      const { seconds, before, peak } = await watched(false);
      rss.push(peak.rss - before.rss);
      console.log(
        `| ${round} | ${seconds.toFixed(1)} s | ${fmt(before.rss)} MiB | ${fmt(peak.rss - before.rss)} MiB | ` +
          `${fmt(peak.heapUsed - before.heapUsed)} MiB | ${fmt(peak.arrayBuffers - before.arrayBuffers)} MiB |`,
      );
    }
    const live: number[] = [];
    for (let round = 1; round <= LIVE_ROUNDS; round++) {
      const { before, peak } = await watched(true);
      live.push(peak.live - before.live);
      console.log(
        `live round ${round}: heapUsed +${fmt(peak.heapUsed - before.heapUsed)} external +${fmt(peak.external - before.external)} arrayBuffers +${fmt(peak.arrayBuffers - before.arrayBuffers)} rss +${fmt(peak.rss - before.rss)}`,
      );
    }
    console.log(
      `${driver}: RSS growth ${rss.map(fmt).join(' / ')} MiB (first / later rounds), at most ${fmt(Math.max(...rss))} MiB; ` +
        `live heap growth (forced full collections) ${live.map(fmt).join(' / ')} MiB`,
    );
  } finally {
    await started?.stop();
    await s3?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const box = (type: string, ...payload: Buffer[]) => {
  const body = Buffer.concat(payload);
  const header = Buffer.alloc(8);
  header.writeUInt32BE(8 + body.length, 0);
  header.write(type, 4, 'latin1');
  return Buffer.concat([header, body]);
};

/** The boxes before the media of an MP4 of `bytes` bytes: ftyp, moov (one video track), the mdat header. */
function movieHead(bytes: number): Buffer {
  const ftyp = box('ftyp', Buffer.from('isom\0\0\x02\0isomiso2mp41', 'latin1'));
  const hdlr = box('hdlr', Buffer.alloc(8), Buffer.from('vide', 'latin1'), Buffer.alloc(13));
  const moov = box('moov', box('mvhd', Buffer.alloc(100)), box('trak', box('mdia', hdlr)));
  const mdat = Buffer.alloc(8);
  mdat.writeUInt32BE(bytes - ftyp.length - moov.length, 0);
  mdat.write('mdat', 4, 'latin1');
  return Buffer.concat([ftyp, moov, mdat]);
}

/** Streams an MP4 of `bytes` bytes as multipart, 64 KiB at a time, with a Content-Length. */
function uploadVideo(base: string, token: string, bytes: number) {
  const boundary = `----bench${Date.now()}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="kind"\r\n\r\nvideo\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.mp4"\r\nContent-Type: video/mp4\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const chunk = Buffer.alloc(65536, 0x42);
  // A well-formed movie (the upload checks the box structure): ftyp, a moov with one video track,
  // then an mdat header whose size covers the rest of the file.
  const first = Buffer.alloc(65536, 0x42);
  movieHead(bytes).copy(first);
  let sent = 0;
  return new Promise<{ code: number; msg: string; data?: { kind: string; size: number } }>((resolve, reject) => {
    const req = request(
      `${base}/visitor/upload`,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': String(head.length + bytes + tail.length),
        },
      },
      (res) => {
        if (res.statusCode !== 200) console.error(`upload answered ${res.statusCode} after ${sent} bytes`);
        let text = '';
        res.on('data', (d) => {
          text += d;
        });
        res.on('end', () => {
          try {
            resolve(JSON.parse(text));
          } catch {
            reject(new Error(`upload answered ${res.statusCode} without an envelope: ${text.slice(0, 200)}`));
          }
        });
      },
    );
    req.on('error', (error) => reject(new Error(`upload failed after ${sent} bytes: ${error.message}`)));
    req.write(head);
    const more = () => {
      while (sent < bytes) {
        const n = Math.min(65536, bytes - sent);
        const piece = (sent === 0 ? first : chunk).subarray(0, n);
        sent += n;
        if (!req.write(piece)) return void req.once('drain', more);
      }
      req.end(tail);
    };
    more();
  });
}

for (const driver of drivers) await measure(driver);
