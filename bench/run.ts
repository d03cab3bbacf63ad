import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import postgres from 'postgres';
import { loadConfig } from '../src/config.js';
import { seedDemoData } from '../src/db/seed.js';
import { buildDeps } from '../src/deps.js';
import { createLogger } from '../src/log.js';
import { connectSubscribers } from './fanout-client.js';
import {
  type Comparison,
  interleave,
  LOAD_CORE,
  type LoadResult,
  load,
  median,
  type Proc,
  SERVER_CORE,
  startPinned,
  summarize,
} from './lib.js';

/**
 * `npm run bench`: every hot path of the gateway measured against a floor doing the same work in
 * the same run (see BENCHMARKS.md). Needs PostgreSQL and Redis (DATABASE_URL / REDIS_URL,
 * defaulting to 127.0.0.1); creates and drops its own database and Redis key prefix.
 * `--quick` shortens every window (a smoke run, not for the record).
 */

const quick = process.argv.includes('--quick');
const WINDOW = { rounds: 3, seconds: quick ? 2 : 5, warmup: quick ? 1 : 5 };
const ADMIN_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const INTERNAL_TOKEN = 'bench-internal-token-0123456789';
// Four characters, as the captchas people are shown (the image size follows the text).
const CAPTCHA = 'bxmr';
const stamp = Date.now().toString(36);
const dbName = `parley_bench_${stamp}`;
const dbUrl = Object.assign(new URL(ADMIN_URL), { pathname: `/${dbName}` }).toString();
const REDIS_PREFIX = `parley-bench:${stamp}:`;

const log = (...args: unknown[]) => console.log(...args);
const rows: string[][] = [];
const notes: string[] = [];
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const mib = (bytes: number) => `${fmt(bytes / 1048576, 0)} MiB`;

// ---------------------------------------------------------------- machine setup
function pin(pattern: string, core: string) {
  try {
    for (const pid of execFileSync('pgrep', ['-f', pattern], { encoding: 'utf8' }).trim().split('\n')) {
      if (pid) execFileSync('taskset', ['-acp', core, pid], { stdio: 'ignore' });
    }
  } catch {
    notes.push(`could not pin ${pattern} to core ${core}`);
  }
}

function eluOf(file: string): { idle: number; active: number } {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return { idle: 0, active: 0 };
  }
}

// ---------------------------------------------------------------- data
async function prepareDatabase() {
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${dbName}`);
  await admin.end();
  const config = loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: dbUrl,
    REDIS_URL,
    REDIS_PREFIX,
    LOG_LEVEL: 'warn',
  });
  const deps = await buildDeps(config, createLogger('warn'));
  await deps.database.migrate();
  await seedDemoData(deps);
  await deps.close();
  // Agents with 10 and 1,000 ongoing conversations, for how the workbench grows with size.
  const sql = postgres(dbUrl, { max: 1, onnotice: () => {} });
  const aliceHash = (await sql`select password_hash from agents where username = 'alice'`)[0]?.password_hash;
  for (const n of [10, 1000]) {
    const id = `a_bench${n}`;
    await sql`insert into agents (id, merchant_id, group_id, username, password_hash, nickname, level)
              values (${id}, 'm_demo', 'g_demo_default', ${`bench${n}`}, ${aliceHash}, ${`Bench ${n}`}, 'agent')`;
    await sql`insert into visitors (id, merchant_id, nickname, lang, channel)
              select ${`v_b${n}_`} || g, 'm_demo', 'Visitor ' || g, 'en', ${`visitor-b${n}-`} || g from generate_series(1, ${n}) g`;
    await sql`insert into conversations (id, merchant_id, agent_id, visitor_id, timestamp, pinned_at, unread_count, items)
              select ${`c_b${n}_`} || g, 'm_demo', ${id}, ${`v_b${n}_`} || g, 1700000000 + g, case when g % 10 = 0 then 1700000000 + g else 0 end,
                     g % 4, '[{"type":"text","content":"hello there","from":"visitor"}]'::jsonb
              from generate_series(1, ${n}) g`;
  }
  await sql.end();
}

async function dropDatabase() {
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists ${dbName} with (force)`).catch(() => {});
  await admin.end();
  try {
    execFileSync(
      'sh',
      ['-c', `redis-cli -u ${REDIS_URL} --scan --pattern '${REDIS_PREFIX}*' | xargs -r redis-cli -u ${REDIS_URL} del`],
      {
        stdio: 'ignore',
      },
    );
  } catch {
    // best effort
  }
}

// ---------------------------------------------------------------- processes
const serverEnv = (extra: Record<string, string> = {}) => ({
  NODE_ENV: 'test',
  DATABASE_URL: dbUrl,
  REDIS_URL,
  REDIS_PREFIX,
  LOG_LEVEL: 'warn',
  DEMO_SEED: 'off',
  CAPTCHA_TEST_ANSWER: CAPTCHA,
  INTERNAL_API_TOKEN: INTERNAL_TOKEN,
  SESSION_SECRET: 'bench-session-secret-0123456789abcdef0123',
  // The fan-out rows open thousands of sockets as one agent from one address: above every cap.
  WS_MAX_SOCKETS_PER_IDENTITY: '100000',
  WS_MAX_SOCKETS_PER_ADDRESS: '100000',
  WS_MAX_SUBSCRIPTIONS_PER_IDENTITY: '100000',
  WS_MAX_SUBSCRIPTIONS_PER_ADDRESS: '100000',
  WS_MAX_SOCKETS: '100000',
  WS_MAX_SUBSCRIPTIONS: '100000',
  ...extra,
});
const probeFile = (name: string, kind: 'elu' | 'heap') => `/tmp/parley-${kind}-${stamp}-${name}.json`;
const withProbe = (name: string) => ({
  BENCH_ELU_FILE: probeFile(name, 'elu'),
  BENCH_HEAP_FILE: probeFile(name, 'heap'),
  NODE_OPTIONS: '--expose-gc --import ./bench/elu-probe.mjs',
});

/** Live memory (V8 heap + external buffers) of a probed server right after a full collection. */
async function liveMemory(proc: Proc, name: string): Promise<number> {
  const asked = Date.now();
  process.kill(proc.child.pid as number, 'SIGUSR2');
  for (let attempt = 0; attempt < 50; attempt++) {
    await sleep(100);
    try {
      const m = JSON.parse(readFileSync(probeFile(name, 'heap'), 'utf8'));
      if (m.at >= asked) return m.heapUsed + m.external;
    } catch {
      // not written yet
    }
  }
  throw new Error(`${name}: the heap probe did not answer`);
}

async function login(base: string, username: string): Promise<string> {
  const captcha = await fetch(`${base}/agent/login/logincaptcha`);
  const cookie = (captcha.headers.get('set-cookie') ?? '').split(';')[0] as string;
  await captcha.arrayBuffer();
  const res = await fetch(`${base}/agent/login/check`, {
    method: 'POST',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ username, password: 'alice-password', captcha: CAPTCHA }),
  });
  const body = (await res.json()) as { code: number; data: { token: string } };
  if (body.code !== 0) throw new Error(`bench login as ${username} failed: ${JSON.stringify(body)}`);
  return body.data.token;
}

/** Fetches `count` login captchas (one fresh Session each) and returns their cookies. */
async function captchaSessions(base: string, count: number): Promise<string[]> {
  const cookies: string[] = [];
  for (let i = 0; i < count; i += 25) {
    await Promise.all(
      Array.from({ length: Math.min(25, count - i) }, async () => {
        const res = await fetch(`${base}/agent/login/logincaptcha`);
        await res.arrayBuffer();
        cookies.push((res.headers.get('set-cookie') ?? '').split(';')[0] as string);
      }),
    );
  }
  return cookies;
}

const json = async (res: Response) => (await res.json()) as { code: number; data: Record<string, unknown> };
const strip = (data: Record<string, unknown>) =>
  JSON.parse(JSON.stringify(data, (k, v) => (k === 'ws_address' ? undefined : v)));

function record(name: string, c: Comparison, target: string, met: boolean, extra = '') {
  const a = summarize(c.baseline);
  const b = summarize(c.scenario);
  rows.push([
    name,
    `${fmt(b.rps)} req/s`,
    `${fmt(a.rps)} req/s`,
    `**${fmt(c.ratio, 2)}×**`,
    target,
    met ? 'met' : '**not met**',
    `${fmt(b.p50, 1)} / ${fmt(b.p99, 1)} ms`,
    `${fmt(a.p50, 1)} / ${fmt(a.p99, 1)} ms`,
    [`ELU ${fmt(b.cpu, 2)} / ${fmt(a.cpu, 2)}, RSS ${mib(b.rss)} / ${mib(a.rss)}`, extra].filter(Boolean).join('; '),
  ]);
  log(`${name}: ${fmt(b.rps)} vs ${fmt(a.rps)} req/s → ${fmt(c.ratio, 2)}× (${met ? 'met' : 'NOT met'}) ${extra}`);
}

// ---------------------------------------------------------------- main
async function main() {
  execFileSync('taskset', ['-cp', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  pin('postgres', LOAD_CORE);
  pin('redis-server', LOAD_CORE);
  log(`preparing database ${dbName}`);
  await prepareDatabase();

  const gateway = await startPinned('src/main.ts', { ...serverEnv(), ...withProbe('gateway') });
  const floor = await startPinned('bench/floors.ts', { ...serverEnv(), ...withProbe('floor') });
  const procs: Proc[] = [gateway, floor];
  try {
    const eluFile = (p: Proc) => probeFile(p === gateway ? 'gateway' : 'floor', 'elu');
    const measured =
      (proc: Proc, spec: Omit<Parameters<typeof load>[0], 'seconds' | 'pid'>) => async (seconds: number) => {
        const before = eluOf(eluFile(proc));
        const result = await load({ ...spec, seconds, pid: proc.child.pid });
        const after = eluOf(eluFile(proc));
        const active = after.active - before.active;
        const idle = after.idle - before.idle;
        return {
          ...result,
          cpu: active + idle > 0 ? active / (active + idle) : result.cpu,
          rss: proc.rss(),
        } satisfies LoadResult;
      };

    // Identities.
    const visitorRes = await json(
      await fetch(`${gateway.url}/visitor/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ appkey: 'demo-appkey' }),
      }),
    );
    const visitorAuth = { authorization: `Bearer ${(visitorRes.data as { token: string }).token}` };
    const agentTokens: Record<string, string> = {};
    for (const name of ['alice', 'bench10', 'bench1000']) agentTokens[name] = await login(gateway.url, name);

    // Correctness first: the gateway and the floor give the same data.
    for (const [path, headers] of [
      ['/visitor/data/get', visitorAuth],
      ['/agent/data/get', { token: agentTokens.bench10 as string }],
    ] as const) {
      const g = await json(await fetch(gateway.url + path, { headers }));
      const f = await json(await fetch(floor.url + path, { headers }));
      if (g.code !== 0 || !isDeepStrictEqual(strip(g.data), strip(f.data))) {
        throw new Error(`${path}: gateway and floor disagree:\n${JSON.stringify(g)}\n${JSON.stringify(f)}`);
      }
    }
    log('correctness: gateway and floor return the same bootstrap data');

    const rest = (path: string, headers: Record<string, string>) =>
      measured(gateway, { url: gateway.url + path, headers });
    const raw = (path: string, headers: Record<string, string>) => measured(floor, { url: floor.url + path, headers });
    const gql = (query: string, headers: Record<string, string>) =>
      measured(gateway, {
        url: `${gateway.url}/graphql`,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ query }),
      });

    // 1. Visitor bootstrap.
    const s1 = await interleave(raw('/visitor/data/get', visitorAuth), rest('/visitor/data/get', visitorAuth), WINDOW);
    record('1 GET /visitor/data/get', s1, '≥ 0.6× (stretch 0.85×)', s1.ratio >= 0.6);

    // 2. Agent workbench, at 10 and 1,000 conversations.
    const agentRest: Record<string, Comparison> = {};
    for (const who of ['bench10', 'bench1000']) {
      const headers = { token: agentTokens[who] as string };
      // 1,000 conversations make a ~300 kB answer: fewer connections keep latency inside the window.
      const connections = who === 'bench1000' ? 10 : 50;
      const c = await interleave(
        measured(floor, { url: `${floor.url}/agent/data/get`, headers, connections }),
        measured(gateway, { url: `${gateway.url}/agent/data/get`, headers, connections }),
        WINDOW,
      );
      agentRest[who] = c;
      record(`2 GET /agent/data/get (${who.slice(5)} conversations)`, c, '≥ 0.6×', c.ratio >= 0.6);
    }

    // 3. GraphQL over the same data, against the REST rate.
    const VISITOR_QUERY =
      '{ visitorBootstrap { visitor { nickname avatar uid lang channel attributes { key label type value editable } } setting { appname appkey wsAddress uploadLimits { imageMaxBytes fileMaxBytes videoMaxBytes voiceMaxBytes } voice sound uploadFile uploadImg emoji sessionInviteRating sessionInviteResolved verified paid } } }';
    const WORKBENCH_QUERY =
      '{ agentWorkbench { chatting { key id name type timestamp pinnedAt unreadCount bot accountState historyOnlyMine items } agent { agentId nickname avatar level state } agentGroups { id name isDefault } setting { bid appname appkey wsAddress extra } visitorAttributeConfig { attributes { key label type editable } } extensions { nav chatActions sideIframes flags accountLevelOptions } } }';
    const s3v = await interleave(rest('/visitor/data/get', visitorAuth), gql(VISITOR_QUERY, visitorAuth), WINDOW);
    record('3 GraphQL visitorBootstrap', s3v, '≥ 0.7× REST', s3v.ratio >= 0.7);
    const s3a = await interleave(
      rest('/agent/data/get', { token: agentTokens.bench10 as string }),
      gql(WORKBENCH_QUERY, { token: agentTokens.bench10 as string }),
      WINDOW,
    );
    record('3 GraphQL agentWorkbench (10)', s3a, '≥ 0.7× REST', s3a.ratio >= 0.7);

    // 4. Login: each request consumes a captcha fetched beforehand in its own Session.
    const loginBudget = Math.ceil(400 * (WINDOW.seconds * WINDOW.rounds + WINDOW.warmup));
    const cookies = await captchaSessions(gateway.url, loginBudget);
    let next = 0;
    const s4 = await interleave(
      measured(floor, { url: `${floor.url}/login`, method: 'POST' }),
      measured(gateway, {
        url: `${gateway.url}/agent/login/check`,
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ username: 'alice', password: 'alice-password', captcha: CAPTCHA }).toString(),
        setupRequest: (req) => {
          const cookie = cookies[next++ % cookies.length] as string;
          return { ...req, headers: { ...(req.headers as Record<string, string>), cookie } };
        },
      }),
      WINDOW,
    );
    if (next > cookies.length)
      notes.push(`login: ${next} logins used ${cookies.length} captchas; later ones failed the captcha`);
    record('4 POST /agent/login/check', s4, '≥ 0.9× argon2 verify alone', s4.ratio >= 0.9);
    // A wrong captcha is refused before any hashing: faster than a bootstrap.
    const wrong = await interleave(
      rest('/agent/data/get', { token: agentTokens.bench10 as string }),
      measured(gateway, {
        url: `${gateway.url}/agent/login/check`,
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'username=alice&password=x&captcha=wrong',
      }),
      WINDOW,
    );
    record('4b wrong captcha refused (vs scenario 2)', wrong, '≥ 1× scenario 2', wrong.ratio >= 1);

    // 5. Captcha image.
    const s5 = await interleave(
      measured(floor, { url: `${floor.url}/captcha` }),
      measured(gateway, { url: `${gateway.url}/agent/login/logincaptcha` }),
      WINDOW,
    );
    record('5 GET /agent/login/logincaptcha', s5, '≥ 0.9× render alone', s5.ratio >= 0.9);

    // 8. Raw ceiling: node:http returning the same JSON from memory.
    const body = await (
      await fetch(`${gateway.url}/agent/data/get`, { headers: { token: agentTokens.bench10 as string } })
    ).text();
    await fetch(`${floor.url}/raw/set`, { method: 'POST', body });
    const s8 = await interleave(
      raw('/raw', {}),
      rest('/agent/data/get', { token: agentTokens.bench10 as string }),
      WINDOW,
    );
    record(
      '8 raw ceiling (node:http, same JSON from memory)',
      s8,
      'reported',
      true,
      'gateway scenario 2 vs the ceiling',
    );

    // 6 and 7. Fan-out.
    await fanout(gateway, agentTokens.alice as string);
  } finally {
    for (const p of procs) await p.stop();
    await dropDatabase();
    pin('postgres', '0-1');
    pin('redis-server', '0-1');
  }
  writeReport();
}

// ---------------------------------------------------------------- fan-out
async function fanout(gateway: Proc, aliceToken: string) {
  const wsFloor = await startPinned('bench/ws-floor.ts', { ...serverEnv(), ...withProbe('ws-floor') });
  const second = await startPinned('src/main.ts', serverEnv());
  try {
    const publish = (base: string, t: number, n: number) =>
      fetch(`${base}${base === wsFloor.url ? '/publish' : '/internal/events'}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${INTERNAL_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          channel: 'global-demo',
          event: 'bench',
          data: { t, n, text: 'a message of ordinary length for a chat event' },
        }),
      }).then((r) => r.arrayBuffer());
    const init = { appkey: 'demo-appkey', token: aliceToken };

    /** 100-event bursts: deliveries per second until every subscriber has every event. */
    async function burst(publishTo: string, subs: { deliveries: number }[], count: number) {
      const expected = subs.reduce((n, s) => n + s.deliveries, 0) + 100 * count;
      const started = Date.now();
      for (let i = 0; i < 100; i++) await publish(publishTo, Date.now(), i);
      const deadline = started + 60_000;
      while (subs.reduce((n, s) => n + s.deliveries, 0) < expected && Date.now() < deadline) await sleep(5);
      const delivered = subs.reduce((n, s) => n + s.deliveries, 0) - (expected - 100 * count);
      if (delivered < 100 * count) notes.push(`fan-out burst: ${delivered} of ${100 * count} deliveries within 60 s`);
      return delivered / ((Date.now() - started) / 1000);
    }
    /** 1 event/s steady state: p99 delivery latency. */
    async function steady(publishTo: string, subs: { latencies: number[]; recordLatency: boolean }[], seconds: number) {
      for (const s of subs) {
        s.latencies = [];
        s.recordLatency = true;
      }
      for (let i = 0; i < seconds; i++) {
        await publish(publishTo, Date.now(), i);
        await sleep(1000);
      }
      await sleep(500);
      const all = subs.flatMap((s) => s.latencies).sort((a, b) => a - b);
      for (const s of subs) s.recordLatency = false;
      return { p50: all[Math.floor(all.length * 0.5)] ?? 0, p99: all[Math.floor(all.length * 0.99)] ?? 0 };
    }
    const ready = async (publishTo: string, subs: { deliveries: number }[], count: number) => {
      // Subscriptions are set up asynchronously: wait until a probe event reaches everyone.
      for (let attempt = 0; attempt < 50; attempt++) {
        const before = subs.reduce((n, s) => n + s.deliveries, 0);
        await publish(publishTo, Date.now(), -1);
        await sleep(300);
        if (subs.reduce((n, s) => n + s.deliveries, 0) - before >= count) return;
      }
      throw new Error('subscribers did not all receive the probe event');
    };

    const results: Record<
      string,
      {
        gw: number[];
        floor: number[];
        memPerSub: number;
        steadyGw: { p99: number; p50: number };
        steadyFloor: { p99: number };
      }
    > = {};
    for (const count of quick ? [100, 500] : [100, 2000]) {
      const rssBefore = gateway.rss();
      const heapBefore = await liveMemory(gateway, 'gateway');
      const gwSubs = await connectSubscribers({
        wsUrl: `${gateway.url.replace('http', 'ws')}/graphql`,
        count,
        graphql: { init, channel: 'global-demo' },
      });
      await ready(gateway.url, [gwSubs], count);
      await sleep(1000);
      const memPerSub = ((await liveMemory(gateway, 'gateway')) - heapBefore) / count;
      const rssPerSub = (gateway.rss() - rssBefore) / count;
      const floorHeapBefore = await liveMemory(wsFloor, 'ws-floor');
      const floorSubs = await connectSubscribers({ wsUrl: wsFloor.url.replace('http', 'ws'), count });
      await ready(wsFloor.url, [floorSubs], count);
      const floorMemPerSub = ((await liveMemory(wsFloor, 'ws-floor')) - floorHeapBefore) / count;
      const gw: number[] = [];
      const fl: number[] = [];
      for (let round = 0; round < 3; round++) {
        fl.push(await burst(wsFloor.url, [floorSubs], count));
        gw.push(await burst(gateway.url, [gwSubs], count));
      }
      const steadyGw = await steady(gateway.url, [gwSubs], quick ? 3 : 10);
      const steadyFloor = await steady(wsFloor.url, [floorSubs], quick ? 3 : 10);
      results[count] = { gw, floor: fl, memPerSub, steadyGw, steadyFloor };
      gwSubs.close();
      floorSubs.close();
      await sleep(1000);
      const ratio = median(gw.map((g, i) => g / (fl[i] as number)));
      const met = ratio >= 0.5 && steadyGw.p99 <= 50 && memPerSub <= 40_960;
      rows.push([
        `6 fan-out, ${count} subscribers, one instance`,
        `${fmt(median(gw))} deliveries/s`,
        `${fmt(median(fl))} deliveries/s (raw ws)`,
        `**${fmt(ratio, 2)}×**`,
        '≥ 0.5×; p99 ≤ 50 ms; ≤ 40 kB/idle sub',
        met ? 'met' : '**not met**',
        `steady p50/p99 ${steadyGw.p50} / ${steadyGw.p99} ms`,
        `steady p99 ${steadyFloor.p99} ms; ${fmt(floorMemPerSub / 1024, 1)} kB live heap per idle socket`,
        `${fmt(memPerSub / 1024, 1)} kB live heap per idle subscriber (RSS ${rssPerSub < 0 ? '' : '+'}${fmt(rssPerSub / 1024, 1)} kB)`,
      ]);
      log(
        `6 fan-out ${count}: ${fmt(median(gw))} vs ${fmt(median(fl))} deliveries/s → ${fmt(ratio, 2)}×, p99 ${steadyGw.p99} ms, ${fmt(memPerSub / 1024, 1)} kB/sub`,
      );
    }

    // 7. Two instances through Redis: half the subscribers on each, publish on the first.
    const count = quick ? 500 : 2000;
    const halves = await Promise.all(
      [gateway, second].map((p) =>
        connectSubscribers({
          wsUrl: `${p.url.replace('http', 'ws')}/graphql`,
          count: count / 2,
          graphql: { init, channel: 'global-demo' },
        }),
      ),
    );
    await ready(gateway.url, halves, count);
    const two: number[] = [];
    for (let round = 0; round < 3; round++) two.push(await burst(gateway.url, halves, count));
    const steadyTwo = await steady(gateway.url, halves, quick ? 3 : 10);
    for (const h of halves) h.close();
    const single = median(results[count]?.gw ?? [1]);
    const ratio7 = median(two) / single;
    rows.push([
      `7 fan-out, ${count} subscribers over two instances via Redis`,
      `${fmt(median(two))} deliveries/s`,
      `${fmt(single)} deliveries/s (scenario 6, one instance)`,
      `**${fmt(ratio7, 2)}×**`,
      '≥ 0.8× single; p99 ≤ 100 ms',
      ratio7 >= 0.8 && steadyTwo.p99 <= 100 ? 'met' : '**not met**',
      `steady p50/p99 ${steadyTwo.p50} / ${steadyTwo.p99} ms`,
      '',
      'both instances pinned to the server core',
    ]);
    log(`7 two instances: ${fmt(median(two))} deliveries/s → ${fmt(ratio7, 2)}× single, p99 ${steadyTwo.p99} ms`);
  } finally {
    await wsFloor.stop();
    await second.stop();
  }
}

// ---------------------------------------------------------------- report
function writeReport() {
  const version = (cmd: string, args: string[]) => {
    try {
      return execFileSync(cmd, args, { encoding: 'utf8' }).trim().split('\n')[0];
    } catch {
      return 'unknown';
    }
  };
  const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
  const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
  const v = (name: string) => lock.packages?.[`node_modules/${name}`]?.version ?? pkg.dependencies?.[name] ?? '?';
  const table = [
    '| scenario | gateway | floor (same run) | ratio (median of 3 interleaved rounds) | target | | gateway p50 / p99 | floor p50 / p99 | gateway / floor ELU and RSS; notes |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
  const report = `# Benchmarks

Produced by \`${['npm run bench', ...process.argv.slice(2)].join(' -- ')}\` on ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC.
Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${mib(totalmem())} RAM; Node ${process.version};
${version('psql', ['--version'])}; ${version('redis-server', ['--version'])};
graphql-yoga ${v('graphql-yoga')}, graphql-ws ${v('graphql-ws')}, ws ${v('ws')}, postgres ${v('postgres')}, ioredis ${v('ioredis')}.

Method: every server (gateway and floor) pinned to core ${SERVER_CORE}; the load generator (autocannon, 50
connections, no pipelining), PostgreSQL and Redis pinned to core ${LOAD_CORE}. Real PostgreSQL and Redis.
Each scenario is first checked for correctness (the gateway and the floor return the same data; any error
or non-2xx fails the run), then measured as warm-up + ${WINDOW.rounds} interleaved rounds (floor, gateway,
floor, gateway, …) of ${WINDOW.seconds} s; the ratio is the median of the per-round ratios. ELU is the
server's event-loop utilisation during the window. The floors (bench/floors.ts, bench/ws-floor.ts) do the
same work with nothing in between: a raw node:http handler with the same token check, Redis session read,
prepared postgres.js reads and publication; argon2id verify alone; svg-captcha + sharp alone; a raw ws
server sending one pre-serialized frame to every socket.

${table}

${notes.length ? `Notes:\n${notes.map((n) => `- ${n}`).join('\n')}\n` : ''}`;
  const path = quick ? 'BENCHMARKS.quick.md' : 'BENCHMARKS.md';
  const existing = (() => {
    try {
      return readFileSync('BENCHMARKS.md', 'utf8');
    } catch {
      return '';
    }
  })();
  // Analysis written by hand below the generated part is kept.
  const marker = '<!-- analysis -->';
  const analysis = existing.includes(marker) ? existing.slice(existing.indexOf(marker)) : `${marker}\n`;
  writeFileSync(path, quick ? report : `${report}\n${analysis}`);
  console.log(`\n${table}\n\nwritten to ${path}`);
}

main().catch(async (error) => {
  console.error(error);
  await dropDatabase();
  process.exit(1);
});
