import { eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { agentGroups, agents, conversations, eventOutbox } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { drainAllQueues, drainQueue, drainQueueQuietly } from '../../src/resolvers/conversations/queue.js';
import { assignAgent, openNewConversation } from '../../src/resolvers/conversations/routing.js';
import { rowsOf } from '../../src/resolvers/outbox/enqueue.js';
import type { AgentViewer } from '../../src/resolvers/viewer.js';
import {
  eventually,
  type Factories,
  factories,
  privateTestDeps,
  recordEvents,
  type TestDeps,
  type TestMerchant,
  useTestDeps,
} from '../support/deps.js';

/**
 * The queue's drain by value (src/resolvers/conversations/queue.ts): which group's agents serve
 * which queue (the default group and the conversations without a group), the preferred agent,
 * the last-agent and round-robin bookkeeping, skipping what cannot be served, the "drain again"
 * flag, joined drains, and what drainQueue, drainAllQueues and drainQueueQuietly return or log.
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

/** Online in the presence store without the drain a socket's arrival triggers: the test drains by hand. */
async function onlineQuietly(deps: Deps, m: TestMerchant, agent: AgentViewer) {
  await deps.presence.touch(agent.agentId, `test-${agent.agentId}`, Date.now() + 60_000);
  await deps.presence.settle(agent.agentId, m.bid, Date.now(), 'online');
}

/** A visitor whose new conversation waits (nobody is online yet): its conversation id. */
async function waiting(m: TestMerchant, on: Deps = deps): Promise<string> {
  const fs = on === deps ? f : factories(on);
  const assigned = await assignAgent(on, await fs.visitor(m));
  expect(assigned.state).toBe('queued');
  return assigned.conversationId;
}

/** State and agent of conversations, in the order of `ids`. */
async function statesOf(ids: string[], on: Deps = deps) {
  const out: { state: string; agentId: string | null }[] = [];
  for (const id of ids) {
    const [row] = await on.db
      .select({ state: conversations.state, agentId: conversations.agentId })
      .from(conversations)
      .where(eq(conversations.id, id));
    out.push(row ?? { state: 'missing', agentId: null });
  }
  return out;
}

/** The events still in the outbox for the visitors of conversations (a drain publishes its own before it returns). */
async function outboxLeftFor(ids: string[]) {
  const left: string[] = [];
  for (const id of ids) {
    const [c] = await deps.db.select().from(conversations).where(eq(conversations.id, id));
    const rows = await deps.db
      .select({ event: eventOutbox.event })
      .from(eventOutbox)
      .where(eq(eventOutbox.orderKey, `visitor:${c?.visitorId}`));
    left.push(...rows.map((r) => r.event));
  }
  return left;
}

const queued = { state: 'queued', agentId: null };
const activeWith = (agent: AgentViewer) => ({ state: 'active', agentId: agent.agentId });

const defaultGroupOf = async (m: TestMerchant) =>
  (await deps.db.select().from(agentGroups).where(eq(agentGroups.merchantId, m.merchantId))).find((g) => g.isDefault);

const setConversationGroup = (id: string, groupId: string | null) =>
  deps.db.update(conversations).set({ groupId }).where(eq(conversations.id, id));

/** `target` with some members replaced (a Proxy, so a store's methods keep their `this`). */
function overriding<T extends object>(target: T, overrides: Partial<T>): T {
  return new Proxy(target, {
    get(t, prop) {
      if (prop in overrides) return overrides[prop as keyof T];
      const value = Reflect.get(t, prop, t);
      return typeof value === 'function' ? value.bind(t) : value;
    },
  });
}

describe('which agents serve which queue', () => {
  it('an agent without a group serves the default group, whose queue takes the conversations without a group', async () => {
    const m = await f.merchant();
    const inDefault = await waiting(m);
    const withoutGroup = await waiting(m);
    await setConversationGroup(withoutGroup, null);
    const a = await f.agent(m);
    await deps.db.update(agents).set({ groupId: null }).where(eq(agents.id, a.agentId));
    await onlineQuietly(deps, m, a);
    expect(await drainQueue(deps, m.merchantId)).toBe(2);
    expect(await statesOf([inDefault, withoutGroup])).toEqual([activeWith(a), activeWith(a)]);
    // The drain published their events itself.
    expect(await outboxLeftFor([inDefault, withoutGroup])).toEqual([]);
  });

  it("another group's agents never take a conversation without a group", async () => {
    const m = await f.merchant();
    await deps.db
      .insert(agentGroups)
      .values({ id: `g_sales_${m.merchantId}`, merchantId: m.merchantId, name: 'sales' });
    const seller = await f.agent(m, { group: 'sales' });
    const toSales = await waiting(m);
    await setConversationGroup(toSales, `g_sales_${m.merchantId}`);
    const withoutGroup = await waiting(m);
    await setConversationGroup(withoutGroup, null);
    await onlineQuietly(deps, m, seller);
    expect(await drainQueue(deps, m.merchantId)).toBe(1);
    expect(await statesOf([toSales, withoutGroup])).toEqual([activeWith(seller), queued]);
  });

  it('a merchant without a default group: its agents without a group serve the conversations without one, and only those', async () => {
    const m = await f.merchant();
    const former = await defaultGroupOf(m);
    await deps.db.update(agentGroups).set({ isDefault: false }).where(eq(agentGroups.merchantId, m.merchantId));
    const noGroup = await waiting(m);
    const inFormerDefault = await waiting(m);
    await setConversationGroup(inFormerDefault, former?.id ?? null);
    // createAgent finds no default group: the agent has none.
    const a = await f.agent(m);
    expect(a.agent.groupId).toBeNull();
    await onlineQuietly(deps, m, a);
    expect(await drainQueue(deps, m.merchantId)).toBe(1);
    expect(await statesOf([noGroup, inFormerDefault])).toEqual([activeWith(a), queued]);
  });
});

describe('how a conversation picks its agent', () => {
  it("a preferred agent is honoured for that visitor's conversation only, not for the older ones served in the same pass", async () => {
    const m = await f.merchant({ maxConcurrentChats: 1 });
    const older = await waiting(m);
    const newer = await waiting(m);
    const [first, second] = [await f.agent(m), await f.agent(m)].sort((x, y) => x.agentId.localeCompare(y.agentId));
    if (!first || !second) throw new Error('two agents');
    for (const x of [first, second]) await onlineQuietly(deps, m, x);
    // Least busy, tie broken by id, would give the older one to `first`; the newer asks for `second`.
    expect(await drainQueue(deps, m.merchantId, { conversationId: newer, agentId: second.agentId })).toBe(2);
    expect(await statesOf([older, newer])).toEqual([activeWith(first), activeWith(second)]);
  });

  it('last agent: a returning visitor goes back to its previous agent although another is less busy', async () => {
    const m = await f.merchant();
    const group = await defaultGroupOf(m);
    await deps.db
      .update(agentGroups)
      .set({ routing: 'LAST_AGENT' })
      .where(eq(agentGroups.id, group?.id ?? ''));
    const [a, b] = [await f.agent(m), await f.agent(m)];
    for (const x of [a, b]) await f.online(x);
    const v = await f.visitor(m);
    const first = await assignAgent(deps, v);
    const previous = first.agent?.agentId === a.agentId ? a : b;
    await deps.db.update(conversations).set({ state: 'closed' }).where(eq(conversations.id, first.conversationId));
    // The previous agent is now the busier one: least busy alone would pick the other.
    await assignAgent(deps, await f.visitor(m), { agentId: previous.agentId });
    const again = await assignAgent(deps, v);
    expect(again.agent?.agentId).toBe(previous.agentId);
    expect(again.conversationId).not.toBe(first.conversationId);
  });

  it('only a round-robin group keeps a cursor: a least-busy one is left without', async () => {
    const m = await f.merchant();
    const a = await f.agent(m);
    await f.online(a);
    expect((await assignAgent(deps, await f.visitor(m))).agent?.agentId).toBe(a.agentId);
    expect((await defaultGroupOf(m))?.routingCursor).toBeNull();
  });

  it('a conversation nobody has the skills for is passed over: the ones behind it are still served', async () => {
    const m = await f.merchant();
    const group = await defaultGroupOf(m);
    await deps.db
      .update(agentGroups)
      .set({ routing: 'SKILLS' })
      .where(eq(agentGroups.id, group?.id ?? ''));
    const needsLaw = await waiting(m);
    await deps.db
      .update(conversations)
      .set({ requiredSkills: ['law'] })
      .where(eq(conversations.id, needsLaw));
    const plain = await waiting(m);
    const a = await f.agent(m);
    await deps.db
      .update(agents)
      .set({ skills: ['chat'] })
      .where(eq(agents.id, a.agentId));
    await onlineQuietly(deps, m, a);
    expect(await drainQueue(deps, m.merchantId)).toBe(1);
    expect(await statesOf([needsLaw, plain])).toEqual([queued, activeWith(a)]);
  });

  it("outside SKILLS routing a conversation's required skills are not asked of the agent", async () => {
    const m = await f.merchant();
    const needsLaw = await waiting(m);
    await deps.db
      .update(conversations)
      .set({ requiredSkills: ['law'] })
      .where(eq(conversations.id, needsLaw));
    const a = await f.agent(m);
    await onlineQuietly(deps, m, a);
    expect(await drainQueue(deps, m.merchantId)).toBe(1);
    expect(await statesOf([needsLaw])).toEqual([activeWith(a)]);
  });

  it('an agent disabled after it was found online takes nothing: the pass assigns none and the conversation waits', async () => {
    const m = await f.merchant();
    const conversation = await waiting(m);
    const a = await f.agent(m);
    await onlineQuietly(deps, m, a);
    // Disabled between the presence read and the locked read of the agents' rows.
    const presence = overriding(deps.presence, {
      stateOf: async (agentId: string) => {
        await deps.db.update(agents).set({ disabled: true }).where(eq(agents.id, agentId));
        return deps.presence.stateOf(agentId);
      },
    });
    expect(await drainQueue({ ...deps, presence }, m.merchantId)).toBe(0);
    expect(await statesOf([conversation])).toEqual([queued]);
  });
});

describe('the drain itself', () => {
  it('sets the merchant\'s "drain again" flag, clears it under the lock and, nobody asking again, stops after one pass', async () => {
    const m = await f.merchant();
    const calls: unknown[][] = [];
    const kv = overriding(deps.kv, {
      set: async (key: string, value: string, ttl: number) => {
        calls.push(['set', key, value, ttl]);
        return deps.kv.set(key, value, ttl);
      },
      del: async (key: string) => {
        calls.push(['del', key]);
        return deps.kv.del(key);
      },
      take: async (key: string) => {
        calls.push(['take', key]);
        return deps.kv.take(key);
      },
    });
    expect(await drainQueue({ ...deps, kv }, m.merchantId)).toBe(0);
    const key = `routing:drain-again:${m.merchantId}`;
    expect(calls).toEqual([
      ['set', key, '1', 60],
      ['del', key],
      ['take', key],
    ]);
  });

  it('a drain asked for again meanwhile makes another pass, which serves what came in since', async () => {
    const m = await f.merchant();
    const first = await waiting(m);
    const a = await f.agent(m);
    await onlineQuietly(deps, m, a);
    const late = await f.visitor(m);
    let lateId: string | undefined;
    // After the first pass, another caller queued a conversation and asked for a drain (the flag is set).
    const kv = overriding(deps.kv, {
      take: async (key: string) => {
        const flag = await deps.kv.take(key);
        if (lateId) return flag;
        lateId = await openNewConversation(deps, m.merchantId, late.visitorId, (await defaultGroupOf(m))?.id ?? null);
        return '1';
      },
    });
    expect(await drainQueue({ ...deps, kv }, m.merchantId)).toBe(2);
    expect(await statesOf([first, lateId ?? ''])).toEqual([activeWith(a), activeWith(a)]);
  });

  it('asked again on every pass, one call stops after 50 passes (the periodic drain does the rest)', async () => {
    const m = await f.merchant();
    let passes = 0;
    const kv = overriding(deps.kv, {
      take: async (key: string) => {
        passes++;
        await deps.kv.take(key);
        return '1';
      },
    });
    expect(await drainQueue({ ...deps, kv }, m.merchantId)).toBe(0);
    expect(passes).toBe(50);
  });

  it('a visitor whose place moved is told its new position by the drain itself: nothing is left in the outbox', async () => {
    const m = await f.merchant();
    const ahead = await waiting(m);
    const behind = await f.visitor(m);
    const behindId = (await assignAgent(deps, behind)).conversationId;
    const feed = recordEvents(deps, [behind.channel]);
    await feed.ready;
    // The one ahead is gone (closed elsewhere, no drain of its own): a drain with nobody online tells the move.
    await deps.db.update(conversations).set({ state: 'closed' }).where(eq(conversations.id, ahead));
    expect(await drainQueue(deps, m.merchantId)).toBe(0);
    const left = await deps.db
      .select({ id: eventOutbox.id })
      .from(eventOutbox)
      .where(eq(eventOutbox.orderKey, `visitor:${behind.visitorId}`));
    expect(left).toEqual([]);
    const [row] = await deps.db.select().from(conversations).where(eq(conversations.id, behindId));
    expect(row?.queuePositionTold).toBe(1);
    expect((await feed.first('conversation.queue_position', behind.channel)).data).toMatchObject({
      conversation_id: behindId,
      visitor_id: behind.visitorId,
      state: 'queued',
      group_id: row?.groupId,
      queue_position: 1,
    });
    feed.stop();
  });

  it('asks while a drain runs join one drain that starts after it: one promise for them all', async () => {
    const m = await f.merchant();
    const ids = [await waiting(m), await waiting(m)];
    const a = await f.agent(m);
    await onlineQuietly(deps, m, a);
    const running = drainQueue(deps, m.merchantId);
    const second = drainQueue(deps, m.merchantId);
    const third = drainQueue(deps, m.merchantId);
    expect(third).toBe(second);
    expect(second).not.toBe(running);
    // The running drain served both; the joined one found nothing left.
    expect([await running, await second]).toEqual([2, 0]);
    expect(await statesOf(ids)).toEqual([activeWith(a), activeWith(a)]);
    // Both done: the next ask starts a drain of its own, which the one after it joins.
    const later = drainQueue(deps, m.merchantId);
    const joining = drainQueue(deps, m.merchantId);
    expect(later).not.toBe(second);
    expect(joining).not.toBe(later);
    expect([await later, await joining]).toEqual([0, 0]);
  });

  it('drainAllQueues serves every merchant with a waiting conversation and returns how many it assigned', async () => {
    // A database of its own: the count covers no other test's conversations.
    const own = await privateTestDeps();
    try {
      const fs = factories(own);
      const [m1, m2] = [await fs.merchant(), await fs.merchant()];
      const ids = [await waiting(m1, own), await waiting(m1, own), await waiting(m2, own)];
      const [a1, a2] = [await fs.agent(m1), await fs.agent(m2)];
      await onlineQuietly(own, m1, a1);
      await onlineQuietly(own, m2, a2);
      expect(await drainAllQueues(own)).toBe(3);
      expect(await statesOf(ids, own)).toEqual([activeWith(a1), activeWith(a1), activeWith(a2)]);
      expect(await drainAllQueues(own)).toBe(0);
      await fs.cleanup();
    } finally {
      await own.close();
    }
  });
});

/** Runs `meanwhile` while another transaction holds the merchant's drain lock (as a drain elsewhere would). */
async function holdingDrainLock(merchantId: string, meanwhile: () => Promise<void>) {
  await deps.db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`parley:drain:${merchantId}`}, 0))`);
    await meanwhile();
  });
}

// The lock is PostgreSQL's: PGlite is one connection, where a held lock would block the drain's own transaction.
describe.skipIf(!process.env.DATABASE_URL)("the merchant's drain lock (PostgreSQL)", () => {
  it("a drain finding its merchant's lock held leaves the work and the drain-again flag to the holder; another merchant's drain goes on", async () => {
    const [mx, my] = [await f.merchant(), await f.merchant()];
    const [cx, cy] = [await waiting(mx), await waiting(my)];
    const [ax, ay] = [await f.agent(mx), await f.agent(my)];
    await onlineQuietly(deps, mx, ax);
    await onlineQuietly(deps, my, ay);
    await holdingDrainLock(mx.merchantId, async () => {
      expect(await drainQueue(deps, mx.merchantId)).toBe(0);
      expect(await drainQueue(deps, my.merchantId)).toBe(1);
    });
    expect(await statesOf([cx, cy])).toEqual([queued, activeWith(ay)]);
    expect(await deps.kv.take(`routing:drain-again:${mx.merchantId}`)).toBe('1');
    expect(await drainQueue(deps, mx.merchantId)).toBe(1);
  });

  it("a drain for a visitor's preferred agent waits for the lock, then serves it", async () => {
    const m = await f.merchant();
    const conversation = await waiting(m);
    const a = await f.agent(m);
    await onlineQuietly(deps, m, a);
    let preferred: Promise<number> | undefined;
    await holdingDrainLock(m.merchantId, async () => {
      preferred = drainQueue(deps, m.merchantId, { conversationId: conversation, agentId: a.agentId });
      await eventually(async () => {
        const [row] = rowsOf<{ n: number }>(
          await deps.db.execute(
            sql`select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted
                and database = (select oid from pg_database where datname = current_database())`,
          ),
        );
        return Number(row?.n) > 0;
      }, 'the preferred drain waiting for the lock');
    });
    expect(await preferred).toBe(1);
    expect(await statesOf([conversation])).toEqual([activeWith(a)]);
  });
});

describe('drainQueueQuietly', () => {
  /** The deps with a log whose warnings are kept. */
  function warnings(over: Deps = deps) {
    const warned: unknown[][] = [];
    const log = overriding(over.log, { warn: ((...args: unknown[]) => warned.push(args)) as never });
    return { deps: { ...over, log }, warned };
  }

  it('drains a merchant named by id or by bid; an unknown bid is no drain and no warning', async () => {
    const m = await f.merchant();
    const [byId, byBid] = [await waiting(m), await waiting(m)];
    const a = await f.agent(m, { maxConcurrentChats: 1 });
    await onlineQuietly(deps, m, a);
    const quiet = warnings();
    await drainQueueQuietly(quiet.deps, { merchantId: m.merchantId });
    expect(await statesOf([byId, byBid])).toEqual([activeWith(a), queued]);
    await deps.db.update(agents).set({ maxConcurrentChats: 2 }).where(eq(agents.id, a.agentId));
    await drainQueueQuietly(quiet.deps, { bid: m.bid });
    expect(await statesOf([byId, byBid])).toEqual([activeWith(a), activeWith(a)]);
    await drainQueueQuietly(quiet.deps, { bid: `no-such-${m.bid}` });
    expect(quiet.warned).toEqual([]);
  });

  it('a failing drain is logged, never thrown', async () => {
    const m = await f.merchant();
    const kv = overriding(deps.kv, {
      set: async () => {
        throw new Error('store down');
      },
    });
    const failing = warnings({ ...deps, kv });
    await expect(drainQueueQuietly(failing.deps, { merchantId: m.merchantId })).resolves.toBeUndefined();
    expect(failing.warned).toEqual([[{ err: 'store down' }, expect.any(String)]]);
  });
});
