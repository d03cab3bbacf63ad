import { randomBytes } from 'node:crypto';
import { asc, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { eventOutbox, webhookDeliveries, webhookEndpoints } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { createWebhookDispatcher } from '../../src/resolvers/integration/webhooks/dispatcher.js';
import { type ClaimedRow, publishClaimed } from '../../src/resolvers/outbox/claimed.js';
import { enqueueRows, merchantKey, outboxRow, visitorKey } from '../../src/resolvers/outbox/enqueue.js';
import { drainOutbox, keyStates, pendingRows, publishOutbox } from '../../src/resolvers/outbox/publish.js';
import {
  LEASE_MARGIN_MS,
  localRound,
  lockedRound,
  OUTBOX_LEASE_MS,
  publishRows,
} from '../../src/resolvers/outbox/rounds.js';
import { PublicationTooLate } from '../../src/stores/bus.js';
import {
  eventually,
  type Factories,
  meanwhileBeforeNextTransaction,
  recordEvents,
  type TestDeps,
  useTestDeps,
} from '../support/deps.js';

/**
 * The outbox's edges by value (outbox.test.ts has the main path): a key's round under its lock
 * (`lockedRound`, which the embedded publisher never takes, called here on whichever database the
 * run has), a send's own claimed publication, the per-key bookkeeping every chat event passes
 * through (one round at a time, callers joining it, no entry left behind), the waits and their
 * bounds, and what a failure leaves: nothing lost, nothing published twice.
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const channelName = () => `private-outbox-edge-${randomBytes(5).toString('hex')}`;
const keyName = () => `test-edge:${randomBytes(5).toString('hex')}`;
const receipt = (seq: number) => ({
  conversationId: 'c1',
  visitorId: 'v1',
  readerType: 'visitor' as const,
  readerId: 'v1',
  seq,
});
const seqOf = (e: { data: unknown }) => (e.data as { seq: number }).seq;

/** Writes `n` receipts for `channel` under `key` in one committed statement; answers their ids. */
async function enqueue(key: string, channel: string, n: number, from = 1, claimedUntil?: Date) {
  const rows = Array.from({ length: n }, (_, i) => ({
    ...outboxRow(key, channel, 'message.read', receipt(from + i)),
    ...(claimedUntil ? { claimedUntil } : {}),
  }));
  return deps.db.insert(eventOutbox).values(rows).returning();
}

const pending = (key: string) =>
  deps.db.select().from(eventOutbox).where(eq(eventOutbox.orderKey, key)).orderBy(asc(eventOutbox.id));

/** `on` whose bus records every publish (channel, event, seq, notAfter) before passing it on, or fails it with `fail`. */
function recordingBus(on: Deps, fail?: (channel: string) => Error | undefined) {
  const calls: { channel: string; event: string; seq: number | undefined; notAfter: number | undefined }[] = [];
  const bus = {
    ...on.bus,
    publish: async (...args: Parameters<Deps['bus']['publish']>) => {
      const [channel, event, data, opts] = args;
      const error = fail?.(channel);
      if (error) throw error;
      calls.push({ channel, event, seq: (data as { seq?: number }).seq, notAfter: opts?.notAfter });
      return on.bus.publish(...args);
    },
  };
  return { deps: { ...on, bus } as TestDeps, calls };
}

/** `on` whose bus holds each publish on `channel` until the next `release()`; `entered()` resolves once one waits. */
function stallChannel(on: Deps, channel: string) {
  const gates: (() => void)[] = [];
  const waiters: (() => void)[] = [];
  const bus = {
    ...on.bus,
    publish: async (...args: Parameters<Deps['bus']['publish']>) => {
      if (args[0] === channel) {
        await new Promise<void>((resolve) => {
          gates.push(resolve);
          for (const wake of waiters.splice(0)) wake();
        });
      }
      return on.bus.publish(...args);
    },
  };
  return {
    deps: { ...on, bus } as TestDeps,
    entered: () =>
      gates.length > 0 ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(() => resolve())),
    release: () => gates.shift()?.(),
    releaseAll: () => {
      for (const open of gates.splice(0)) open();
    },
  };
}

/** An enabled endpoint of a fresh merchant subscribed to `events`; answers the merchant id and the endpoint id. */
async function endpoint(events: string[], url = 'https://hooks.example.com/parley') {
  const m = await f.merchant();
  const id = `whep_${randomBytes(6).toString('hex')}`;
  await deps.db.insert(webhookEndpoints).values({
    id,
    merchantId: m.merchantId,
    url,
    events,
    secret: 'whsec_test',
    createdAt: new Date(),
  });
  return { merchantId: m.merchantId, endpointId: id };
}

/** A webhook outbox row of `merchantId` under `key` (the shape webhookOutboxRow writes). */
const webhookRow = (key: string, merchantId: string, n: number) => ({
  orderKey: key,
  channel: `webhook:${merchantId}`,
  event: 'conversation.message_left',
  data: { key: `conv-${n}`, body: { type: 'conversation.message_left', n } },
});

const deliveriesOf = (endpointId: string) =>
  deps.db
    .select({ event: webhookDeliveries.event, orderKey: webhookDeliveries.orderKey, body: webhookDeliveries.body })
    .from(webhookDeliveries)
    .where(eq(webhookDeliveries.endpointId, endpointId))
    .orderBy(asc(webhookDeliveries.seq));

describe('Order keys and enqueueing', () => {
  it('a visitor’s key and a merchant’s key name their owner', () => {
    expect(visitorKey('v_1')).toBe('visitor:v_1');
    expect(merchantKey('m_1')).toBe('merchant:m_1');
  });

  it('enqueueRows writes its rows in the given order (their ids follow it), and no rows is no statement', async () => {
    const key = keyName();
    const channel = channelName();
    await deps.db.transaction(async (tx) => {
      await enqueueRows(tx, []);
      await enqueueRows(
        tx,
        [3, 1, 2].map((n) => outboxRow(key, channel, 'message.read', receipt(n))),
      );
    });
    expect((await pending(key)).map((r) => (r.data as { seq: number }).seq)).toEqual([3, 1, 2]);
    expect(await pendingRows(deps, key)).toBe(3);
    expect(await pendingRows(deps, keyName())).toBe(0);
    await publishOutbox(deps, key);
    expect(await pendingRows(deps, key)).toBe(0);
  });
});

describe('A key’s round under its lock (lockedRound)', () => {
  it('publishes the key’s rows in id order, deletes them, and says how many and whether more wait (batches of 200)', async () => {
    const key = keyName();
    const channel = channelName();
    const other = keyName();
    const feed = recordEvents(deps, [channel]);
    await feed.ready;
    await enqueue(key, channel, 201);
    await enqueue(other, channel, 1, 1000);
    expect(await lockedRound(deps, key)).toEqual({ published: 200, more: true });
    expect((await pending(key)).map((r) => (r.data as { seq: number }).seq)).toEqual([201]);
    expect(await lockedRound(deps, key)).toEqual({ published: 1, more: false });
    expect(await lockedRound(deps, key)).toEqual({ published: 0, more: false });
    await eventually(() => feed.of('message.read').length === 201, '201 receipts');
    expect(feed.of('message.read').map(seqOf)).toEqual(Array.from({ length: 201 }, (_, i) => i + 1));
    // Another key's row is not this key's round's business.
    expect(await pendingRows(deps, other)).toBe(1);
    await lockedRound(deps, other);
    feed.stop();
  });

  it('leaves a key claimed by a send (busy), and takes it once the claim has lapsed', async () => {
    const key = keyName();
    const channel = channelName();
    const [row] = await enqueue(key, channel, 1, 1, new Date(Date.now() + 60_000));
    const recorded = recordingBus(deps);
    expect(await lockedRound(recorded.deps, key)).toBe('busy');
    expect(recorded.calls).toEqual([]);
    expect(await pendingRows(deps, key)).toBe(1);
    await deps.db
      .update(eventOutbox)
      .set({ claimedUntil: new Date(Date.now() - 1000) })
      .where(eq(eventOutbox.id, row?.id ?? 0));
    expect(await lockedRound(recorded.deps, key)).toEqual({ published: 1, more: false });
    expect(recorded.calls.map((c) => c.seq)).toEqual([1]);
  });

  it('the embedded round: a send’s claim on the first row holds the rows after it (busy) until it lapses', async () => {
    const key = keyName();
    const channel = channelName();
    const [claimed] = await enqueue(key, channel, 1, 1, new Date(Date.now() + 60_000));
    // A later change of the same key, written while the send’s claim stands.
    await enqueue(key, channel, 1, 2);
    const recorded = recordingBus(deps);
    expect(await localRound(recorded.deps, key)).toBe('busy');
    expect(recorded.calls).toEqual([]);
    await deps.db
      .update(eventOutbox)
      .set({ claimedUntil: new Date(Date.now() - 1000) })
      .where(eq(eventOutbox.id, claimed?.id ?? 0));
    expect(await localRound(recorded.deps, key)).toEqual({ published: 2, more: false });
    expect(recorded.calls.map((c) => c.seq)).toEqual([1, 2]);
    expect(await pendingRows(deps, key)).toBe(0);
  });

  it('a failed publish rolls the round back: it throws, and every row waits for the next round', async () => {
    const key = keyName();
    const channel = channelName();
    await enqueue(key, channel, 2);
    const failing = recordingBus(deps, () => new Error('Connection is closed'));
    await expect(lockedRound(failing.deps, key)).rejects.toThrow('Connection is closed');
    expect((await pending(key)).map((r) => (r.data as { seq: number }).seq)).toEqual([1, 2]);
    const recorded = recordingBus(deps);
    expect(await lockedRound(recorded.deps, key)).toEqual({ published: 2, more: false });
    expect(recorded.calls.map((c) => c.seq)).toEqual([1, 2]);
  });

  it('turns webhook rows into deliveries of their merchant’s endpoints, in order, and never publishes them on the bus', async () => {
    const { merchantId, endpointId } = await endpoint(['conversation.message_left']);
    const key = keyName();
    const channel = channelName();
    await deps.db.insert(eventOutbox).values([webhookRow(key, merchantId, 1)]);
    await enqueue(key, channel, 1);
    await deps.db.insert(eventOutbox).values([webhookRow(key, merchantId, 2)]);
    const recorded = recordingBus(deps);
    expect(await lockedRound(recorded.deps, key)).toEqual({ published: 3, more: false });
    expect(recorded.calls.map((c) => c.channel)).toEqual([channel]);
    // The body as stored (jsonb orders its keys), parsed back.
    expect((await deliveriesOf(endpointId)).map((d) => ({ ...d, body: JSON.parse(d.body) }))).toEqual([
      { event: 'conversation.message_left', orderKey: 'conv-1', body: { type: 'conversation.message_left', n: 1 } },
      { event: 'conversation.message_left', orderKey: 'conv-2', body: { type: 'conversation.message_left', n: 2 } },
    ]);
    expect(await pendingRows(deps, key)).toBe(0);
  });
});

describe('Publishing rows (publishRows)', () => {
  it('sends each channel’s rows in order with the lease’s deadline, and never a webhook row', async () => {
    const a = channelName();
    const b = channelName();
    const recorded = recordingBus(deps);
    const began = Date.now();
    const rows = [
      { id: 1, channel: a, event: 'message.read', data: { seq: 1 } },
      { id: 2, channel: 'webhook:m_nobody', event: 'conversation.message_left', data: { key: 'k', body: {} } },
      { id: 3, channel: b, event: 'message.read', data: { seq: 2 } },
      { id: 4, channel: a, event: 'message.read', data: { seq: 3 } },
    ];
    await publishRows(recorded.deps, rows, began);
    const notAfter = began + OUTBOX_LEASE_MS - LEASE_MARGIN_MS;
    expect(recorded.calls.filter((c) => c.channel === a)).toEqual([
      { channel: a, event: 'message.read', seq: 1, notAfter },
      { channel: a, event: 'message.read', seq: 3, notAfter },
    ]);
    expect(recorded.calls.filter((c) => c.channel === b)).toEqual([
      { channel: b, event: 'message.read', seq: 2, notAfter },
    ]);
    expect(recorded.calls).toHaveLength(3);
  });

  it('a round whose lease is about over sends nothing more: the bus refuses it as too late', async () => {
    const channel = channelName();
    const feed = recordEvents(deps, [channel]);
    await feed.ready;
    // Begun a lease minus its margin ago: the deadline has just passed.
    const began = Date.now() - (OUTBOX_LEASE_MS - LEASE_MARGIN_MS) - 50;
    const rows = [{ id: 1, channel, event: 'message.read', data: receipt(1) }];
    await expect(publishRows(deps, rows, began)).rejects.toBeInstanceOf(PublicationTooLate);
    // Begun just now: sent.
    await publishRows(deps, rows, Date.now());
    await eventually(() => feed.of('message.read').length === 1, 'the receipt');
    expect(feed.events).toHaveLength(1);
    feed.stop();
  });
});

describe('A send’s own publication (publishClaimed)', () => {
  /** Claimed rows as the send's statement writes them, and as publishClaimed gets them. */
  async function claimed(key: string, channel: string, n: number, from = 1): Promise<ClaimedRow[]> {
    const rows = await enqueue(key, channel, n, from, new Date(Date.now() + OUTBOX_LEASE_MS));
    return rows.map((r) => ({ id: r.id, channel: r.channel, event: r.event, data: r.data }));
  }

  it('publishes the rows in order and deletes them; a round waiting on the claim then finds nothing: each row once', async () => {
    const key = keyName();
    const channel = channelName();
    const feed = recordEvents(deps, [channel]);
    await feed.ready;
    const rows = await claimed(key, channel, 3);
    // A round arriving first waits on the claim (busy), and must not publish them a second time.
    const round = publishOutbox(deps, key);
    await publishClaimed(deps, key, rows, Date.now());
    await round;
    expect(await pendingRows(deps, key)).toBe(0);
    await eventually(() => feed.of('message.read').length >= 3, 'three receipts');
    expect(feed.of('message.read').map(seqOf)).toEqual([1, 2, 3]);
    feed.stop();
  });

  it('a failed publish is counted and releases the claim: the next round publishes every row, once', async () => {
    const key = keyName();
    const channel = channelName();
    const rows = await claimed(key, channel, 2);
    const dropped: string[] = [];
    const failing = recordingBus(deps, () => new Error('Connection is closed'));
    await publishClaimed(
      { ...failing.deps, metrics: { ...deps.metrics, eventDropped: (reason: string) => dropped.push(reason) } },
      key,
      rows,
      Date.now(),
    );
    expect(dropped).toEqual(['publish_failed']);
    const left = await pending(key);
    expect(left.map((r) => [(r.data as { seq: number }).seq, r.claimedUntil])).toEqual([
      [1, null],
      [2, null],
    ]);
    const recorded = recordingBus(deps);
    await publishOutbox(recorded.deps, key, { waitMs: 0 });
    expect(recorded.calls.map((c) => c.seq)).toEqual([1, 2]);
    expect(await pendingRows(deps, key)).toBe(0);
  });

  it('webhook rows without an enabled endpoint simply go; with one, they become its deliveries in order', async () => {
    const lonely = await f.merchant();
    const key = keyName();
    const [none] = await deps.db
      .insert(eventOutbox)
      .values({ ...webhookRow(key, lonely.merchantId, 0), claimedUntil: new Date(Date.now() + 5000) })
      .returning();
    const recorded = recordingBus(deps);
    await publishClaimed(recorded.deps, key, [none as ClaimedRow], Date.now());
    expect(recorded.calls).toEqual([]);
    expect(await pendingRows(deps, key)).toBe(0);

    const { merchantId, endpointId } = await endpoint(['conversation.message_left']);
    const hooked = keyName();
    const channel = channelName();
    const until = new Date(Date.now() + 5000);
    const written = await deps.db
      .insert(eventOutbox)
      .values([
        { ...webhookRow(hooked, merchantId, 1), claimedUntil: until },
        { ...outboxRow(hooked, channel, 'message.read', receipt(1)), claimedUntil: until },
        { ...webhookRow(hooked, merchantId, 2), claimedUntil: until },
      ])
      .returning();
    // Handed over out of order: the deliveries still follow the rows' ids.
    const rows = [written[2], written[1], written[0]] as ClaimedRow[];
    await publishClaimed(recorded.deps, hooked, rows, Date.now());
    expect(recorded.calls.map((c) => [c.channel, c.seq])).toEqual([[channel, 1]]);
    expect((await deliveriesOf(endpointId)).map((d) => d.orderKey)).toEqual(['conv-1', 'conv-2']);
    expect(await pendingRows(deps, hooked)).toBe(0);
  });

  it('leaves no per-key bookkeeping behind once its publication is over (memory every send would grow)', async () => {
    const key = keyName();
    const channel = channelName();
    // A database handle of its own: this test sees only its own entries.
    const own = meanwhileBeforeNextTransaction(deps, async () => {});
    await publishClaimed(own, key, await claimed(key, channel, 1), Date.now());
    await eventually(() => keyStates.get(own.db)?.has(key) === false, 'the key’s entry gone');
    expect(keyStates.get(own.db)?.size).toBe(0);
    expect(await pendingRows(deps, key)).toBe(0);
  });

  it('a send on another key leaves the rounds in progress in place: a later caller of their key still waits its turn', async () => {
    const key = keyName();
    const channel = channelName();
    const feed = recordEvents(deps, [channel]);
    await feed.ready;
    const stall = stallChannel(deps, channel);
    try {
      await enqueue(key, channel, 1, 1);
      const first = publishOutbox(stall.deps, key);
      await stall.entered();
      const other = keyName();
      await publishClaimed(deps, other, await claimed(other, channelName(), 1), Date.now());
      await enqueue(key, channel, 1, 2);
      const second = publishOutbox(deps, key);
      stall.release();
      await Promise.all([first, second]);
      await eventually(() => feed.of('message.read').length >= 2, 'both receipts');
      expect(feed.of('message.read').map(seqOf)).toEqual([1, 2]);
    } finally {
      stall.releaseAll();
      feed.stop();
    }
  });
});

describe('Deliveries a publication creates wake this instance’s webhook dispatcher, and only those', () => {
  /**
   * Deps of their own with a dispatcher that never claims (no room) nor polls: the wake-ups the
   * publication gives it are counted, and nothing is sent anywhere.
   */
  async function withDispatcher(run: (own: TestDeps) => Promise<void>): Promise<number> {
    const own = { ...deps } as TestDeps;
    const dispatcher = createWebhookDispatcher(own, { pollMs: 3_600_000, maxInFlight: 0 });
    dispatcher.start();
    let nudges = 0;
    dispatcher.nudge = () => {
      nudges++;
    };
    try {
      await run(own);
      return nudges;
    } finally {
      await dispatcher.stop();
    }
  }

  it('after a round under the key’s lock', async () => {
    const { merchantId, endpointId } = await endpoint(['conversation.message_left'], 'http://127.0.0.1:9/hook');
    const key = keyName();
    await deps.db.insert(eventOutbox).values([webhookRow(key, merchantId, 1)]);
    expect(
      await withDispatcher(async (own) => expect(await lockedRound(own, key)).toEqual({ published: 1, more: false })),
    ).toBe(1);
    expect(await deliveriesOf(endpointId)).toHaveLength(1);
    // A round that created none wakes nothing.
    await enqueue(key, channelName(), 1);
    expect(
      await withDispatcher(async (own) => expect(await lockedRound(own, key)).toEqual({ published: 1, more: false })),
    ).toBe(0);
  });

  it('after a send’s own publication', async () => {
    const { merchantId, endpointId } = await endpoint(['conversation.message_left'], 'http://127.0.0.1:9/hook');
    const key = keyName();
    const until = new Date(Date.now() + 5000);
    const [row] = await deps.db
      .insert(eventOutbox)
      .values({ ...webhookRow(key, merchantId, 1), claimedUntil: until })
      .returning();
    expect(await withDispatcher((own) => publishClaimed(own, key, [row as ClaimedRow], Date.now()))).toBe(1);
    expect(await deliveriesOf(endpointId)).toHaveLength(1);
    // The merchant has an endpoint, but not for this event: the row goes, no delivery, no wake-up.
    const other = await endpoint(['message.created'], 'http://127.0.0.1:9/hook');
    const [unwanted] = await deps.db
      .insert(eventOutbox)
      .values({ ...webhookRow(key, other.merchantId, 2), claimedUntil: until })
      .returning();
    expect(await withDispatcher((own) => publishClaimed(own, key, [unwanted as ClaimedRow], Date.now()))).toBe(0);
    expect(await deliveriesOf(other.endpointId)).toEqual([]);
    expect(await pendingRows(deps, key)).toBe(0);
  });
});

describe('One round of a key at a time (publishOutbox)', () => {
  it('several keys at once, a key named twice counted once: every row of each goes out', async () => {
    const a = keyName();
    const b = keyName();
    const channel = channelName();
    await enqueue(a, channel, 2);
    await enqueue(b, channel, 1, 10);
    const recorded = recordingBus(deps);
    await publishOutbox(recorded.deps, [a, b, a]);
    expect(recorded.calls.map((c) => c.seq).sort((x, y) => (x ?? 0) - (y ?? 0))).toEqual([1, 2, 10]);
    expect(await pendingRows(deps, a)).toBe(0);
    expect(await pendingRows(deps, b)).toBe(0);
  });

  it('callers arriving while a round runs share one round after it; a caller after that waits for it, and no row goes twice', async () => {
    const key = keyName();
    const channel = channelName();
    const feed = recordEvents(deps, [channel]);
    await feed.ready;
    // A handle of its own, counting the rounds (each reads the key's rows once).
    // (a round on PostgreSQL is one transaction; on the embedded database, one read then a delete).
    const roundStart = deps.database.kind === 'postgres' ? 'transaction' : 'select';
    let reads = 0;
    const counted = new Proxy(deps.db, {
      get(target, prop) {
        if (prop === roundStart) reads++;
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const stall = stallChannel({ ...deps, db: counted } as Deps, channel);
    try {
      await enqueue(key, channel, 1, 1);
      const first = publishOutbox(stall.deps, key);
      await stall.entered();
      await enqueue(key, channel, 1, 2);
      const joined = Array.from({ length: 5 }, () => publishOutbox(stall.deps, key));
      stall.release();
      await first;
      // The joined round has taken row 2 and is publishing it; a caller now must wait for it.
      await stall.entered();
      const after = publishOutbox({ ...deps, db: counted } as Deps, key);
      stall.release();
      await Promise.all([...joined, after]);
      expect(reads).toBe(3);
      expect(await pendingRows(deps, key)).toBe(0);
      await eventually(() => feed.of('message.read').length >= 2, 'both receipts');
      expect(feed.of('message.read').map(seqOf)).toEqual([1, 2]);
      await eventually(() => keyStates.get(counted)?.has(key) === false, 'the key’s entry gone');
    } finally {
      stall.releaseAll();
      feed.stop();
    }
  });

  it('a caller that finds the key claimed waits up to its waitMs (2 s by default), then leaves the rows', async () => {
    const key = keyName();
    const channel = channelName();
    await enqueue(key, channel, 1, 1, new Date(Date.now() + 60_000));
    const recorded = recordingBus(deps);
    let since = Date.now();
    await publishOutbox(recorded.deps, key, { waitMs: 100 });
    expect(Date.now() - since).toBeGreaterThanOrEqual(100);
    since = Date.now();
    await publishOutbox(recorded.deps, key);
    expect(Date.now() - since).toBeGreaterThanOrEqual(2000);
    expect(recorded.calls).toEqual([]);
    expect(await pendingRows(deps, key)).toBe(1);
    // Every pending key, without waiting: a claimed key is tried once, not again and again.
    await publishOutbox(recorded.deps, undefined, { waitMs: 0 });
    // The drain, too, tries it once and moves on.
    expect(await drainOutbox(recorded.deps, 0)).toBeGreaterThanOrEqual(0);
    expect(recorded.calls.filter((c) => c.channel === channel)).toEqual([]);
    await deps.db.delete(eventOutbox).where(eq(eventOutbox.orderKey, key));
  });
});

describe('The drain', () => {
  it('with no minimum age publishes even rows stamped after its clock; with one, only rows older than it', async () => {
    const key = keyName();
    const channel = channelName();
    await enqueue(key, channel, 1);
    // A clock a minute behind the database's: the rows look a minute younger than new.
    const behind = { ...deps, now: () => Date.now() - 60_000 };
    expect(await drainOutbox(behind, 1)).toBeGreaterThanOrEqual(0);
    expect(await pendingRows(deps, key)).toBe(1);
    expect(await drainOutbox(behind, 0)).toBeGreaterThanOrEqual(1);
    expect(await pendingRows(deps, key)).toBe(0);
  });

  it('counts exactly what it published, a key of exactly one batch included', async () => {
    const key = keyName();
    const channel = channelName();
    await enqueue(key, channel, 200);
    const published = await drainOutbox(deps, 0);
    // At least: the worker's database is shared with other files, whose rows a drain takes too.
    expect(Number.isInteger(published)).toBe(true);
    expect(published).toBeGreaterThanOrEqual(200);
    expect(await pendingRows(deps, key)).toBe(0);
  });
});
