import { randomBytes } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { conversations, eventOutbox } from '../../src/db/schema.js';
import { createChatService } from '../../src/resolvers/chat-service.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { enqueueEvent, rowsOf } from '../../src/resolvers/outbox/enqueue.js';
import { drainOutbox, publishOutbox } from '../../src/resolvers/outbox/publish.js';
import { OUTBOX_LEASE_MS, OUTBOX_LOCK_SPACE } from '../../src/resolvers/outbox/rounds.js';
import {
  eventually,
  type Factories,
  recordEvents,
  secondInstance,
  type TestDeps,
  useTestDeps,
} from '../support/deps.js';

/**
 * Publish after commit (docs/chat.md, ARCHITECTURE.md "outbox"): events are written in the
 * transaction that changes the rows, published in order once committed, and nothing is lost
 * when a publish fails; the chat service of every instance drains what is left.
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const channelName = () => `private-outbox-test-${randomBytes(5).toString('hex')}`;
const receipt = (seq: number) => ({
  conversationId: 'c1',
  visitorId: 'v1',
  readerType: 'visitor' as const,
  readerId: 'v1',
  seq,
});

/** The order key a test channel's rows are written under (one key per channel here). */
const keyOf = (channel: string) => `test:${channel}`;

/** Writes `n` outbox rows for `channel` (under its key) in one committed transaction. */
async function enqueue(channel: string, n: number, from = 1) {
  await deps.db.transaction(async (tx) => {
    for (let i = 0; i < n; i++) await enqueueEvent(tx, keyOf(channel), channel, 'message.read', receipt(from + i));
  });
}

const pending = (channel: string) =>
  deps.db.select().from(eventOutbox).where(eq(eventOutbox.channel, channel)).orderBy(eventOutbox.id);
/** The deps as seen `ms` later (the drain publishes rows older than its minimum age). */
const later = (ms: number) => ({ ...deps, now: () => Date.now() + ms });

describe('The outbox', () => {
  it('stores the wire payload; publishOutbox publishes committed rows in order and deletes them', async () => {
    const channel = channelName();
    const feed = recordEvents(deps, [channel]);
    await feed.ready;
    await enqueue(channel, 3);
    const [row] = await pending(channel);
    expect(row).toMatchObject({
      orderKey: keyOf(channel),
      event: 'message.read',
      data: { conversation_id: 'c1', visitor_id: 'v1', reader_type: 'visitor', reader_id: 'v1', seq: 1 },
    });
    await publishOutbox(deps);
    expect(await pending(channel)).toEqual([]);
    await eventually(() => feed.of('message.read').length === 3, 'three receipts');
    expect(feed.of('message.read').map((e) => (e.data as { seq: number }).seq)).toEqual([1, 2, 3]);
    feed.stop();
  });

  it('a transaction that rolls back leaves no event', async () => {
    const channel = channelName();
    await deps.db
      .transaction(async (tx) => {
        await enqueueEvent(tx, keyOf(channel), channel, 'message.read', receipt(1));
        throw new Error('rolled back');
      })
      .catch(() => undefined);
    expect(await pending(channel)).toEqual([]);
  });

  it('a failed publish is counted, leaves the rows, and does not fail the caller', async () => {
    const channel = channelName();
    await enqueue(channel, 2);
    const dropped: string[] = [];
    const failing = {
      ...deps,
      bus: {
        ...deps.bus,
        publish: async () => {
          throw new Error('Connection is closed');
        },
      },
      metrics: { ...deps.metrics, eventDropped: (reason: string) => dropped.push(reason) },
    } as typeof deps;
    await publishOutbox(failing, keyOf(channel));
    expect(dropped).toEqual(['publish_failed']);
    expect(await pending(channel)).toHaveLength(2);
    await publishOutbox(deps, keyOf(channel));
    expect(await pending(channel)).toEqual([]);
  });

  it('concurrent publishers on one instance publish every row exactly once', async () => {
    const channel = channelName();
    const feed = recordEvents(deps, [channel]);
    await feed.ready;
    await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        await enqueue(channel, 1, i + 1);
        await publishOutbox(deps, keyOf(channel));
      }),
    );
    // Every caller returns once its own row is out.
    expect(await pending(channel)).toEqual([]);
    await eventually(() => feed.of('message.read').length >= 10, 'ten receipts');
    const seqs = feed.of('message.read').map((e) => (e.data as { seq: number }).seq);
    expect([...seqs].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(seqs).toHaveLength(10);
    feed.stop();
  });

  it('the drain publishes only rows older than its minimum age (a writer in progress publishes its own)', async () => {
    const channel = channelName();
    await enqueue(channel, 2);
    // Its own rows are what count: the worker's database is shared with other files.
    await drainOutbox(deps, 60_000);
    expect(await pending(channel)).toHaveLength(2);
    expect(await drainOutbox(later(61_000), 60_000)).toBeGreaterThanOrEqual(2);
    expect(await pending(channel)).toEqual([]);
  });

  it('the drain goes on past a batch of 200 rows, in order', async () => {
    const channel = channelName();
    const feed = recordEvents(deps, [channel]);
    await feed.ready;
    await enqueue(channel, 201);
    // At least: the worker's database is shared with other files, whose rows a drain takes too.
    expect(await drainOutbox(deps, 0)).toBeGreaterThanOrEqual(201);
    expect(await pending(channel)).toEqual([]);
    await eventually(() => feed.of('message.read').length === 201, '201 receipts');
    const seqs = feed.of('message.read').map((e) => (e.data as { seq: number }).seq);
    expect(seqs).toEqual(Array.from({ length: 201 }, (_, i) => i + 1));
    feed.stop();
  });

  it('publishOutbox, too, goes on past a batch', async () => {
    const channel = channelName();
    await enqueue(channel, 201);
    await publishOutbox(deps, keyOf(channel));
    expect(await pending(channel)).toEqual([]);
  });

  /** `deps` (or another instance) whose bus holds every publish on `channel` until `release()`; `entered` once one waits. */
  function stallChannel(on: TestDeps, channel: string) {
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered = () => {};
    const waiting = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const bus = {
      ...on.bus,
      publish: async (...args: Parameters<TestDeps['bus']['publish']>) => {
        if (args[0] === channel) {
          entered();
          await gate;
        }
        return on.bus.publish(...args);
      },
    };
    return { deps: { ...on, bus } as TestDeps, release, entered: waiting };
  }

  it('a stalled key does not delay the others: while its publication hangs, another key goes out, and it follows in order once it moves', async () => {
    const a = channelName();
    const b = channelName();
    const feed = recordEvents(deps, [a, b]);
    await feed.ready;
    const stall = stallChannel(deps, a);
    try {
      await enqueue(a, 2);
      const first = publishOutbox(stall.deps, keyOf(a));
      await stall.entered;
      await enqueue(b, 3);
      await publishOutbox(stall.deps, keyOf(b));
      expect(await pending(b)).toEqual([]);
      await eventually(() => feed.of('message.read', b).length === 3, "the other key's events");
      expect(feed.of('message.read', a)).toEqual([]);
      stall.release();
      await first;
      await eventually(() => feed.of('message.read', a).length === 2, "the stalled key's events");
      expect(feed.of('message.read', a).map((e) => (e.data as { seq: number }).seq)).toEqual([1, 2]);
    } finally {
      stall.release();
      feed.stop();
    }
  });

  // Two instances need a database both can open: PostgreSQL (PGlite is one process).
  it.runIf(process.env.DATABASE_URL)(
    'an instance killed mid-publication: the others never wait for it, and another instance publishes its rows',
    async () => {
      const other = await secondInstance();
      if (!other) throw new Error('a second instance needs DATABASE_URL');
      const a = channelName();
      const b = channelName();
      const feed = recordEvents(deps, [a, b]);
      await feed.ready;
      const stall = stallChannel(other, a);
      try {
        await enqueue(a, 2);
        const hung = publishOutbox(stall.deps, keyOf(a));
        await stall.entered; // the other instance holds key a and is publishing its rows
        await enqueue(b, 1);
        await publishOutbox(deps, keyOf(b));
        await eventually(() => feed.of('message.read', b).length === 1, "the other key's event");
        // Key a is held elsewhere: this instance's publisher leaves it after waitMs, the rows kept.
        await publishOutbox(deps, keyOf(a), { waitMs: 50 });
        expect(await pending(a)).toHaveLength(2);
        expect(await drainOutbox(deps, 0)).toBe(0);
        // The holder dies: its connection goes, as a killed process's does.
        const killed = rowsOf<{ ok: boolean }>(
          await deps.db.execute(sql`
            select pg_terminate_backend(pid) as ok from pg_locks
            where locktype = 'advisory' and classid = ${OUTBOX_LOCK_SPACE} and objsubid = 2
              and objid::bigint = (hashtext(${keyOf(a)})::bigint + 4294967296) % 4294967296`),
        );
        expect(killed.map((k) => k.ok)).toEqual([true]);
        await eventually(async () => (await drainOutbox(deps, 0)) >= 2 || (await pending(a)).length === 0, 'drained');
        await eventually(() => feed.of('message.read', a).length === 2, "the dead instance's rows, published here");
        expect(feed.of('message.read', a).map((e) => (e.data as { seq: number }).seq)).toEqual([1, 2]);
        expect(await pending(a)).toEqual([]);
        stall.release();
        await hung; // its commit fails: counted, nothing thrown
      } finally {
        stall.release();
        feed.stop();
        await other.close();
      }
    },
  );

  it.runIf(process.env.DATABASE_URL)(
    'a stalled instance holds a key no longer than its lease: another instance publishes the rows, and the stalled one sends nothing more when it wakes',
    async () => {
      const other = await secondInstance();
      if (!other) throw new Error('a second instance needs DATABASE_URL');
      const a = channelName();
      const feed = recordEvents(deps, [a]);
      await feed.ready;
      const stall = stallChannel(other, a);
      try {
        await enqueue(a, 2);
        const stalled = publishOutbox(stall.deps, keyOf(a));
        await stall.entered;
        const since = Date.now();
        // PostgreSQL ends the session idle in its transaction after OUTBOX_LEASE_MS: the rows come back.
        await eventually(
          async () => {
            await drainOutbox(deps, 0);
            return feed.of('message.read', a).length === 2;
          },
          'the stalled instance’s rows published by this one',
          OUTBOX_LEASE_MS * 4,
        );
        expect(Date.now() - since).toBeGreaterThanOrEqual(OUTBOX_LEASE_MS - 1000);
        expect(feed.of('message.read', a).map((e) => (e.data as { seq: number }).seq)).toEqual([1, 2]);
        stall.release();
        await stalled;
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(feed.of('message.read', a)).toHaveLength(2);
      } finally {
        stall.release();
        feed.stop();
        await other.close();
      }
    },
  );

  it('rowsOf reads both drivers’ answers', () => {
    expect(rowsOf([{ a: 1 }])).toEqual([{ a: 1 }]);
    expect(rowsOf({ rows: [{ a: 2 }] })).toEqual([{ a: 2 }]);
    expect(rowsOf({})).toEqual([]);
  });
});

describe('The chat service', () => {
  it('drains the outbox, closes idle conversations and serves the queue by itself', async () => {
    const m = await f.merchant();
    await deps.db.execute(sql`update merchants set idle_close_minutes = 1 where id = ${m.merchantId}`);
    const idleVisitor = await f.visitor(m);
    const idle = await assignAgent(deps, idleVisitor);
    expect(idle.state).toBe('queued');
    // Its last activity two minutes ago.
    await deps.db
      .update(conversations)
      .set({ timestamp: Math.floor(Date.now() / 1000) - 120 })
      .where(eq(conversations.id, idle.conversationId));
    const channel = channelName();
    await enqueue(channel, 1);
    await deps.db
      .update(eventOutbox)
      .set({ createdAt: new Date(Date.now() - 5000) })
      .where(eq(eventOutbox.channel, channel));

    const service = createChatService(deps, { outboxDrainMs: 20, idleSweepMs: 20, queueRetryMs: 20 });
    service.start();
    service.start(); // a second start adds no timers
    try {
      await eventually(async () => (await pending(channel)).length === 0, 'the outbox drained');
      await eventually(
        async () =>
          (await deps.db.select().from(conversations).where(eq(conversations.id, idle.conversationId)))[0]?.state ===
          'closed',
        'the idle conversation closed',
      );
      // An agent online without the drain a socket's arrival triggers: the periodic retry serves the queue.
      const waiting = await assignAgent(deps, await f.visitor(m));
      expect(waiting.state).toBe('queued');
      const agent = await f.agent(m);
      await deps.presence.touch(agent.agentId, 'test-connection', Date.now() + 60_000);
      await deps.presence.settle(agent.agentId, m.bid, Date.now(), 'online');
      await eventually(
        async () =>
          (await deps.db.select().from(conversations).where(eq(conversations.id, waiting.conversationId)))[0]?.state ===
          'active',
        'the queued conversation served',
      );
    } finally {
      await service.stop();
    }
  });
});
