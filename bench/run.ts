import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import postgres from 'postgres';
import { buildDeps } from '../src/compose.js';
import { loadConfig } from '../src/config.js';
import { seedDemoData } from '../src/db/seed.js';
import { createLogger } from '../src/log.js';
import { setMerchantSetting } from '../src/resolvers/admin.js';
import { issueVisitorToken } from '../src/resolvers/visitor.js';
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
import { messagePath } from './message-path.js';
import { reconnectStorm } from './reconnect-storm.js';

/**
 * `npm run bench`: every hot path of the gateway measured against a floor doing the same work in
 * the same run (see BENCHMARKS.md). Needs PostgreSQL and Redis (DATABASE_URL / REDIS_URL,
 * defaulting to 127.0.0.1); creates and drops its own database and Redis key prefix.
 * `--quick` shortens every window and the sizes (a smoke run, not for the record);
 * `--only=<groups>` runs some groups of rows (comma-separated: bootstrap, login, captcha, ceiling,
 * graphql (rows 3, 3t), http (rows 1r, 8h), fanout, embedded, config-change, idle, message (rows 9, 9h, 9x),
 * message9 (row 9 alone), storm, webhook). Either writes BENCHMARKS.quick.md instead of
 * BENCHMARKS.md. Sizes: BENCH_IDLE_COUNTS (default 2000,10000; quick 200,1000) and
 * BENCH_CONVERSATIONS (default 200; quick 20).
 */

const quick = process.argv.includes('--quick');
const onlyArg = process.argv.find((a) => a.startsWith('--only='));
const only = onlyArg ? new Set(onlyArg.slice('--only='.length).split(',')) : undefined;
/** Whether a group of rows runs in this invocation. */
const runs = (group: string) => !only || only.has(group);
const IDLE_COUNTS = (process.env.BENCH_IDLE_COUNTS ?? (quick ? '200,1000' : '2000,10000')).split(',').map(Number);
const CONVERSATIONS = Number(process.env.BENCH_CONVERSATIONS ?? (quick ? 20 : 200));
const MESSAGE_AGENTS = 4;
/**
 * Accounts the login row logs in to in turn (`login1`…, alice's password hash): with the row's
 * 10 connections each account has at most one login in flight. The brute-force limits count an
 * attempt before the password is compared (5 per account, 30 per address, 30 wrong captchas per
 * address), so 50 parallel logins of one account from one address are refused by design.
 */
const LOGIN_ACCOUNTS = 200;
const WINDOW = { rounds: 3, seconds: quick ? 2 : 5, warmup: quick ? 1 : 5 };
const ADMIN_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const INTERNAL_TOKEN = 'bench-internal-token-0123456789';
// Four characters, as the captchas people are shown (the image size follows the text).
const CAPTCHA = 'bxmr';
const stamp = Date.now().toString(36);
/**
 * The gateway as production runs it (docs/operations.md "Production (deploy)"): `npm run build`, then
 * `node dist/main.js`. `BENCH_GATEWAY=<path>/dist/main.js`: another build instead (e.g. the code
 * before a change, built in a worktree of its own), run as it is, to compare builds with one bench.
 */
const GATEWAY = process.env.BENCH_GATEWAY ?? 'dist/main.js';
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
  // The bench's conversations are dated 2023: with the demo merchant's idle close (30 min) the
  // chat service's sweep would close them all 30 s into the run, and rows 2 and 3 would then
  // measure an empty workbench (and the sweep's own work). They stay open for the whole run.
  await sql`update merchants set idle_close_minutes = 0 where id = 'm_demo'`;
  const aliceHash = (await sql`select password_hash from agents where username = 'alice'`)[0]?.password_hash;
  for (const n of [10, 1000]) {
    const id = `a_bench${n}`;
    await sql`insert into agents (id, merchant_id, group_id, username, password_hash, nickname, level)
              values (${id}, 'm_demo', 'g_demo_default', ${`bench${n}`}, ${aliceHash}, ${`Bench ${n}`}, 'agent')`;
    await sql`insert into visitors (id, merchant_id, nickname, lang, channel)
              select ${`v_b${n}_`} || g, 'm_demo', 'Visitor ' || g, 'en', ${`visitor-b${n}-`} || g from generate_series(1, ${n}) g`;
    await sql`insert into conversations (id, merchant_id, agent_id, visitor_id, state, timestamp, pinned_at, items)
              select ${`c_b${n}_`} || g, 'm_demo', ${id}, ${`v_b${n}_`} || g, 'active', 1700000000 + g, case when g % 10 = 0 then 1700000000 + g else 0 end,
                     '[{"type":"text","content":"hello there","from":"visitor"}]'::jsonb
              from generate_series(1, ${n}) g`;
  }
  await sql`insert into agents (id, merchant_id, group_id, username, password_hash, nickname, level)
            select 'a_login' || g, 'm_demo', 'g_demo_default', 'login' || g, ${aliceHash}, 'Login ' || g, 'agent'
            from generate_series(1, ${LOGIN_ACCOUNTS}) g`;
  // Agents of the message path (issue 12): each takes a share of the active conversations.
  for (let i = 1; i <= MESSAGE_AGENTS; i++) {
    await sql`insert into agents (id, merchant_id, group_id, username, password_hash, nickname, level)
              values (${`a_msg${i}`}, 'm_demo', 'g_demo_default', ${`msg${i}`}, ${aliceHash}, ${`Msg ${i}`}, 'agent')`;
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
  // Row 11 (reconnect storm) resumes 10,000 subscribers with since at once from one address,
  // far above the replay budget of an address (2,000 a minute by default): raised with the caps.
  WS_HISTORY_REPLAYS_PER_MINUTE: '10000000',
  WS_HISTORY_REPLAYS_PER_ADDRESS_PER_MINUTE: '10000000',
  // The message path keeps 200 senders and the agents' sockets open from one address.
  MAX_CONNECTIONS_PER_ADDRESS: '0',
  // Row 9 sends back to back from every conversation of one merchant, far above the chat budgets
  // (docs/security.md, "chat floods"): raised here; the flood row runs with the defaults.
  CHAT_MESSAGE_BURST: '1000000',
  CHAT_MESSAGES_PER_HOUR: '10000000',
  CHAT_MERCHANT_MESSAGES_PER_MINUTE: '10000000',
  // Row 9's conversations are all one merchant's: its sends in flight per instance (a fairness
  // cap between merchants, 4 by default) would measure the cap, not the path.
  CHAT_MERCHANT_SENDS_IN_FLIGHT: '1000',
  // The bootstrap and workbench rows read as one visitor thousands of times a second, far above
  // a visitor's read budget (600 a minute by default).
  CHAT_VISITOR_READS_PER_MINUTE: '10000000',
  // and far above a merchant's visitors' reads together (6,000 a minute by default).
  CHAT_MERCHANT_VISITOR_READS_PER_MINUTE: '100000000',
  // A saturated instance refuses a merchant over an equal share of the sends first: the bench
  // saturates it on purpose (the flood row measures that rule with the defaults).
  CHAT_FAIR_SHARE_LOOP_DELAY_MS: '60000',
  // Thousands of upgrades at once on one pinned core wait longer than a browser's would for
  // their headers to be read: the defaults would answer the last ones 408.
  HTTP_HEADERS_TIMEOUT_MS: '120000',
  HTTP_REQUEST_TIMEOUT_MS: '300000',
  // Row 10 registers a webhook endpoint on the bench's own (loopback) hanging receiver.
  WEBHOOK_ALLOW_PRIVATE: 'on',
  ...extra,
});
const probeFile = (name: string, kind: 'elu' | 'heap') => `/tmp/parley-${kind}-${stamp}-${name}.json`;
const withProbe = (name: string) => ({
  BENCH_ELU_FILE: probeFile(name, 'elu'),
  BENCH_HEAP_FILE: probeFile(name, 'heap'),
  NODE_OPTIONS: '--expose-gc --import ./bench/elu-probe.mjs',
  // BENCH_CPU_PROF=<dir>: each probed server writes V8 CPU profiles to <dir>/<name> when it stops,
  // one per thread (tsx's module hooks run on a thread of their own; the largest file is the main thread).
  ...(process.env.BENCH_CPU_PROF
    ? { BENCH_NODE_ARGS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_CPU_PROF}/${name}` }
    : {}),
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

/**
 * What a 2xx answer must look like to count as the work measured: the legacy envelope answers a
 * refusal with HTTP 200 and a non-zero `code`, and GraphQL with `errors`; such answers fail the window.
 */
function answeredInFull(url: string): (body: string) => boolean {
  const path = new URL(url).pathname;
  if (path === '/graphql') return (body) => body.startsWith('{"data":') && !body.includes('"errors":');
  if (path === '/healthz') return (body) => body === '{"status":"ok"}';
  // The same bytes from memory, and images (a captcha): any 2xx is the answer.
  if (path === '/raw' || path === '/captcha' || path === '/agent/login/logincaptcha') return () => true;
  return (body) => body.startsWith('{"code":0,');
}

/**
 * A bench agent's workbench (`bench10`, `bench1000`), over REST or GraphQL, answered in full and
 * listing every one of its `n` conversations: an answer that lost them (closed under the run, as
 * the idle-close sweep once did) is not the work measured.
 */
function listsConversations(url: string, n: number): (body: string) => boolean {
  const answered = answeredInFull(url);
  const key = `"visitorv_b${n}_`; // each conversation's legacy key, `visitor<uid>`
  return (body) => answered(body) && body.split(key).length - 1 === n;
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
    [
      `ELU ${fmt(b.cpu, 2)} / ${fmt(a.cpu, 2)}, RSS ${mib(b.rss)} / ${mib(a.rss)}`,
      b.cpuPerRequest && a.cpuPerRequest
        ? `CPU per request ${fmt(b.cpuPerRequest)} / ${fmt(a.cpuPerRequest)} µs (${fmt(a.cpuPerRequest / b.cpuPerRequest, 2)}×)`
        : '',
      extra,
    ]
      .filter(Boolean)
      .join('; '),
  ]);
  const perRequest =
    b.cpuPerRequest && a.cpuPerRequest
      ? `; CPU/request ${fmt(b.cpuPerRequest)} vs ${fmt(a.cpuPerRequest)} µs → ${fmt(a.cpuPerRequest / b.cpuPerRequest, 2)}×`
      : '';
  log(
    `${name}: ${fmt(b.rps)} vs ${fmt(a.rps)} req/s → ${fmt(c.ratio, 2)}× (${met ? 'met' : 'NOT met'})${perRequest} ${extra}`,
  );
}

// ---------------------------------------------------------------- main
async function main() {
  execFileSync('taskset', ['-cp', LOAD_CORE, String(process.pid)], { stdio: 'ignore' });
  pin('postgres', LOAD_CORE);
  pin('redis-server', LOAD_CORE);
  if (process.env.BENCH_GATEWAY) log(`the gateway: ${GATEWAY} (not rebuilt)`);
  else {
    log('building the gateway (npm run build)');
    execFileSync('npm', ['run', 'build'], { stdio: 'ignore' });
  }
  log(`preparing database ${dbName}`);
  await prepareDatabase();

  const gateway = await startPinned(GATEWAY, { ...serverEnv(), ...withProbe('gateway') });
  const floor = await startPinned('bench/floors.ts', { ...serverEnv(), ...withProbe('floor') });
  const procs: Proc[] = [gateway, floor];
  try {
    const probed = new Map<Proc, string>([
      [gateway, 'gateway'],
      [floor, 'floor'],
    ]);
    const eluFile = (p: Proc) => probeFile(probed.get(p) ?? 'unprobed', 'elu');
    const measured =
      (proc: Proc, spec: Omit<Parameters<typeof load>[0], 'seconds' | 'pid'>) => async (seconds: number) => {
        const before = eluOf(eluFile(proc));
        const result = await load({
          ...spec,
          check: spec.check ?? answeredInFull(spec.url),
          seconds,
          pid: proc.child.pid,
        });
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

    // Correctness first: the gateway and the floor give the same data (for the rows that compare them).
    for (const [path, headers] of !runs('bootstrap') && !runs('ceiling') && !runs('graphql') && !runs('http')
      ? []
      : ([
          ['/visitor/data/get', visitorAuth],
          ['/agent/data/get', { token: agentTokens.bench10 as string }],
        ] as const)) {
      const g = await json(await fetch(gateway.url + path, { headers }));
      const f = await json(await fetch(floor.url + path, { headers }));
      if (g.code !== 0 || !isDeepStrictEqual(strip(g.data), strip(f.data))) {
        throw new Error(`${path}: gateway and floor disagree:\n${JSON.stringify(g)}\n${JSON.stringify(f)}`);
      }
    }
    log('correctness: gateway and floor return the same bootstrap data');

    const rest = (path: string, headers: Record<string, string>, check?: (body: string) => boolean) =>
      measured(gateway, { url: gateway.url + path, headers, check });
    const raw = (path: string, headers: Record<string, string>) => measured(floor, { url: floor.url + path, headers });
    const gql = (query: string, headers: Record<string, string>, check?: (body: string) => boolean) =>
      measured(gateway, {
        url: `${gateway.url}/graphql`,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ query }),
        check,
      });
    const bench10 = { token: agentTokens.bench10 as string };
    const listsTen = (url: string) => listsConversations(url, 10);

    const VISITOR_QUERY =
      '{ visitorBootstrap { visitor { nickname avatar uid lang channel attributes { key label type value editable } } setting { appname appkey wsAddress uploadLimits { imageMaxBytes fileMaxBytes videoMaxBytes voiceMaxBytes } voice sound uploadFile uploadImg emoji sessionInviteRating sessionInviteResolved verified paid } } }';
    const WORKBENCH_QUERY =
      '{ agentWorkbench { chatting { key id name type timestamp pinnedAt unreadCount bot accountState historyOnlyMine items } agent { agentId nickname avatar level state } agentGroups { id name isDefault } setting { bid appname appkey wsAddress extra } visitorAttributeConfig { attributes { key label type editable } } extensions { nav chatActions sideIframes flags accountLevelOptions } } }';
    if (runs('bootstrap')) {
      // 1. Visitor bootstrap.
      const s1 = await interleave(
        raw('/visitor/data/get', visitorAuth),
        rest('/visitor/data/get', visitorAuth),
        WINDOW,
      );
      record('1 GET /visitor/data/get', s1, '≥ 0.6× (stretch 0.85×)', s1.ratio >= 0.6);

      // 2. Agent workbench, at 10 and 1,000 conversations.
      const agentRest: Record<string, Comparison> = {};
      for (const n of [10, 1000]) {
        const who = `bench${n}`;
        const headers = { token: agentTokens[who] as string };
        // 1,000 conversations make a ~300 kB answer: fewer connections keep latency inside the window.
        const connections = n === 1000 ? 10 : 50;
        const side = (proc: Proc) => {
          const url = `${proc.url}/agent/data/get`;
          return measured(proc, { url, headers, connections, check: listsConversations(url, n) });
        };
        const c = await interleave(side(floor), side(gateway), WINDOW);
        agentRest[who] = c;
        record(`2 GET /agent/data/get (${who.slice(5)} conversations)`, c, '≥ 0.6×', c.ratio >= 0.6);
      }
    }
    if (runs('bootstrap') || runs('graphql')) {
      // 3. GraphQL over the same data, against the REST rate.
      const s3v = await interleave(rest('/visitor/data/get', visitorAuth), gql(VISITOR_QUERY, visitorAuth), WINDOW);
      record('3 GraphQL visitorBootstrap', s3v, '≥ 0.8× REST', s3v.ratio >= 0.8);
      // The fixed cost of any GraphQL request over HTTP (yoga's Fetch API layer, envelop, a POST
      // body), measured with the cheapest operation there is, against the same REST bootstrap.
      const s3t = await interleave(rest('/visitor/data/get', visitorAuth), gql('{ __typename }', visitorAuth), WINDOW);
      record('3t GraphQL { __typename } (no resolver, no store) vs REST visitor bootstrap', s3t, 'reported', true);
      const s3a = await interleave(
        rest('/agent/data/get', bench10, listsTen(`${gateway.url}/agent/data/get`)),
        gql(WORKBENCH_QUERY, bench10, listsTen(`${gateway.url}/graphql`)),
        WINDOW,
      );
      record('3 GraphQL agentWorkbench (10)', s3a, '≥ 0.8× REST', s3a.ratio >= 0.8);
    }

    if (runs('login')) {
      // 4. Login, on a gateway behind a trusted proxy (TRUST_PROXY=on): each request comes from
      // its own client address (X-Forwarded-For), logs in to the next of LOGIN_ACCOUNTS accounts
      // and consumes a captcha fetched beforehand in its own Session. Every answer must be a
      // login (code 0): the limits run their usual path (counted, then given back or reset).
      const front = await startPinned(GATEWAY, {
        ...serverEnv({ TRUST_PROXY: 'on' }),
        ...withProbe('login-gateway'),
      });
      probed.set(front, 'login-gateway');
      try {
        let address = 0;
        const nextAddress = () => {
          address++;
          return `10.${(address >> 16) & 255}.${(address >> 8) & 255}.${address & 255}`;
        };
        // 100 logins/s is several times what argon2id verifies on one core (the note below says if not).
        const loginBudget = Math.ceil(100 * (WINDOW.seconds * WINDOW.rounds + WINDOW.warmup));
        // Drawn by the other gateway (the Sessions are in the shared store): a profile of this one shows logins only.
        const cookies = await captchaSessions(gateway.url, loginBudget);
        let next = 0;
        // 10 connections keep the one core busy with argon2id (4 threads) and latency well inside
        // a window; at 50 a login waited ~2-4 s and a 5 s window counted mostly its edges.
        const connections = 10;
        const s4 = await interleave(
          measured(floor, {
            url: `${floor.url}/login`,
            method: 'POST',
            connections,
            check: (body) => body.startsWith('{"code":0,'),
          }),
          measured(front, {
            url: `${front.url}/agent/login/check`,
            method: 'POST',
            connections,
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            check: (body) => body.startsWith('{"code":0,'),
            setupRequest: (req) => {
              const n = next++;
              const cookie = cookies[n % cookies.length] as string;
              const username = `login${(n % LOGIN_ACCOUNTS) + 1}`;
              return {
                ...req,
                headers: { ...(req.headers as Record<string, string>), cookie, 'x-forwarded-for': nextAddress() },
                body: `username=${username}&password=alice-password&captcha=${CAPTCHA}`,
              };
            },
          }),
          WINDOW,
        );
        if (next > cookies.length)
          notes.push(`login: ${next} logins used ${cookies.length} captchas; later ones failed the captcha`);
        record('4 POST /agent/login/check', s4, '≥ 0.9× argon2 verify alone', s4.ratio >= 0.9);
        // A wrong captcha is refused before any hashing: faster than a bootstrap. Each from its own
        // address, as 30 wrong captchas from one address lock it (429) for 15 minutes.
        const wrong = await interleave(
          measured(front, {
            url: `${front.url}/agent/data/get`,
            headers: bench10,
            check: listsTen(`${front.url}/agent/data/get`),
          }),
          measured(front, {
            url: `${front.url}/agent/login/check`,
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: 'username=alice&password=x&captcha=wrong',
            check: (body) => body.startsWith('{"code":1001,'),
            setupRequest: (req) => ({
              ...req,
              headers: { ...(req.headers as Record<string, string>), 'x-forwarded-for': nextAddress() },
            }),
          }),
          WINDOW,
        );
        record('4b wrong captcha refused (vs scenario 2)', wrong, '≥ 1× scenario 2', wrong.ratio >= 1);
      } finally {
        await front.stop();
      }
    }

    if (runs('captcha')) {
      // 5. Captcha image.
      const s5 = await interleave(
        measured(floor, { url: `${floor.url}/captcha` }),
        measured(gateway, { url: `${gateway.url}/agent/login/logincaptcha` }),
        WINDOW,
      );
      record('5 GET /agent/login/logincaptcha', s5, '≥ 0.9× render alone', s5.ratio >= 0.9);
    }

    if (runs('ceiling')) {
      // 8. Raw ceiling: node:http returning the same JSON from memory.
      const body = await (
        await fetch(`${gateway.url}/agent/data/get`, { headers: { token: agentTokens.bench10 as string } })
      ).text();
      await fetch(`${floor.url}/raw/set`, { method: 'POST', body });
      const s8 = await interleave(
        raw('/raw', {}),
        rest('/agent/data/get', bench10, listsTen(`${gateway.url}/agent/data/get`)),
        WINDOW,
      );
      record(
        '8 raw ceiling (node:http, same JSON from memory)',
        s8,
        'reported',
        true,
        'gateway scenario 2 vs the ceiling',
      );
    }

    // Issue 15 and 12 rows: the bench process's own deps (same database and Redis) stand in for
    // the operator's CLI and the visitors' token issuer.
    const benchDeps = await buildDeps(benchConfig(), createLogger('warn'));
    try {
      if (runs('ceiling') || runs('bootstrap') || runs('http'))
        await visitorCeiling(gateway, floor, visitorAuth, measured);
      if (runs('config-change')) await configChange(gateway, visitorAuth, measured, benchDeps);
      if (runs('embedded')) await embeddedBootstrap(floor, measured);
      // 6 and 7: fan-out; then idle memory and the chat's message path, which rides the same delivery.
      if (runs('fanout')) await fanout(gateway, agentTokens.alice as string);
      if (runs('idle')) await idleSubscribers(gateway, agentTokens.alice as string);
      if (runs('message') || runs('message9'))
        await messagePath({
          rowNineOnly: !runs('message'),
          gateway,
          floor,
          deps: benchDeps,
          dbUrl,
          conversations: CONVERSATIONS,
          agents: MESSAGE_AGENTS,
          quick,
          window: WINDOW,
          startGateway: (name) => startPinned(GATEWAY, { ...serverEnv(), ...withProbe(name) }),
          login,
          row: (cells) => rows.push(cells),
          note: (text) => notes.push(text),
          log,
        });
      if (runs('storm'))
        await reconnectStorm({
          gateway,
          deps: benchDeps,
          dbUrl,
          quick,
          row: (cells) => rows.push(cells),
          log,
          heap: () => liveMemory(gateway, 'gateway'),
        });
      if (runs('webhook')) await webhookSendLatency(gateway, benchDeps);
    } finally {
      await benchDeps.close();
    }
  } finally {
    for (const p of procs) await p.stop();
    await dropDatabase();
    pin('postgres', '0-1');
    pin('redis-server', '0-1');
  }
  writeReport();
}

// ---------------------------------------------------------------- issue 15 and issue 12 rows
type Measured = (
  proc: Proc,
  spec: Omit<Parameters<typeof load>[0], 'seconds' | 'pid'>,
) => (seconds: number) => Promise<LoadResult>;

function benchConfig() {
  return loadConfig({ NODE_ENV: 'test', DATABASE_URL: dbUrl, REDIS_URL, REDIS_PREFIX, LOG_LEVEL: 'warn' });
}

/** Row 1r: the REST visitor bootstrap against raw node:http answering the very same bytes (issue 15: ≥ 0.25×). */
async function visitorCeiling(gateway: Proc, floor: Proc, auth: Record<string, string>, measured: Measured) {
  const body = await (await fetch(`${gateway.url}/visitor/data/get`, { headers: auth })).text();
  await fetch(`${floor.url}/raw/set`, { method: 'POST', body });
  const c = await interleave(
    measured(floor, { url: `${floor.url}/raw` }),
    measured(gateway, { url: `${gateway.url}/visitor/data/get`, headers: auth }),
    WINDOW,
  );
  record('1r GET /visitor/data/get vs raw node:http (same bytes)', c, '≥ 0.25×', c.ratio >= 0.25);

  // The gateway's HTTP stack alone (express and the middleware every request passes: request id,
  // metrics, security headers, deadline, cross-site and body checks, the route table) with no
  // identity and no store: the most any endpoint of it can reach against the same raw server.
  const health = await (await fetch(`${gateway.url}/healthz`)).text();
  await fetch(`${floor.url}/raw/set`, { method: 'POST', body: health });
  const h = await interleave(
    measured(floor, { url: `${floor.url}/raw` }),
    measured(gateway, { url: `${gateway.url}/healthz` }),
    WINDOW,
  );
  record('8h GET /healthz (the HTTP stack alone, no store) vs raw node:http (same bytes)', h, '≥ 0.3×', h.ratio >= 0.3);
}

/**
 * Row 1c: the visitor bootstrap while the merchant's configuration changes 10 times a second
 * (the admin function the CLI runs, from another process: each change reaches the gateway as a
 * bus event and empties its cached copy), against the same bootstrap with no change.
 */
async function configChange(
  gateway: Proc,
  auth: Record<string, string>,
  measured: Measured,
  deps: Awaited<ReturnType<typeof buildDeps>>,
) {
  const bootstrap = measured(gateway, { url: `${gateway.url}/visitor/data/get`, headers: auth });
  let changes = 0;
  const whileChanging = async (seconds: number) => {
    let running = true;
    const changer = (async () => {
      while (running) {
        await setMerchantSetting(deps, { bid: 'demo', key: 'voice', value: 'on' });
        changes++;
        await sleep(100);
      }
    })();
    try {
      return await bootstrap(seconds);
    } finally {
      running = false;
      await changer;
    }
  };
  // Correctness first: a change is answered by the gateway's next bootstraps.
  await setMerchantSetting(deps, { bid: 'demo', key: 'appname', value: 'Demo Shop (bench)' });
  const deadline = Date.now() + 5000;
  for (;;) {
    const data = (await json(await fetch(`${gateway.url}/visitor/data/get`, { headers: auth }))).data as {
      setting: { appname: string };
    };
    if (data.setting.appname === 'Demo Shop (bench)') break;
    if (Date.now() > deadline) throw new Error('config change: the gateway did not answer the new appname within 5 s');
    await sleep(20);
  }
  await setMerchantSetting(deps, { bid: 'demo', key: 'appname', value: 'Demo Shop' });
  const c = await interleave(bootstrap, whileChanging, WINDOW);
  record(
    '1c GET /visitor/data/get while the configuration changes 10×/s (vs no change)',
    c,
    '≥ 0.9× no change',
    c.ratio >= 0.9,
    `${changes} changes announced`,
  );
}

/**
 * Row 1e: the embedded default (PGlite in the gateway process, in-process stores, no Redis), as
 * `npm start` runs without configuration, against raw node:http answering the same bytes.
 */
async function embeddedBootstrap(floor: Proc, measured: Measured) {
  const dir = mkdtempSync(join(tmpdir(), 'parley-bench-pglite-'));
  const embedded = await startPinned(GATEWAY, {
    ...serverEnv(),
    DATABASE_URL: '',
    REDIS_URL: '',
    PGLITE_DIR: dir,
    DEMO_SEED: 'on',
  });
  try {
    const issued = await json(
      await fetch(`${embedded.url}/visitor/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ appkey: 'demo-appkey' }),
      }),
    );
    const auth = { authorization: `Bearer ${(issued.data as { token: string }).token}` };
    const first = await fetch(`${embedded.url}/visitor/data/get`, { headers: auth });
    const body = await first.text();
    if ((JSON.parse(body) as { code: number }).code !== 0) throw new Error(`embedded bootstrap failed: ${body}`);
    await fetch(`${floor.url}/raw/set`, { method: 'POST', body });
    const c = await interleave(
      measured(floor, { url: `${floor.url}/raw` }),
      measured(embedded, { url: `${embedded.url}/visitor/data/get`, headers: auth }),
      WINDOW,
    );
    record(
      '1e GET /visitor/data/get, embedded default (PGlite, no Redis) vs raw node:http',
      c,
      '≥ 0.06×',
      c.ratio >= 0.06,
    );
  } finally {
    await embedded.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Row 6i: live memory per idle agent subscriber at each of IDLE_COUNTS (2,000 then 10,000):
 * flat when the per-subscriber figure at the largest count is within 15 % of the smallest.
 */
async function idleSubscribers(gateway: Proc, aliceToken: string) {
  const init = { appkey: 'demo-appkey', token: aliceToken };
  const wsUrl = `${gateway.url.replace('http', 'ws')}/graphql`;
  const heapBefore = await liveMemory(gateway, 'gateway');
  const rssBefore = gateway.rss();
  const open: { close(): void }[] = [];
  const perSub: number[] = [];
  const rssPerSub: number[] = [];
  let connected = 0;
  try {
    for (const count of IDLE_COUNTS) {
      const subs = await connectSubscribers({
        wsUrl,
        count: count - connected,
        graphql: { init, channel: 'global-demo' },
      });
      open.push(subs);
      connected = count;
      await sleep(1000);
      perSub.push(((await liveMemory(gateway, 'gateway')) - heapBefore) / count);
      rssPerSub.push((gateway.rss() - rssBefore) / count);
      log(`6i idle ${count}: ${fmt((perSub.at(-1) as number) / 1024, 1)} kB live heap per subscriber`);
    }
  } finally {
    for (const s of open) s.close();
    await sleep(1000);
  }
  const growth = (perSub.at(-1) as number) / (perSub[0] as number);
  rows.push([
    `6i idle subscribers, ${IDLE_COUNTS.map((n) => fmt(n)).join(' → ')}, one instance`,
    IDLE_COUNTS.map((n, i) => `${fmt(n)}: ${fmt((perSub[i] as number) / 1024, 1)} kB`).join('; '),
    '',
    `**${fmt(growth, 2)}×** (largest / smallest)`,
    '≤ 20 kB/idle sub at every count; flat (≤ 1.15×)',
    growth <= 1.15 && perSub.every((m) => m <= 20_480) ? 'met' : '**not met**',
    '',
    '',
    `live heap per idle agent subscriber; RSS per subscriber ${rssPerSub.map((r) => `${fmt(r / 1024, 1)} kB`).join(' / ')}`,
  ]);
}

/**
 * Row 10: a hanging webhook receiver does not slow sends (issue 30). WEBHOOK_SENDERS visitors of
 * the demo merchant send one message at a time in turn; the latency of POST /visitor/message/send
 * is measured in alternating rounds without any webhook endpoint and with one endpoint for
 * `message.created` on a receiver that accepts connections and never answers (each attempt
 * waits the full WEBHOOK_TIMEOUT_MS, and deliveries pile up in the table).
 */
async function webhookSendLatency(gateway: Proc, deps: Awaited<ReturnType<typeof buildDeps>>) {
  const { createServer } = await import('node:http');
  let attempts = 0;
  const hanging = createServer(() => {
    attempts++; // never answered
  });
  await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
  const port = (hanging.address() as { port: number }).port;
  const senders: string[] = [];
  for (let i = 0; i < (quick ? 10 : 40); i++)
    senders.push((await issueVisitorToken(deps, { appkey: 'demo-appkey' }, `10.78.0.${i}`)).token);
  const sql = postgres(dbUrl, { max: 1, onnotice: () => {} });
  let n = 0;
  const sendOnce = async (token: string) => {
    const started = performance.now();
    const res = await fetch(`${gateway.url}/visitor/message/send`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ client_msg_id: `wh-${n++}`, content: 'hello' }),
    });
    const body = (await res.json()) as { code: number };
    if (body.code !== 0) throw new Error(`webhook row: send answered ${JSON.stringify(body)}`);
    return performance.now() - started;
  };
  const round = async (withEndpoint: boolean, count: number) => {
    await sql`delete from webhook_deliveries`;
    await sql`delete from webhook_endpoints`;
    if (withEndpoint)
      await sql`insert into webhook_endpoints (id, merchant_id, url, events, secret)
                values ('whep_bench', 'm_demo', ${`http://127.0.0.1:${port}/hook`}, ${sql.json(['message.created'])},
                        'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')`;
    const latencies: number[] = [];
    for (let i = 0; i < count; i++) latencies.push(await sendOnce(senders[i % senders.length] as string));
    return latencies;
  };
  const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * p)] ?? 0;
  const count = quick ? 200 : 1000;
  await round(false, 50); // warm-up
  const none: number[] = [];
  const hung: number[] = [];
  for (let r = 0; r < WINDOW.rounds; r++) {
    none.push(...(await round(false, count)));
    hung.push(...(await round(true, count)));
  }
  const [pending] = await sql`select count(*)::int as n from webhook_deliveries where state = 'pending'`;
  await sql`delete from webhook_deliveries`;
  await sql`delete from webhook_endpoints`;
  await sql.end();
  hanging.closeAllConnections();
  hanging.close();
  const p99 = { none: percentile(none, 0.99), hung: percentile(hung, 0.99) };
  const ratio = p99.hung / p99.none;
  const met = ratio <= 1.2 || p99.hung - p99.none <= 2;
  rows.push([
    `10 message send with a hanging webhook receiver (${senders.length} visitors, one send at a time)`,
    `p99 ${fmt(p99.hung, 1)} ms`,
    `p99 ${fmt(p99.none, 1)} ms (no endpoint)`,
    `**${fmt(ratio, 2)}×**`,
    'p99 ≤ 1.2× (or +2 ms) of no endpoint',
    met ? 'met' : '**not met**',
    `p50/p99 ${fmt(percentile(hung, 0.5), 1)} / ${fmt(p99.hung, 1)} ms`,
    `p50/p99 ${fmt(percentile(none, 0.5), 1)} / ${fmt(p99.none, 1)} ms`,
    `${attempts} attempts hung on the receiver; ${pending?.n ?? 0} deliveries pending at the end`,
  ]);
  log(`10 send with a hanging webhook receiver: p99 ${fmt(p99.hung, 1)} vs ${fmt(p99.none, 1)} ms → ${fmt(ratio, 2)}×`);
}

// ---------------------------------------------------------------- fan-out
async function fanout(gateway: Proc, aliceToken: string) {
  const wsFloor = await startPinned('bench/ws-floor.ts', { ...serverEnv(), ...withProbe('ws-floor') });
  const second = await startPinned(GATEWAY, serverEnv());
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

    /** 100-event bursts (numbered from `first`): deliveries per second until every subscriber has every event. */
    async function burst(publishTo: string, subs: { deliveries: number }[], count: number, first = 0) {
      const expected = subs.reduce((n, s) => n + s.deliveries, 0) + 100 * count;
      const started = Date.now();
      for (let i = 0; i < 100; i++) await publish(publishTo, Date.now(), first + i);
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
      // Issue 15's targets are set at 2,000 subscribers; the small row keeps the earlier ones (at 100
      // the instance's own services outweigh the subscribers, so its memory figure is only reported).
      const target =
        count >= 2000
          ? { ratio: 0.7, p99: 40, kB: 20, text: '≥ 0.7×; p99 ≤ 40 ms; ≤ 20 kB/idle sub' }
          : { ratio: 0.5, p99: 50, kB: Number.POSITIVE_INFINITY, text: '≥ 0.5×; p99 ≤ 50 ms' };
      const met = ratio >= target.ratio && steadyGw.p99 <= target.p99 && memPerSub <= target.kB * 1024;
      rows.push([
        `6 fan-out, ${count} subscribers, one instance`,
        `${fmt(median(gw))} deliveries/s`,
        `${fmt(median(fl))} deliveries/s (raw ws)`,
        `**${fmt(ratio, 2)}×**`,
        target.text,
        met ? 'met' : '**not met**',
        `steady p50/p99 ${steadyGw.p50} / ${steadyGw.p99} ms`,
        `steady p99 ${steadyFloor.p99} ms; ${fmt(floorMemPerSub / 1024, 1)} kB live heap per idle socket`,
        `${fmt(memPerSub / 1024, 1)} kB live heap per idle subscriber (RSS ${rssPerSub < 0 ? '' : '+'}${fmt(rssPerSub / 1024, 1)} kB)`,
      ]);
      log(
        `6 fan-out ${count}: ${fmt(median(gw))} vs ${fmt(median(fl))} deliveries/s → ${fmt(ratio, 2)}×, p99 ${steadyGw.p99} ms, ${fmt(memPerSub / 1024, 1)} kB/sub`,
      );
    }

    // 6p. Both real-time protocols on one channel of one instance: half the subscribers speak
    // graphql-ws, half the Pusher protocol (issue 16); each must get each event exactly once.
    {
      const total = quick ? 500 : 2000;
      const half = total / 2;
      const wsBase = gateway.url.replace('http', 'ws');
      const [gqlHalf, pusherHalf] = await Promise.all([
        connectSubscribers({
          wsUrl: `${wsBase}/graphql`,
          count: half,
          graphql: { init, channel: 'global-demo' },
          sequence: true,
        }),
        connectSubscribers({
          wsUrl: `${wsBase}/app/demo-appkey?protocol=7&token=${aliceToken}`,
          count: half,
          pusher: { channel: 'global-demo', event: 'bench' },
          sequence: true,
        }),
      ]);
      await ready(gateway.url, [gqlHalf, pusherHalf], total);
      // Exactness per socket, by event number: a readiness probe still on its way (under load)
      // counts for neither the check nor against it, as it did when deliveries were only summed.
      for (const subs of [gqlHalf, pusherHalf]) subs.expectFrom(0);
      const mixed: number[] = [];
      for (let round = 0; round < 3; round++) {
        mixed.push(await burst(gateway.url, [gqlHalf, pusherHalf], total, round * 100));
      }
      const exactSockets = () => [gqlHalf.exactUpTo(300), pusherHalf.exactUpTo(300)];
      const deadline = Date.now() + 10_000; // the bursts' sums may include a late probe
      while (exactSockets().some((n) => n < half) && Date.now() < deadline) await sleep(50);
      const each = exactSockets();
      const exact = each.every((n) => n === half);
      const steadyMixed = await steady(gateway.url, [gqlHalf, pusherHalf], quick ? 3 : 10);
      gqlHalf.close();
      pusherHalf.close();
      await sleep(1000);
      const graphqlOnly = median(results[total]?.gw ?? [1]);
      rows.push([
        `6p fan-out, ${half} Pusher + ${half} graphql-ws subscribers on one channel, one instance`,
        `${fmt(median(mixed))} deliveries/s`,
        `${fmt(graphqlOnly)} deliveries/s (scenario 6, ${total} graphql-ws subscribers)`,
        `**${fmt(median(mixed) / graphqlOnly, 2)}×**`,
        'each subscriber gets each event once',
        exact ? 'met' : '**not met**',
        `steady p50/p99 ${steadyMixed.p50} / ${steadyMixed.p99} ms`,
        '',
        `subscribers that got events 0–299 of 3 bursts exactly once, in order: graphql-ws ${each[0]}, Pusher ${each[1]} of ${half} each`,
      ]);
      log(`6p mixed ${half}+${half}: ${fmt(median(mixed))} deliveries/s, exact ${exact}, p99 ${steadyMixed.p99} ms`);
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

Method: the gateway is its production build (\`npm run build\`, \`node dist/main.js\`); the floors run through tsx.
Every server (gateway and floor) pinned to core ${SERVER_CORE}; the load generator (autocannon, 50
connections, no pipelining), PostgreSQL and Redis pinned to core ${LOAD_CORE}. Real PostgreSQL and Redis.
Each scenario is first checked for correctness (the gateway and the floor return the same data; any error,
non-2xx or refusal answered with HTTP 200 — an envelope \`code\` other than 0, GraphQL \`errors\` — fails the run), then measured as warm-up + ${WINDOW.rounds} interleaved rounds (floor, gateway,
floor, gateway, …) of ${WINDOW.seconds} s; the ratio is the median of the per-round ratios. ELU is the
server's event-loop utilisation during the window. The floors (bench/floors.ts, bench/ws-floor.ts) do the
same work with nothing in between: a raw node:http handler with the same token check, Redis session read,
prepared postgres.js reads and publication; argon2id verify alone; svg-captcha + sharp alone; a raw ws
server sending one pre-serialized frame to every socket.

${table}

${notes.length ? `Notes:\n${notes.map((n) => `- ${n}`).join('\n')}\n` : ''}`;
  // A smoke run or a partial one never replaces the record.
  const path = quick || only ? 'BENCHMARKS.quick.md' : 'BENCHMARKS.md';
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
  writeFileSync(path, quick || only ? report : `${report}\n${analysis}`);
  console.log(`\n${table}\n\nwritten to ${path}`);
}

main().catch(async (error) => {
  console.error(error);
  await dropDatabase();
  process.exit(1);
});
