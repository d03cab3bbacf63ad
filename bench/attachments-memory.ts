import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * `npx tsx bench/attachments-memory.ts [MiB]`: how much the gateway's memory grows while it
 * receives one large video upload (default 100 MiB, the demo merchant's video limit).
 *
 * The gateway runs as its own process (embedded PGlite, local storage in a temporary
 * directory); its resident set (VmRSS in /proc) is sampled every 10 ms. The figure is the
 * highest sample during the upload minus the resident set just before it, after a warm-up
 * upload that loads every code path once; five rounds, each against the resident set just before it. A gateway that buffered the body would grow by the
 * file's size.
 */

const MIB = 1048576;
const sizeMiB = Number(process.argv[2] ?? 100);
const size = sizeMiB * MIB;
const ROUNDS = 5;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

const rssOf = (pid: number) => {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
};

async function main() {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'parley-bench-attachments-'));
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: {
      ...process.env,
      NODE_ENV: 'test',
      PORT: String(port),
      HOST: '127.0.0.1',
      PGLITE_DIR: 'memory://',
      DEMO_SEED: 'on',
      ATTACHMENTS_DIR: dir,
      LOG_LEVEL: 'warn',
      DATABASE_URL: '',
      REDIS_URL: '',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    const deadline = Date.now() + 60_000;
    while (
      !(await fetch(`${base}/healthz`).then(
        (r) => r.ok,
        () => false,
      ))
    ) {
      if (Date.now() > deadline) throw new Error('the gateway did not start');
      await new Promise((r) => setTimeout(r, 200));
    }
    const token = await fetch(`${base}/visitor/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ appkey: 'demo-appkey' }),
    })
      .then((r) => r.json())
      .then((b) => (b as { data: { token: string } }).data.token);

    const pid = child.pid as number;
    await uploadVideo(base, token, 4 * MIB); // warm-up: every code path loaded once
    const fmt = (n: number) => (n / MIB).toFixed(1);
    const growths: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      await new Promise((r) => setTimeout(r, 500));
      const before = rssOf(pid);
      let peak = before;
      const sampler = setInterval(() => {
        peak = Math.max(peak, rssOf(pid));
      }, 10);
      const started = performance.now();
      const answer = await uploadVideo(base, token, size);
      const seconds = (performance.now() - started) / 1000;
      clearInterval(sampler);
      peak = Math.max(peak, rssOf(pid));
      if (answer.code !== 0) throw new Error(`upload refused: ${JSON.stringify(answer)}`);
      growths.push(peak - before);
      console.log(
        `round ${round}: ${sizeMiB} MiB ${answer.data?.kind} (${answer.data?.size} bytes) in ${seconds.toFixed(1)} s: ` +
          `gateway RSS ${fmt(before)} MiB before, peak ${fmt(peak)} MiB, growth ${fmt(peak - before)} MiB`,
      );
    }
    const sorted = [...growths].sort((a, b) => a - b);
    console.log(
      `RSS growth during a ${sizeMiB} MiB upload over ${ROUNDS} rounds: median ${fmt(sorted[Math.floor(ROUNDS / 2)] ?? 0)} MiB, ` +
        `max ${fmt(sorted[ROUNDS - 1] ?? 0)} MiB`,
    );
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Streams a fake MP4 of `bytes` bytes as multipart, 64 KiB at a time, with a Content-Length. */
function uploadVideo(base: string, token: string, bytes: number) {
  const boundary = `----bench${Date.now()}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="kind"\r\n\r\nvideo\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.mp4"\r\nContent-Type: video/mp4\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const chunk = Buffer.alloc(65536, 0x42);
  const first = Buffer.alloc(65536, 0x42);
  Buffer.from('\0\0\0\x18ftypisom\0\0\0\0isomiso2', 'latin1').copy(first);
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
        let text = '';
        res.on('data', (d) => {
          text += d;
        });
        res.on('end', () => resolve(JSON.parse(text)));
      },
    );
    req.on('error', reject);
    req.write(head);
    let sent = 0;
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

await main();
