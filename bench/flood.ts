import { spawn } from 'node:child_process';
import { type Gateway, percentile as pct, startEmbeddedGateway, visitorToken } from './lib.js';

/**
 * `npx tsx bench/flood.ts [--quick]` (issue 27 row 2): what one merchant's flooding visitor
 * tokens cost another merchant's chat on a shared instance.
 *
 * The gateway runs as its own process (embedded PGlite, in-process stores, the chat budgets'
 * defaults: CHAT_MESSAGE_BURST, CHAT_MESSAGES_PER_HOUR, CHAT_MERCHANT_MESSAGES_PER_MINUTE).
 * Another merchant (`acme`) sends one message at a time, at most one per PACE_MS, round robin
 * over ten visitors (each stays within its own budget); its send latency is measured first alone (the baseline, in the
 * same run) and then while FLOODERS visitor tokens of `demo` each send 5,000-character messages
 * as fast as CONCURRENCY loops allow (the issue's attack: 76–86 messages/s per token). Reported,
 * for ROUNDS rounds of a baseline then a flood: the other tenant's p50 and p99 against the
 * baseline just before, and what the flood got (stored, refused with 1429). The flood runs in a
 * process of its own, as an attacker's client would. Every fairness rule runs with its production
 * default (CHAT_FAIR_SHARE_LOOP_DELAY_MS, VISITOR_REFUSAL_DELAY_MS): the run prints what it used.
 *
 * `--postgres`: the gateway on DATABASE_URL and REDIS_URL (a private database: the demo seed is
 * written there). `--profile DIR`: the gateway writes a V8 CPU profile of the run into DIR.
 */

const quick = process.argv.includes('--quick');
const SAMPLES = quick ? 40 : 150;
/** Baseline-then-flood rounds: the machine is shared, so each flood is judged against its own baseline. */
const ROUNDS = quick ? 3 : 5;
const FLOODERS = 3;
const CONCURRENCY = 8;
const base = { url: '' };
const postgresMode = process.argv.includes('--postgres');
const profileDir = process.argv.includes('--profile') ? process.argv[process.argv.indexOf('--profile') + 1] : undefined;

const token = (appkey: string) => visitorToken(base.url, appkey);

let n = 0;
let resets = 0;
async function send(bearer: string, content: string) {
  const res = await fetch(`${base.url}/visitor/message/send`, {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    body: JSON.stringify({ client_msg_id: `flood-${n++}`, content }),
  });
  return (await res.json()) as { code: number; msg: string };
}

/**
 * The other tenant starts at most one send per PACE_MS (10 a second, 1 a second per visitor):
 * within its visitors' CHAT_MESSAGE_BURST and its merchant's CHAT_MERCHANT_MESSAGES_PER_MINUTE
 * however fast the instance answers (unpaced, on a quieter machine, its own budgets refused it).
 */
const PACE_MS = 100;

/** The other tenant's sends, one at a time over its visitors; every one must be stored. */
async function tenantSends(bearers: string[], count: number) {
  const latencies: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const next = started + PACE_MS;
    const bearer = bearers[i % bearers.length] as string;
    // A reset connection is retried once (and counted): the latency includes the retry.
    const answer = await send(bearer, `hello ${i}`).catch(() => {
      resets++;
      return send(bearer, `hello ${i}`);
    });
    if (answer.code !== 0) throw new Error(`the other tenant's send was refused: ${JSON.stringify(answer)}`);
    latencies.push(performance.now() - started);
    const early = next - performance.now();
    if (early > 0) await new Promise((r) => setTimeout(r, early));
  }
  return latencies;
}

const ms = (v: number) => `${v.toFixed(1)} ms`;

/** The gateway's setting `name` for this run: the environment's, else the default (named). */
const setting = (name: string, fallback: string) => process.env[name] ?? `${fallback} (default)`;

/** One flood phase: FLOODERS fresh tokens of `demo` flood from a process of their own while `tenant` sends. */
async function floodPhase(tenant: string[]) {
  const flooders = await Promise.all(Array.from({ length: FLOODERS }, () => token('demo-appkey')));
  // The flood runs in a process of its own, as an attacker's client would: the other tenant's
  // latency is then the gateway's, not this process's event loop busy with the flood's loops.
  const flood = spawn(process.execPath, ['--import', 'tsx', 'bench/flood.ts', '--flood', base.url, ...flooders], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  flood.stdout?.on('data', (chunk) => {
    out += chunk;
  });
  const floodExited = new Promise((r) => flood.once('exit', r));
  const started = performance.now();
  while (!out.includes('flooding')) {
    if (flood.exitCode !== null) throw new Error('the flood did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 1000)); // the flood under way
  const during = await tenantSends(tenant, SAMPLES);
  flood.stdin?.end(); // the flood stops and prints what it got
  await floodExited;
  const got = JSON.parse(out.slice(out.indexOf('{'))) as { stored: number; refused: number; other: number };
  return { during, got, seconds: (performance.now() - started) / 1000 };
}

const median = (values: number[]) => pct(values, 0.5);
/** The three slowest samples of a phase and their place in it (#0 is the first send). */
const slowest = (latencies: number[]) =>
  [...latencies.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([i, v]) => `#${i} ${v.toFixed(0)} ms`)
    .join(', ');

async function main() {
  let gateway: Gateway | undefined;
  try {
    if (postgresMode && !(process.env.DATABASE_URL && process.env.REDIS_URL))
      throw new Error('--postgres needs DATABASE_URL and REDIS_URL');
    gateway = await startEmbeddedGateway(
      {
        ...(postgresMode
          ? { DATABASE_URL: process.env.DATABASE_URL as string, REDIS_URL: process.env.REDIS_URL as string }
          : {}),
        // Keep-alive sockets outlive the phases: a socket closed by the server just as the client
        // reuses it is a reset, not the gateway's answer.
        HTTP_KEEP_ALIVE_TIMEOUT_MS: '60000',
      },
      { nodeArgs: profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [] },
    );
    base.url = gateway.url;
    const tenant = await Promise.all(Array.from({ length: 10 }, () => token('acme-appkey')));
    await tenantSends(tenant, 10); // warm-up: every path once, a conversation per visitor

    console.log(
      `\nFlood (${FLOODERS} visitor tokens of one merchant, ${CONCURRENCY} sends in flight each, 5,000 characters; another merchant's sends one at a time (at most one per ${PACE_MS} ms) over 10 visitors, ${SAMPLES} samples a phase, ${ROUNDS} rounds of baseline then flood, each flood against the baseline just before it).`,
    );
    // The production defaults unless the environment sets them (the bench's other rows raise
    // some: bench/run.ts; this one does not).
    console.log(
      `Gateway settings: CHAT_FAIR_SHARE_LOOP_DELAY_MS ${setting('CHAT_FAIR_SHARE_LOOP_DELAY_MS', '20')}, VISITOR_REFUSAL_DELAY_MS ${setting('VISITOR_REFUSAL_DELAY_MS', '1000')}, CHAT_MESSAGE_BURST ${setting('CHAT_MESSAGE_BURST', '30')}, CHAT_MERCHANT_SENDS_IN_FLIGHT ${setting('CHAT_MERCHANT_SENDS_IN_FLIGHT', '4')}; ${postgresMode ? 'PostgreSQL + Redis' : 'embedded PGlite'}.`,
    );
    console.log(
      '| round | phase | other tenant p50 | other tenant p99 | p50 vs baseline | p99 vs baseline | slowest sends (#: place in the phase) | flood answered |',
    );
    console.log('|---|---|---|---|---|---|---|---|');
    const p50Ratios: number[] = [];
    const p99Ratios: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const baseline = await tenantSends(tenant, SAMPLES);
      const { during, got, seconds } = await floodPhase(tenant);
      const p50 = pct(baseline, 0.5);
      const p99 = pct(baseline, 0.99);
      p50Ratios.push(pct(during, 0.5) / p50);
      p99Ratios.push(pct(during, 0.99) / p99);
      console.log(
        `| ${round} | baseline (no flood) | ${ms(p50)} | ${ms(p99)} | 1.00× | 1.00× | ${slowest(baseline)} | — |`,
      );
      console.log(
        `| ${round} | ${FLOODERS} tokens flooding | ${ms(pct(during, 0.5))} | ${ms(pct(during, 0.99))} | ${(p50Ratios.at(-1) as number).toFixed(2)}× | ${(p99Ratios.at(-1) as number).toFixed(2)}× | ${slowest(during)} | ${got.stored} stored, ${got.refused} refused 1429${got.other ? `, ${got.other} other (connection errors)` : ''} in ${seconds.toFixed(1)} s (${(got.stored / seconds).toFixed(1)} stored/s) |`,
      );
    }
    if (resets) console.log(`The other tenant's sends retried after a reset connection: ${resets}.`);
    console.log(
      `Median over the rounds: p50 ${median(p50Ratios).toFixed(2)}×, p99 ${median(p99Ratios).toFixed(2)}× the baseline.`,
    );
  } finally {
    await gateway?.stop();
  }
}

/** The flood's process: FLOODERS tokens × CONCURRENCY loops until its standard input closes. */
async function flood(url: string, flooders: string[]) {
  base.url = url;
  const big = 'x'.repeat(5000);
  let stop = false;
  process.stdin.on('end', () => {
    stop = true;
  });
  process.stdin.resume();
  const got = { stored: 0, refused: 0, other: 0 };
  process.stdout.write('flooding\n');
  await Promise.all(
    flooders.flatMap((bearer) =>
      Array.from({ length: CONCURRENCY }, async () => {
        while (!stop) {
          // A flooder's connection may be reset under load: counted, and the flood goes on.
          const answer = await send(bearer, big).catch(() => ({ code: -2 }));
          if (answer.code === 0) got.stored++;
          else if (answer.code === 1429) got.refused++;
          else got.other++;
        }
      }),
    ),
  );
  process.stdout.write(`${JSON.stringify(got)}\n`);
}

if (process.argv[2] === '--flood') await flood(process.argv[3] as string, process.argv.slice(4));
else await main();
