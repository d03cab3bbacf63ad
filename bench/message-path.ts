import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import type { buildDeps } from '../src/compose.js';
import { issueVisitorToken } from '../src/resolvers/visitor.js';
import { connectSubscribers, type Subscribers } from './fanout-client.js';
import { cpuSeconds, median, type Proc } from './lib.js';

/**
 * Rows 9, 9h and 9x of `npm run bench` (issue 33, target 1): the chat's message path, visitor
 * `POST /visitor/message/send` → the `message.created` frame at the conversation's agent.
 *
 * - 9: messages/s with every conversation sending back to back (one in flight each) until the
 *   last send is delivered, against the floor (bench/floors.ts: the same token check, row lock +
 *   seq + insert in one transaction, publication on the same Redis bus after commit, raw ws
 *   delivery), interleaved rounds; target ≥ 0.6×. One send at a time: p50/p99 beside it.
 * - 9h: p99 send → event with sends arriving at half the floor's rate (open loop, spread over the
 *   conversations), gateway and floor each at that rate; target ≤ 200 ms.
 * - 9x: the same sustained load over two gateway instances on one PostgreSQL and one Redis (half
 *   the conversations send to each; the agents listen on the first), against one instance, in
 *   interleaved rounds: the ratio is reported.
 */

export interface MessagePathContext {
  gateway: Proc;
  floor: Proc;
  deps: Awaited<ReturnType<typeof buildDeps>>;
  dbUrl: string;
  conversations: number;
  agents: number;
  quick: boolean;
  /** Row 9 alone (`--only=message9`), without 9h and 9x. */
  rowNineOnly?: boolean;
  window: { rounds: number; seconds: number; warmup: number };
  /** Starts one more gateway on the bench's stores (pinned as the first). */
  startGateway(name: string): Promise<Proc>;
  login(base: string, username: string): Promise<string>;
  row(cells: string[]): void;
  note(text: string): void;
  log(...args: unknown[]): void;
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * p)] ?? 0;

export async function messagePath(ctx: MessagePathContext) {
  const { gateway, floor } = ctx;
  const probe = await fetch(`${gateway.url}/visitor/message/send`, { method: 'POST' });
  await probe.arrayBuffer();
  if (probe.status === 404) {
    ctx.note('message path: POST /visitor/message/send is not mounted in this build; rows 9 not run');
    return;
  }
  // Visitors with an active conversation each, shared out over the agents.
  const visitors: { token: string; uid: string }[] = [];
  for (let i = 0; i < ctx.conversations; i++) {
    const issued = await issueVisitorToken(ctx.deps, { appkey: 'demo-appkey' }, `10.77.${i >> 8}.${i & 255}`);
    visitors.push({ token: issued.token, uid: issued.uid });
  }
  const sql = postgres(ctx.dbUrl, { max: 1, onnotice: () => {} });
  const now = Math.floor(Date.now() / 1000);
  for (const [i, v] of visitors.entries()) {
    await sql`insert into conversations (id, merchant_id, agent_id, visitor_id, state, timestamp, assigned_at)
              values (${`c_msg_${i}`}, 'm_demo', ${`a_msg${(i % ctx.agents) + 1}`}, ${v.uid}, 'active', ${now}, now())`;
  }
  await sql.end();

  const latencyStamp = /lat:(\d+)/;
  const agentIds = Array.from({ length: ctx.agents }, (_, i) => `a_msg${i + 1}`);
  const gwSubs: Subscribers[] = [];
  for (const id of agentIds) {
    const token = await ctx.login(gateway.url, id.replace('a_', ''));
    gwSubs.push(
      await connectSubscribers({
        wsUrl: `${gateway.url.replace('http', 'ws')}/graphql`,
        count: 1,
        graphql: { init: { appkey: 'demo-appkey', token }, channel: `agent-${id}` },
        stamp: latencyStamp,
      }),
    );
  }
  const floorSubs: Subscribers[] = [];
  for (const id of agentIds) {
    floorSubs.push(
      await connectSubscribers({
        wsUrl: `${floor.url.replace('http', 'ws')}/floor/ws?channel=agent-${id}`,
        count: 1,
        stamp: latencyStamp,
      }),
    );
  }
  await sleep(500);
  let n = 0;
  let failures = 0;
  const send = async (base: string, path: string, v: { token: string }) => {
    const res = await fetch(base + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${v.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ client_msg_id: `bench-${n++}`, content: `lat:${Date.now()}` }),
    });
    const body = (await res.json()) as { code: number; msg?: string };
    if (body.code !== 0) throw new Error(`message send on ${base}${path}: ${JSON.stringify(body)}`);
  };
  /** `pids`: the servers whose CPU time the side's messages cost. */
  type Side = { bases: string[]; path: string; subs: Subscribers[]; pids: number[] };
  const gatewaySide: Side = {
    bases: [gateway.url],
    path: '/visitor/message/send',
    subs: gwSubs,
    pids: [gateway.child.pid as number],
  };
  const floorSide: Side = {
    bases: [floor.url],
    path: '/floor/message',
    subs: floorSubs,
    pids: [floor.child.pid as number],
  };
  const cpuOf = (side: Side) => side.pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  const delivered = (subs: Subscribers[]) => subs.reduce((k, s) => k + s.deliveries, 0);
  const waitFor = async (subs: Subscribers[], expected: number) => {
    const deadline = Date.now() + 60_000;
    while (delivered(subs) < expected) {
      if (Date.now() > deadline)
        throw new Error(`message path: ${delivered(subs)} of ${expected} delivered within 60 s`);
      await sleep(2);
    }
  };
  const recording = (subs: Subscribers[], on: boolean) => {
    for (const s of subs) {
      if (on) s.latencies = [];
      s.recordLatency = on;
    }
    return subs.flatMap((s) => s.latencies);
  };

  /** One send at a time: the end-to-end latency with the server otherwise idle. */
  async function oneAtATime(side: Side, count: number) {
    recording(side.subs, true);
    for (let i = 0; i < count; i++) {
      const before = delivered(side.subs);
      await send(side.bases[0] as string, side.path, visitors[i % visitors.length] as { token: string });
      await waitFor(side.subs, before + 1);
    }
    const all = recording(side.subs, false);
    return { p50: percentile(all, 0.5), p99: percentile(all, 0.99) };
  }

  /**
   * Every conversation sends back to back for `seconds` (visitor i to base i mod bases): messages/s
   * until the last delivery. `refused` counts sends answered with an error instead of failing the
   * run (the two-instance row on an overloaded machine: reported beside its rate).
   */
  let refused = 0;
  async function sustained(side: Side, seconds: number, tolerant = true) {
    recording(side.subs, true);
    const before = delivered(side.subs);
    const cpuBefore = cpuOf(side);
    const started = Date.now();
    const until = started + seconds * 1000;
    let sent = 0;
    await Promise.all(
      visitors.map(async (v, i) => {
        const base = side.bases[i % side.bases.length] as string;
        while (Date.now() < until) {
          try {
            await send(base, side.path, v);
            sent++;
          } catch (error) {
            if (!tolerant) throw error;
            refused++;
          }
        }
      }),
    );
    await waitFor(side.subs, before + sent);
    const rate = sent / ((Date.now() - started) / 1000);
    // CPU time per message (user + system, µs): unlike the rate, not moved by what else runs on the core.
    const cpuPerMessage = sent > 0 ? ((cpuOf(side) - cpuBefore) * 1e6) / sent : 0;
    const all = recording(side.subs, false);
    return { rate, cpuPerMessage, p99: percentile(all, 0.99) };
  }

  /** Sends at a fixed `rate` (open loop: on schedule, whatever is in flight) for `seconds`: delivery p50/p99. */
  async function paced(side: Side, rate: number, seconds: number) {
    recording(side.subs, true);
    const before = delivered(side.subs);
    const total = Math.max(1, Math.round(rate * seconds));
    const started = Date.now();
    const inFlight: Promise<void>[] = [];
    for (let i = 0; i < total; i++) {
      const due = started + (i * 1000) / rate;
      const wait = due - Date.now();
      if (wait > 0) await sleep(wait);
      inFlight.push(
        send(side.bases[0] as string, side.path, visitors[i % visitors.length] as { token: string }).catch(() => {
          failures++;
        }),
      );
    }
    await Promise.all(inFlight);
    await waitFor(side.subs, before + total - failures);
    const all = recording(side.subs, false);
    return { p50: percentile(all, 0.5), p99: percentile(all, 0.99), sent: total };
  }

  const W = ctx.window;
  // Refusals (1503: a pool or statement timeout on an overloaded machine) are counted, not sent.
  const refusedIn = async <T>(run: () => Promise<T>) => {
    const before = refused;
    const value = await run();
    return { value, refused: refused - before };
  };
  const latencyCount = ctx.quick ? 30 : 300;
  await oneAtATime(floorSide, 10);
  await oneAtATime(gatewaySide, 10);
  const latFloor = await oneAtATime(floorSide, latencyCount);
  const latGw = await oneAtATime(gatewaySide, latencyCount);
  await sustained(floorSide, W.warmup);
  await sustained(gatewaySide, W.warmup);
  type Round = { rate: number; cpuPerMessage: number; p99: number };
  const fl: Round[] = [];
  const gw: Round[] = [];
  let refusedFloor = 0;
  let refusedGateway = 0;
  for (let round = 0; round < W.rounds; round++) {
    const f = await refusedIn(() => sustained(floorSide, W.seconds));
    fl.push(f.value);
    refusedFloor += f.refused;
    const g = await refusedIn(() => sustained(gatewaySide, W.seconds));
    gw.push(g.value);
    refusedGateway += g.refused;
  }
  const floorRate = median(fl.map((f) => f.rate));
  const gwRate = median(gw.map((g) => g.rate));
  const ratio = median(gw.map((g, i) => g.rate / (fl[i] as Round).rate));
  const cpuGw = median(gw.map((g) => g.cpuPerMessage));
  const cpuFloor = median(fl.map((f) => f.cpuPerMessage));
  ctx.row([
    `9 message path: visitor send → agent event, ${ctx.conversations} active conversations, one instance`,
    `${fmt(gwRate)} messages/s`,
    `${fmt(floorRate)} messages/s (insert + publish + raw ws)`,
    `**${fmt(ratio, 2)}×**`,
    '≥ 0.6×',
    ratio >= 0.6 ? 'met' : '**not met**',
    `one at a time p50/p99 ${latGw.p50} / ${latGw.p99} ms`,
    `one at a time p50/p99 ${latFloor.p50} / ${latFloor.p99} ms`,
    `under full load p99 ${fmt(median(gw.map((g) => g.p99)))} / ${fmt(median(fl.map((f) => f.p99)))} ms (gateway / floor); CPU per message ${fmt(cpuGw)} / ${fmt(cpuFloor)} µs (${fmt(cpuGw > 0 ? cpuFloor / cpuGw : 0, 2)}×)${
      refusedGateway + refusedFloor > 0
        ? `; sends refused (not counted): gateway ${refusedGateway}, floor ${refusedFloor}`
        : ''
    }`,
  ]);
  const rounds = gw
    .map(
      (g, i) =>
        `${fmt(g.rate)}/${fmt((fl[i] as Round).rate)} at ${fmt(g.cpuPerMessage)}/${fmt((fl[i] as Round).cpuPerMessage)} µs`,
    )
    .join(', ');
  ctx.log(
    `9 message path: ${fmt(gwRate)} vs ${fmt(floorRate)} messages/s → ${fmt(ratio, 2)}×; CPU per message ${fmt(cpuGw)} vs ${fmt(cpuFloor)} µs → ${fmt(cpuGw > 0 ? cpuFloor / cpuGw : 0, 2)}× (rounds: gateway/floor ${rounds})`,
  );
  if (ctx.rowNineOnly) {
    for (const s of [...gwSubs, ...floorSubs]) s.close();
    return;
  }

  // 9h: half the floor's rate, open loop, on each side in turn.
  const half = floorRate / 2;
  const pacedSeconds = W.seconds * 2;
  const pacedFloor = await paced(floorSide, half, pacedSeconds);
  const pacedGw = await paced(gatewaySide, half, pacedSeconds);
  ctx.row([
    `9h message path: p99 send → agent event at half the floor's rate (${fmt(half)} messages/s, open loop, ${pacedSeconds} s)`,
    `p99 ${fmt(pacedGw.p99)} ms`,
    `p99 ${fmt(pacedFloor.p99)} ms`,
    `**${fmt(pacedFloor.p99 > 0 ? pacedGw.p99 / pacedFloor.p99 : 0, 2)}×** (of the floor's p99)`,
    '≤ 200 ms',
    pacedGw.p99 <= 200 ? 'met' : '**not met**',
    `p50/p99 ${pacedGw.p50} / ${pacedGw.p99} ms`,
    `p50/p99 ${pacedFloor.p50} / ${pacedFloor.p99} ms`,
    `${pacedGw.sent} sends each side${failures ? `; ${failures} sends failed` : ''}`,
  ]);
  ctx.log(`9h at ${fmt(half)}/s: p99 ${pacedGw.p99} ms (floor ${pacedFloor.p99} ms)`);

  // 9x: two instances against one, interleaved.
  const second = await ctx.startGateway('gateway-2');
  try {
    const twoSide: Side = {
      ...gatewaySide,
      bases: [gateway.url, second.url],
      pids: [...gatewaySide.pids, second.child.pid as number],
    };
    await sustained(twoSide, W.warmup, true);
    refused = 0;
    const one: number[] = [];
    const two: number[] = [];
    for (let round = 0; round < W.rounds; round++) {
      one.push((await sustained(gatewaySide, W.seconds, true)).rate);
      two.push((await sustained(twoSide, W.seconds, true)).rate);
    }
    const ratio2 = median(two.map((t, i) => t / (one[i] as number)));
    ctx.row([
      '9x message path: two instances on one PostgreSQL and one Redis vs one instance',
      `${fmt(median(two))} messages/s`,
      `${fmt(median(one))} messages/s (one instance)`,
      `**${fmt(ratio2, 2)}×**`,
      'reported (> 1× where instances have cores of their own)',
      'met',
      '',
      '',
      `both instances pinned to the server core (one core between them)${refused ? `; ${refused} sends refused (1503) in these rounds` : ''}: see BENCHMARKS.md "Message path and reconnect storm (issue 33)"`,
    ]);
    ctx.log(`9x two instances: ${fmt(median(two))} vs ${fmt(median(one))} messages/s → ${fmt(ratio2, 2)}×`);
  } finally {
    await second.stop();
  }
  for (const s of [...gwSubs, ...floorSubs]) s.close();
}
