import { randomBytes } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { conversations, eventOutbox } from '../../src/db/schema.js';
import { createChatService } from '../../src/resolvers/chat-service.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { drainOutbox, enqueueEvent, publishOutbox, rowsOf } from '../../src/resolvers/outbox.js';
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

/** Writes `n` outbox rows for `channel` in one committed transaction. */
async function enqueue(channel: string, n: number, from = 1) {
  await deps.db.transaction(async (tx) => {
    for (let i = 0; i < n; i++) await enqueueEvent(tx, channel, 'message.read', receipt(from + i));
  });
}

const pending = (channel: string) => deps.db.select().from(eventOutbox).where(eq(eventOutbox.channel, channel));
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
        await enqueueEvent(tx, channel, 'message.read', receipt(1));
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
    await publishOutbox(failing);
    expect(dropped).toEqual(['publish_failed']);
    expect(await pending(channel)).toHaveLength(2);
    await publishOutbox(deps);
    expect(await pending(channel)).toEqual([]);
  });

  it('concurrent publishers on one instance publish every row exactly once', async () => {
    const channel = channelName();
    const feed = recordEvents(deps, [channel]);
    await feed.ready;
    await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        await enqueue(channel, 1, i + 1);
        await publishOutbox(deps);
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
    await publishOutbox(deps);
    expect(await pending(channel)).toEqual([]);
  });

  // PGlite has one connection: no second publisher can hold the lock there.
  it.runIf(process.env.DATABASE_URL)(
    'one publisher at a time across instances: while another holds the lock, the drain leaves the rows',
    async () => {
      const other = await secondInstance();
      if (!other) throw new Error('a second instance needs DATABASE_URL');
      const channel = channelName();
      await enqueue(channel, 1);
      let release = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked = () => {};
      const lockTaken = new Promise<void>((resolve) => {
        locked = resolve;
      });
      const holder = other.db.transaction(async (tx) => {
        const [lock] = rowsOf<{ ok: boolean }>(
          await tx.execute(sql`select pg_try_advisory_xact_lock(7302104222) as ok`),
        );
        expect(lock?.ok).toBe(true);
        locked();
        await held;
      });
      try {
        await lockTaken;
        expect(await drainOutbox(deps, 0)).toBe(0);
        // A publisher waits for the lock up to waitMs, then leaves the rows to the drain.
        await publishOutbox(deps, { waitMs: 50 });
        expect(await pending(channel)).toHaveLength(1);
      } finally {
        release();
        await holder;
        await other.close();
      }
      await publishOutbox(deps);
      expect(await pending(channel)).toEqual([]);
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
