import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { type Gateway, percentile as pct, startEmbeddedGateway, visitorToken } from './lib.js';

/**
 * `npx tsx bench/image-bombs.ts [--quick]` (issue 27 row 1): what N image bombs uploaded at once
 * by one merchant's visitors cost the gateway, and what they cost another tenant.
 *
 * The gateway runs as its own process (embedded PGlite, local storage, the image pool's
 * defaults) with `bench/memory-probe.mjs` preloaded. Another merchant (`acme`) uploads a small
 * PNG (1 KB) again and again, one at a time; its latency is measured first alone (the baseline,
 * in the same run) and then while N bombs (`demo`, one fresh visitor token each) are processed:
 * - "header bombs": N GIFs of 7000×7000 (33 KB each, the issue's), over the pixel budget: refused
 *   from the header (413) without decoding;
 * - "budget bombs": N GIFs of 4096×4096 (16.8 Mpx, just under IMAGE_MAX_PIXELS), the most a
 *   visitor can make the gateway decode: accepted one at a time per merchant (the pool), the
 *   rest refused with 503 once they waited IMAGE_QUEUE_TIMEOUT_MS.
 * Reported: the gateway's RSS growth during each phase (peak against before, garbage included)
 * and the other tenant's upload latency (median and worst) against the baseline.
 * UPLOADS_PER_MINUTE is raised for the run (the other tenant uploads more than 20 a minute).
 */

const quick = process.argv.includes('--quick');
const N = quick ? 4 : 8;
const SAMPLES = quick ? 15 : 40;
const MIB = 1048576;

type Memory = Record<'rss' | 'heapUsed' | 'external' | 'arrayBuffers' | 'live', number>;

const base = { url: '' };

const token = (appkey: string) => visitorToken(base.url, appkey);

async function upload(bearer: string, bytes: Buffer, name: string) {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(bytes)]), name);
  const res = await fetch(`${base.url}/visitor/upload`, {
    method: 'POST',
    body: form,
    headers: { authorization: `Bearer ${bearer}` },
  });
  return { status: res.status, body: (await res.json()) as { code: number; msg: string } };
}

/** The other tenant's small uploads, one after another, until `until` settles (at least `min`). */
async function smallUploads(bearer: string, image: Buffer, opts: { min: number; until?: Promise<unknown> }) {
  const latencies: number[] = [];
  let done = false;
  void opts.until?.finally(() => {
    done = true;
  });
  while (latencies.length < opts.min || (opts.until && !done)) {
    const started = performance.now();
    const answer = await upload(bearer, image, 'small.png');
    if (answer.body.code !== 0)
      throw new Error(`the other tenant's upload was refused: ${JSON.stringify(answer.body)}`);
    latencies.push(performance.now() - started);
  }
  return latencies;
}

const ms = (v: number) => `${v.toFixed(0)} ms`;
const fmt = (n: number) => `${(n / MIB).toFixed(0)} MiB`;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'parley-bench-bombs-'));
  let started: Gateway | undefined;
  try {
    const [headerBomb, budgetBomb, small] = await Promise.all([
      sharp({ create: { width: 7000, height: 7000, channels: 3, background: '#36c' } })
        .gif()
        .toBuffer(),
      sharp({ create: { width: 4096, height: 4096, channels: 3, background: '#c63' } })
        .gif()
        .toBuffer(),
      sharp({ create: { width: 24, height: 24, channels: 3, background: '#3c6' } })
        .png()
        .toBuffer(),
    ]);
    started = await startEmbeddedGateway(
      { ATTACHMENTS_DIR: dir, STORAGE_DRIVER: 'local', UPLOADS_PER_MINUTE: '10000' },
      { memoryProbe: true },
    );
    const gateway = started.child;
    base.url = started.url;
    const other = await token('acme-appkey');
    const watch = () => gateway.send({ cmd: 'watch', live: false });
    const stop = async () => {
      const report = new Promise<{ before: Memory; peak: Memory }>((resolve) => gateway.once('message', resolve));
      gateway.send({ cmd: 'stop' });
      return report;
    };

    await smallUploads(other, small, { min: 5 }); // warm-up: sharp loaded, every path once
    watch();
    const baseline = await smallUploads(other, small, { min: SAMPLES });
    const alone = await stop();

    const phase = async (bomb: Buffer, name: string) => {
      const tokens = await Promise.all(Array.from({ length: N }, () => token('demo-appkey')));
      await new Promise((r) => setTimeout(r, 500));
      watch();
      const started = performance.now();
      const bombs = Promise.all(tokens.map((t) => upload(t, bomb, name)));
      const latencies = await smallUploads(other, small, { min: 5, until: bombs });
      const answers = await bombs;
      const seconds = (performance.now() - started) / 1000;
      const memory = await stop();
      const statuses = new Map<number, number>();
      for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
      return { latencies, memory, seconds, statuses: [...statuses].map(([s, n]) => `${n}× ${s}`).join(', ') };
    };
    const header = await phase(headerBomb, 'header-bomb.gif');
    const budget = await phase(budgetBomb, 'budget-bomb.gif');

    const p50 = pct(baseline, 0.5);
    console.log(
      `\nImage bombs (${N} at once, one merchant; another merchant's ${small.length}-byte PNG uploads one after another):`,
    );
    console.log(
      '| phase | bombs answered | RSS growth (peak) | other tenant p50 | other tenant max | p50 vs baseline |',
    );
    console.log('|---|---|---|---|---|---|');
    console.log(
      `| baseline (no bombs) | — | ${fmt(alone.peak.rss - alone.before.rss)} | ${ms(p50)} | ${ms(Math.max(...baseline))} | 1.00× |`,
    );
    for (const [label, r, bomb] of [
      [`${N} × 7000×7000 GIF (${(headerBomb.length / 1024).toFixed(0)} KB, over the budget)`, header, headerBomb],
      [`${N} × 4096×4096 GIF (${(budgetBomb.length / 1024).toFixed(0)} KB, at the budget)`, budget, budgetBomb],
    ] as const) {
      void bomb;
      console.log(
        `| ${label} | ${r.statuses} in ${r.seconds.toFixed(1)} s | ${fmt(r.memory.peak.rss - r.memory.before.rss)} | ${ms(pct(r.latencies, 0.5))} | ${ms(Math.max(...r.latencies))} | ${(pct(r.latencies, 0.5) / p50).toFixed(2)}× |`,
      );
    }
    console.log(`RSS before the bombs: ${fmt(alone.before.rss)}.`);
  } finally {
    await started?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
