import { and, asc, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentGroups, conversations, merchants, messages } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { chooseAgent } from '../../src/resolvers/availability/routing/policies.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { updateAgentGroup } from '../../src/resolvers/desk/groups.js';
import type { AgentViewer, VisitorViewer } from '../../src/resolvers/viewer.js';
import { factories, secondInstance, type TestDeps, type TestMerchant, testDeps } from '../support/deps.js';

/** Routing policies per group (docs/availability.md "Routing"): capacity holds, decisions race-free across instances. */

let deps: TestDeps;
let other: TestDeps | undefined;
let f: ReturnType<typeof factories>;
beforeAll(async () => {
  deps = await testDeps();
  other = await secondInstance();
  f = factories(deps);
});
afterAll(async () => {
  await f.cleanup();
  await other?.close();
});

async function group(m: TestMerchant, admin: AgentViewer, name: string, routing: string, members: AgentViewer[]) {
  const id = `g_${name}_${m.merchantId}`;
  await deps.db.insert(agentGroups).values({ id, merchantId: m.merchantId, name });
  await updateAgentGroup(deps, admin, {
    id,
    routing: routing as 'ROUND_ROBIN',
    memberIds: members.map((a) => a.agentId),
  });
  return id;
}

const activeOf = async (agentIds: string[]) => {
  const rows = await deps.db
    .select({ agentId: conversations.agentId, n: sql<number>`count(*)::int` })
    .from(conversations)
    .where(eq(conversations.state, 'active'))
    .groupBy(conversations.agentId);
  const by = new Map(rows.map((r) => [r.agentId, Number(r.n)]));
  return agentIds.map((id) => by.get(id) ?? 0);
};

describe('routing policies', () => {
  it('round robin continues from the cursor in the group’s row; last agent brings a returning visitor back', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const [a, b, c] = [await f.agent(m), await f.agent(m), await f.agent(m)];
    const rr = await group(m, admin, 'rr', 'ROUND_ROBIN', [a, b, c].filter(Boolean) as AgentViewer[]);
    for (const x of [a, b, c]) await f.online(x as AgentViewer);
    const order: (string | undefined)[] = [];
    for (let i = 0; i < 6; i++) {
      const v = await f.visitor(m);
      order.push((await assignAgent(deps, v, { groupId: rr })).agent?.agentId);
    }
    const ids = [a, b, c].map((x) => x?.agentId as string).sort();
    expect(order).toEqual([...ids, ...ids]);
    const [row] = await deps.db.select().from(agentGroups).where(eq(agentGroups.id, rr));
    expect(row?.routingCursor).toBe(ids[2]);

    const last = await group(m, admin, 'last', 'LAST_AGENT', []);
    const d = await f.agent(m);
    const e = await f.agent(m);
    await updateAgentGroup(deps, admin, { id: last, memberIds: [d.agentId, e.agentId] });
    await f.online(d);
    await f.online(e);
    const v = await f.visitor(m);
    const first = await assignAgent(deps, v, { groupId: last });
    await closeConversation(deps, v);
    // Load the other agent so that least busy would pick it: last agent still wins.
    const firstAgent = first.agent?.agentId as string;
    const again = await assignAgent(deps, v, { groupId: last });
    expect(again.agent?.agentId).toBe(firstAgent);
  });

  it('chooses by value: least busy, round robin wrap, last agent fallback', () => {
    const agent = (id: string) => ({ id, lastAssignedAt: null }) as never;
    const pool = [agent('a2'), agent('a1'), agent('a3')];
    const active = new Map([
      ['a1', 2],
      ['a2', 1],
      ['a3', 2],
    ]);
    const base = { active, cursor: null, lastAgentId: null };
    expect((chooseAgent(pool, { ...base, policy: 'LEAST_BUSY' }) as { id: string }).id).toBe('a2');
    expect((chooseAgent(pool, { ...base, policy: 'ROUND_ROBIN', cursor: 'a3' }) as { id: string }).id).toBe('a1');
    expect((chooseAgent(pool, { ...base, policy: 'ROUND_ROBIN', cursor: 'a1' }) as { id: string }).id).toBe('a2');
    expect((chooseAgent(pool, { ...base, policy: 'LAST_AGENT', lastAgentId: 'a3' }) as { id: string }).id).toBe('a3');
    expect((chooseAgent(pool, { ...base, policy: 'LAST_AGENT', lastAgentId: 'gone' }) as { id: string }).id).toBe('a2');
    expect(chooseAgent([], { ...base, policy: 'LEAST_BUSY' })).toBeUndefined();
  });
});

/**
 * The load test's scale (ROUTING_TEST_CONVERSATIONS sets the count). On PostgreSQL with two
 * instances: 1,000 conversations over 50 agents, every 20th in the small group. Embedded: 80 over 20
 * agents, every 5th in the small group. PGlite is one connection whose transactions run one after
 * another, so the 16 callers can only interleave between transactions: the 200 conversations over
 * 50 agents this used to run embedded interleaved no differently, for 2.5 times the CPU. The
 * small group still outgrows its 2 × 3 seats (16 conversations: 6 served, 10 waiting), so the FIFO
 * check picks the 6 oldest of 10 waiting; at 200 it had 4 waiting for 6 freed seats, which any
 * order passes.
 */
const shared = Boolean(process.env.DATABASE_URL);
const CONVERSATIONS = Number(process.env.ROUTING_TEST_CONVERSATIONS) || (shared ? 1000 : 80);
const AGENTS = shared ? 50 : 20;
/** Every 20th conversation goes to the small group, or more often so that at least 16 do. */
const FIFO_EVERY = Math.min(20, Math.floor(CONVERSATIONS / 16));
/** Capacity of each of the two agents of the small group, whose queue outgrows it (the FIFO check). */
const FIFO_CAPACITY = 3;

describe('routing under load, two instances', () => {
  it(`${CONVERSATIONS} conversations in parallel against ${AGENTS} agents of mixed capacities and groups: 0 over capacity, 0 double assignments, spread ≤ 1, FIFO`, async () => {
    const two = other;
    const n = CONVERSATIONS;
    const m = await f.merchant({ maxConcurrentChats: 30 });
    await deps.db.update(merchants).set({ idleCloseMinutes: 0 }).where(eq(merchants.id, m.merchantId));
    const admin = await f.agent(m, { level: 'admin' });
    // 48 agents (18 embedded) of capacities 10 and 40 in a round-robin and a least-busy group; 2 of capacity 3 in a small group.
    const staff: { viewer: AgentViewer; capacity: number }[] = [];
    for (let i = 0; i < AGENTS; i++) {
      const capacity = i >= AGENTS - 2 ? FIFO_CAPACITY : i % 2 === 0 ? 10 : 40;
      staff.push({ viewer: await f.agent(m, { maxConcurrentChats: capacity }), capacity });
    }
    const big = staff.slice(0, AGENTS - 2);
    const rrMembers = big.filter((_, i) => i % 4 < 2).map((s) => s.viewer);
    const lbMembers = big.filter((_, i) => i % 4 >= 2).map((s) => s.viewer);
    const fifoMembers = staff.slice(AGENTS - 2).map((s) => s.viewer);
    const rr = await group(m, admin, 'load_rr', 'ROUND_ROBIN', rrMembers);
    const lb = await group(m, admin, 'load_lb', 'LEAST_BUSY', lbMembers);
    const fifo = await group(m, admin, 'load_fifo', 'LEAST_BUSY', fifoMembers);
    for (const s of staff) await f.online(s.viewer);
    const visitors: VisitorViewer[] = [];
    for (let i = 0; i < n; i += 50)
      visitors.push(...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, () => f.visitor(m)))));
    const groupOf = (i: number) => (i % FIFO_EVERY === 0 ? fifo : i % 2 ? rr : lb);
    const timings: number[] = [];
    let next = 0;
    const started = performance.now();
    const worker = async (w: number) => {
      const on: Deps = two && w % 2 ? two : deps;
      for (let i = next++; i < n; i = next++) {
        const t = performance.now();
        await assignAgent(on, visitors[i] as VisitorViewer, { groupId: groupOf(i) });
        timings.push(performance.now() - t);
      }
    };
    await Promise.all(Array.from({ length: 16 }, (_, w) => worker(w)));
    const elapsed = performance.now() - started;

    const all = staff.map((s) => s.viewer.agentId);
    const counts = await activeOf(all);
    // 0 over capacity.
    expect(staff.filter((s, i) => (counts[i] ?? 0) > s.capacity)).toEqual([]);
    // 0 double assignments: one `assigned` system message per conversation at most.
    const doubles = async () =>
      deps.db
        .select({ c: messages.conversationId, n: sql<number>`count(*)::int` })
        .from(messages)
        .where(and(eq(messages.merchantId, m.merchantId), sql`${messages.meta}->>'event' = 'assigned'`))
        .groupBy(messages.conversationId)
        .having(sql`count(*) > 1`);
    expect(await doubles()).toEqual([]);
    const rows = await deps.db
      .select({ id: conversations.id, groupId: conversations.groupId, state: conversations.state })
      .from(conversations)
      .where(eq(conversations.merchantId, m.merchantId));
    expect(rows).toHaveLength(n);
    const active = rows.filter((r) => r.state === 'active');
    expect(active.length).toBe(counts.reduce((x, y) => x + y, 0));
    // The two big groups have room for all theirs: every one of their conversations is assigned, once.
    expect(rows.filter((r) => r.groupId !== fifo && r.state !== 'active')).toEqual([]);
    // The small group is full; the rest of its conversations wait.
    const fifoCount = rows.filter((r) => r.groupId === fifo).length;
    expect(active.filter((r) => r.groupId === fifo)).toHaveLength(Math.min(fifoCount, 2 * FIFO_CAPACITY));
    // Spread ≤ 1 among agents of the same group and capacity.
    for (const members of [rrMembers, lbMembers])
      for (const capacity of [10, 40]) {
        const same = staff
          .map((s, i) => ({ s, n: counts[i] ?? 0 }))
          .filter(({ s }) => members.includes(s.viewer) && s.capacity === capacity)
          .map(({ n }) => n);
        expect(Math.max(...same) - Math.min(...same), `capacity ${capacity}: ${same.join(',')}`).toBeLessThanOrEqual(1);
      }

    // FIFO: the small group's agents finish their conversations (in parallel, on both instances);
    // the conversations served next are exactly the oldest of those waiting.
    const waiting = await deps.db
      .select({ id: conversations.id, visitorId: conversations.visitorId })
      .from(conversations)
      .where(and(eq(conversations.groupId, fifo), eq(conversations.state, 'queued')))
      .orderBy(asc(conversations.queuedAt), asc(conversations.id));
    const served = await deps.db
      .select({ visitorId: conversations.visitorId })
      .from(conversations)
      .where(and(eq(conversations.groupId, fifo), eq(conversations.state, 'active')));
    const byId = new Map(visitors.map((v) => [v.visitorId, v]));
    await Promise.all(
      served.map((s, i) => closeConversation(two && i % 2 ? two : deps, byId.get(s.visitorId) as VisitorViewer)),
    );
    const now = await deps.db
      .select({ id: conversations.id })
      .from(conversations)
      .where(and(eq(conversations.groupId, fifo), eq(conversations.state, 'active')));
    // More wait than the freed seats take, so the order decides which are served.
    expect(waiting.length).toBeGreaterThan(served.length);
    const expected = waiting.slice(0, served.length).map((w) => w.id);
    expect(now.map((r) => r.id).sort()).toEqual(expected.sort());
    expect(await doubles()).toEqual([]);

    timings.sort((a, b) => a - b);
    const p99 = timings[Math.floor(timings.length * 0.99)] ?? 0;
    console.log(
      `routing load: ${n} conversations, ${AGENTS} agents, ${two ? 2 : 1} instance(s), 16 callers: ${(elapsed / 1000).toFixed(1)} s; assign p50 ${timings[Math.floor(timings.length / 2)]?.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms; assigned ${active.length}, waiting ${waiting.length}`,
    );
  }, 120_000);
});
