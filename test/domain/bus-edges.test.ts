import { randomBytes } from 'node:crypto';
import { getEventListeners } from 'node:events';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import {
  type ChannelEvent,
  createBus,
  type EventBus,
  type HistoryBackend,
  type LocalHubs,
  PublicationTooLate,
  SlowConsumerError,
} from '../../src/stores/bus.js';
import { memoryEventBus } from '../../src/stores/bus-memory.js';
import { redisEventBus } from '../../src/stores/bus-redis.js';
import { compareIds } from '../../src/stores/event-id.js';
import { connectRedis, redisReady } from '../../src/stores/redis.js';
import { describeWhen } from '../support/required.js';
import { useTestRedis } from '../support/test-redis.js';

/**
 * The event bus's edges by value (bus.test.ts has the `since` contract): every chat event passes
 * through it, so a defect here reaches every subscriber. Checked: the one contract both stores
 * hold (replay from any position, page and history bounds, deadlines, queue limits and their
 * exact errors), the shared algorithm over a scripted store (one store listener per channel, gone
 * with its last subscriber — memory an anonymous client could otherwise grow — failures of the
 * store, the reads kept for a reconnect storm and their bounds), and what each store adds (the
 * memory store's ids, floor and expiry; the Redis store's names, TTLs, catch-up after a lost
 * subscriber connection and its own failures).
 */

const channelName = () => `bus-edge-${randomBytes(4).toString('hex')}`;

async function next(sub: AsyncGenerator<ChannelEvent>, what: string): Promise<ChannelEvent> {
  const result = await sub.next();
  if (result.done) throw new Error(`the subscription ended before ${what}`);
  return result.value;
}

/** Every event of a subscription that ends by itself (replayOnly). */
async function all(sub: AsyncGenerator<ChannelEvent>): Promise<ChannelEvent[]> {
  const events: ChannelEvent[] = [];
  for await (const event of sub) events.push(event);
  return events;
}

/** The error a subscription's next step throws (undefined when it yields or ends). */
const failureOf = (sub: AsyncGenerator<ChannelEvent>) =>
  sub.next().then(
    () => undefined,
    (error: unknown) => error,
  );

type MakeBus = (opts: { historySize: number; maxQueued?: number; onHistoryRead?: () => void }) => Promise<{
  bus: EventBus;
  close(): Promise<void>;
}>;

/** What both stores answer alike. */
function storeContract(makeBus: MakeBus) {
  const opened: { close(): Promise<void> }[] = [];
  const open: MakeBus = async (opts) => {
    const made = await makeBus(opts);
    opened.push(made);
    return made;
  };
  afterAll(async () => {
    await Promise.all(opened.map((made) => made.close()));
  });

  it('a replay from any position gives exactly the kept events after it, in order', async () => {
    const { bus } = await open({ historySize: 100 });
    const name = channelName();
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push((await bus.publish(name, `e${i}`, { i })).id);
    for (const [i, since] of ids.entries()) {
      const replayed = await all(bus.subscribe(name, { since, replayOnly: true }));
      expect(replayed.map((e) => e.id)).toEqual(ids.slice(i + 1));
    }
    // From between two events (a later sequence number of the same millisecond as one).
    const [ms, seq] = (ids[4] as string).split('-');
    const between = `${ms}-${Number(seq) + 1}`;
    const expected = ids.filter((id) => compareIds(id, between) > 0);
    expect((await all(bus.subscribe(name, { since: between, replayOnly: true }))).map((e) => e.id)).toEqual(expected);
  });

  it('a replay reads the store in pages of 100: a full page asks for the next one, a short one ends it', async () => {
    const reads = { count: 0 };
    const { bus } = await open({ historySize: 1000, onHistoryRead: () => reads.count++ });
    const name = channelName();
    const start = await bus.publish(name, 'start', {});
    const ids: string[] = [];
    for (let i = 0; i < 250; i++) ids.push((await bus.publish(name, `e${i}`, {})).id);
    const readsOf = async (since: string) => {
      const before = reads.count;
      const replayed = await all(bus.subscribe(name, { since, replayOnly: true }));
      return { n: replayed.length, reads: reads.count - before };
    };
    expect(await readsOf(ids[149] as string)).toEqual({ n: 100, reads: 2 });
    expect(await readsOf(ids[150] as string)).toEqual({ n: 99, reads: 1 });
    expect(await readsOf(ids[148] as string)).toEqual({ n: 101, reads: 2 });
    expect(await readsOf(start.id)).toEqual({ n: 250, reads: 3 });
  });

  it('a history exactly full loses nothing; one more event drops the oldest and a resume from before it starts with history.gap', async () => {
    const { bus } = await open({ historySize: 3 });
    const name = channelName();
    const start = await bus.publish(name, 'start', {});
    const kept = [await bus.publish(name, 'k1', {}), await bus.publish(name, 'k2', {})];
    // start, k1, k2: three kept, nothing dropped.
    const before = await all(bus.subscribe(name, { since: '1-0', replayOnly: true }));
    expect(before.map((e) => e.event)).toEqual(['history.gap', 'start', 'k1', 'k2']);
    expect((await all(bus.subscribe(name, { since: start.id, replayOnly: true }))).map((e) => e.id)).toEqual(
      kept.map((e) => e.id),
    );
    const k3 = await bus.publish(name, 'k3', {});
    // start dropped: a resume from it lost nothing (it had start); one from before lost start.
    expect((await all(bus.subscribe(name, { since: start.id, replayOnly: true }))).map((e) => e.event)).toEqual([
      'k1',
      'k2',
      'k3',
    ]);
    const [ms] = start.id.split('-');
    const justBefore = `${Number(ms) - 1}-0`;
    expect(await all(bus.subscribe(name, { since: justBefore, replayOnly: true }))).toEqual([
      { id: justBefore, channel: name, event: 'history.gap', data: { since: justBefore }, at: expect.any(String) },
      ...kept,
      k3,
    ]);
  });

  it('a fresh channel has one position, the same for every subscriber, from which nothing is lost', async () => {
    const { bus } = await open({ historySize: 2 });
    const name = channelName();
    const [first] = await all(bus.subscribe(name, { replayOnly: true }));
    const [again] = await all(bus.subscribe(name, { replayOnly: true }));
    expect(first).toMatchObject({ channel: name, event: 'subscribed', data: {} });
    expect(again?.id).toBe(first?.id);
    const event = await bus.publish(name, 'first', { n: 1 });
    expect(compareIds(event.id, first?.id as string)).toBeGreaterThan(0);
    expect(await all(bus.subscribe(name, { since: first?.id as string, replayOnly: true }))).toEqual([event]);
    // Full (2): nothing lost yet. Past the history's size the oldest goes, and only a resume
    // from before it lost anything.
    const second = await bus.publish(name, 'second', {});
    expect(await all(bus.subscribe(name, { since: first?.id as string, replayOnly: true }))).toEqual([event, second]);
    const more = [second, await bus.publish(name, 'third', {})];
    expect(await all(bus.subscribe(name, { since: event.id, replayOnly: true }))).toEqual(more);
    expect(
      (await all(bus.subscribe(name, { since: first?.id as string, replayOnly: true }))).map((e) => e.event),
    ).toEqual(['history.gap', 'second', 'third']);
  });

  it('a publication past its notAfter is refused with PublicationTooLate, and nothing is kept or delivered', async () => {
    const { bus } = await open({ historySize: 10 });
    const name = channelName();
    const [position] = await all(bus.subscribe(name, { replayOnly: true }));
    const error = await bus.publish(name, 'late', {}, { notAfter: Date.now() - 1 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PublicationTooLate);
    expect(error).toMatchObject({
      name: 'PublicationTooLate',
      channel: name,
      message: `publication on ${name} refused: past its deadline`,
    });
    const onTime = await bus.publish(name, 'on.time', {}, { notAfter: Date.now() + 60_000 });
    expect(await all(bus.subscribe(name, { since: position?.id as string, replayOnly: true }))).toEqual([onTime]);
  });

  it('a publication at its notAfter exactly is still in time', async () => {
    const { bus } = await open({ historySize: 10 });
    const name = channelName();
    const now = Date.now();
    const clock = vi.spyOn(Date, 'now').mockReturnValue(now);
    try {
      // The bus refuses synchronously or not at all (the store's own work is not under the fake clock).
      const published = bus.publish(name, 'edge', {}, { notAfter: now });
      clock.mockRestore();
      expect((await published).event).toBe('edge');
    } finally {
      clock.mockRestore();
    }
  });

  it('500 undelivered live events are held by default; the 501st ends the subscription with its exact error', async () => {
    const { bus } = await open({ historySize: 10 });
    const name = channelName();
    const controller = new AbortController();
    const held = bus.subscribe(name, { signal: controller.signal });
    const over = bus.subscribe(name, { signal: controller.signal });
    try {
      await next(held, 'subscribed');
      await next(over, 'subscribed');
      const ids: string[] = [];
      for (let i = 0; i < 500; i++) ids.push((await bus.publish(name, 'e', { i })).id);
      // Both queues hold 500; one more event for `over` only after `held` was drained.
      const drained: string[] = [];
      for (let i = 0; i < 500; i++) drained.push((await next(held, `event ${i}`)).id);
      expect(drained).toEqual(ids);
      const last = await bus.publish(name, 'e', { i: 500 });
      expect((await next(held, 'the 501st')).id).toBe(last.id);
      const error = await failureOf(over);
      expect(error).toBeInstanceOf(SlowConsumerError);
      expect(error).toMatchObject({
        name: 'SlowConsumerError',
        code: 'RATE_LIMITED',
        channel: name,
        message: 'Too many undelivered events: this consumer is too slow; resume with since',
      });
    } finally {
      controller.abort();
      await Promise.all([held.return(undefined), over.return(undefined)]);
    }
  });

  it('the bus’s own maxQueued applies to a subscription that names none; a zero limit ends a waiting consumer at the first event', async () => {
    const { bus } = await open({ historySize: 10, maxQueued: 2 });
    const name = channelName();
    const controller = new AbortController();
    const slow = bus.subscribe(name, { signal: controller.signal });
    const eager = bus.subscribe(name, { signal: controller.signal, maxQueued: 0 });
    const watcher = bus.subscribe(name, { signal: controller.signal, maxQueued: 100 });
    try {
      await next(slow, 'subscribed');
      await next(eager, 'subscribed');
      await next(watcher, 'subscribed');
      // The eager consumer waits: the first event overflows its empty queue and must wake it.
      const failed = failureOf(eager);
      const events = [await bus.publish(name, 'a', {}), await bus.publish(name, 'b', {})];
      expect(await failed).toBeInstanceOf(SlowConsumerError);
      const c = await bus.publish(name, 'c', {});
      // Every listener of a channel hears an event at once: once the watcher has c, so has `slow`.
      while ((await next(watcher, 'c')).id !== c.id);
      expect(await failureOf(slow)).toBeInstanceOf(SlowConsumerError);
      // Two behind, under the bus's limit of 2: delivered.
      const patient = bus.subscribe(name, { signal: controller.signal });
      await next(patient, 'subscribed');
      const two = [await bus.publish(name, 'd', {}), await bus.publish(name, 'e', {})];
      expect([(await next(patient, 'd')).id, (await next(patient, 'e')).id]).toEqual(two.map((e) => e.id));
      expect(events).toHaveLength(2);
      await patient.return(undefined);
    } finally {
      controller.abort();
      await Promise.all([slow.return(undefined), eager.return(undefined), watcher.return(undefined)]);
    }
  });

  it('a subscription whose signal is already aborted replays nothing, and an ended one leaves no listener on its signal', async () => {
    const { bus } = await open({ historySize: 10 });
    const name = channelName();
    const start = await bus.publish(name, 'start', {});
    await bus.publish(name, 'missed', {});
    const aborted = new AbortController();
    aborted.abort();
    expect(await all(bus.subscribe(name, { since: start.id, signal: aborted.signal }))).toEqual([]);
    const controller = new AbortController();
    const sub = bus.subscribe(name, { signal: controller.signal });
    await next(sub, 'subscribed');
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    await sub.return(undefined);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('an ephemeral event takes a position in the channel’s order but is never replayed', async () => {
    const { bus } = await open({ historySize: 10 });
    const name = channelName();
    const start = await bus.publish(name, 'start', {});
    const typing = await bus.publish(name, 'typing', {}, { ephemeral: true });
    const real = await bus.publish(name, 'real', {}, { ephemeral: false });
    expect(compareIds(typing.id, start.id)).toBeGreaterThan(0);
    expect(compareIds(real.id, typing.id)).toBeGreaterThan(0);
    expect(await all(bus.subscribe(name, { since: start.id, replayOnly: true }))).toEqual([real]);
  });
}

describe('event bus in process: the stores’ contract', () => {
  storeContract(async ({ historySize, maxQueued, onHistoryRead }) => {
    const bus = memoryEventBus({ historySize, maxQueued, onHistoryRead });
    return { bus, close: () => bus.close() };
  });
});

// On REDIS_URL, or else on a private redis-server when the machine has one.
const testRedis = useTestRedis();
const redisUrl = testRedis.url;

/** A Redis bus under a prefix of its own; `close` removes its keys and connections. */
async function redisBus(opts: {
  historySize: number;
  maxQueued?: number;
  onHistoryRead?: () => void;
  historyTtlSeconds?: number;
  subscriber?: Redis;
}) {
  const prefix = `parley-test:${randomBytes(6).toString('hex')}:`;
  const redis = connectRedis(redisUrl(), { keyPrefix: prefix });
  const subscriber = opts.subscriber ?? connectRedis(redisUrl());
  await Promise.all([redisReady(redis), redisReady(subscriber)]);
  const bus = redisEventBus({ ...opts, redis, subscriber, prefix });
  return {
    bus,
    redis,
    subscriber,
    prefix,
    async close() {
      await bus.close();
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length) await redis.del(...keys.map((k) => k.slice(prefix.length)));
      if (!opts.subscriber) subscriber.disconnect();
      redis.disconnect();
    },
  };
}

describeWhen(
  testRedis.available,
  'REQUIRE_SERVICES',
  'event bus on Redis: the stores’ contract and the Redis store’s own edges',
  'REDIS_URL is unset and redis-server is not installed',
  () => {
    describe('the contract', () => {
      storeContract((opts) => redisBus({ ...opts, historyTtlSeconds: 60 }));
    });

    describe('the Redis store', () => {
      const opened: { close(): Promise<void> }[] = [];
      const open = async (opts: Parameters<typeof redisBus>[0]) => {
        const made = await redisBus(opts);
        opened.push(made);
        return made;
      };
      afterAll(async () => {
        await Promise.all(opened.map((made) => made.close()));
      });

      /** Subscribers of a pub/sub topic, read on a plain connection. */
      const numsub = async (redis: Redis, topic: string) => {
        const [, n] = (await redis.pubsub('NUMSUB', topic)) as [string, number];
        return Number(n);
      };

      it('listens on its prefixed topic while a subscriber is there, and unsubscribes once the last one leaves', async () => {
        const { bus, redis, prefix } = await open({ historySize: 10, historyTtlSeconds: 60 });
        const name = channelName();
        const topic = `${prefix}events:${name}`;
        const controller = new AbortController();
        const a = bus.subscribe(name, { signal: controller.signal });
        const b = bus.subscribe(name, { signal: controller.signal });
        await next(a, 'subscribed');
        await next(b, 'subscribed');
        expect(await numsub(redis, topic)).toBe(1);
        await a.return(undefined);
        expect(await numsub(redis, topic)).toBe(1);
        await b.return(undefined);
        await vi.waitFor(async () => expect(await numsub(redis, topic)).toBe(0));
        // A replay alone never subscribes.
        await all(bus.subscribe(name, { replayOnly: true }));
        expect(await numsub(redis, topic)).toBe(0);
      });

      it('keeps a channel in a stream and its floor under the client’s prefix, both for historyTtlSeconds', async () => {
        const { bus, redis } = await open({ historySize: 10, historyTtlSeconds: 60 });
        const name = channelName();
        const [position] = await all(bus.subscribe(name, { replayOnly: true }));
        // A fresh channel's position is stored as its floor, just before Redis's clock.
        expect(await redis.get(`stream-floor:${name}`)).toBe(position?.id);
        const floorTtl = await redis.pttl(`stream-floor:${name}`);
        expect(floorTtl).toBeGreaterThan(0);
        expect(floorTtl).toBeLessThanOrEqual(60_000);
        const before = Date.now();
        const event = await bus.publish(name, 'kept', { n: 1 });
        const [ms] = event.id.split('-');
        expect(Number(ms)).toBeGreaterThanOrEqual(before - 1000);
        expect(await redis.xrange(`stream:${name}`, '-', '+')).toEqual([
          [event.id, ['e', JSON.stringify({ event: 'kept', data: { n: 1 }, at: event.at })]],
        ]);
        for (const key of [`stream:${name}`, `stream-floor:${name}`]) {
          const ttl = await redis.pttl(key);
          expect(ttl).toBeGreaterThan(50_000);
          expect(ttl).toBeLessThanOrEqual(60_000);
        }
        expect(compareIds(event.id, position?.id as string)).toBeGreaterThan(0);
      });

      it('keeps a history a day by default', async () => {
        const { bus, redis } = await open({ historySize: 10 });
        const name = channelName();
        await bus.publish(name, 'kept', {});
        const ttl = await redis.pttl(`stream:${name}`);
        expect(ttl).toBeGreaterThan(86_000_000);
        expect(ttl).toBeLessThanOrEqual(86_400_000);
      });

      it('two buses sharing one subscriber connection under different prefixes hear only their own events', async () => {
        const first = await open({ historySize: 10, historyTtlSeconds: 60 });
        const second = await open({ historySize: 10, historyTtlSeconds: 60, subscriber: first.subscriber });
        const name = channelName();
        const controller = new AbortController();
        const one = first.bus.subscribe(name, { signal: controller.signal });
        const two = second.bus.subscribe(name, { signal: controller.signal });
        try {
          await next(one, 'subscribed');
          await next(two, 'subscribed');
          const theirs = await second.bus.publish(name, 'for.second', {});
          const mine = await first.bus.publish(name, 'for.first', {});
          expect(await next(one, 'its own event')).toEqual(mine);
          expect(await next(two, 'its own event')).toEqual(theirs);
          const again = await second.bus.publish(name, 'again', {});
          expect(await next(two, 'its next event')).toEqual(again);
        } finally {
          controller.abort();
          await Promise.all([one.return(undefined), two.return(undefined)]);
        }
      });

      it('after its subscriber connection was down, catches up from each channel’s last delivered event, once', async () => {
        const { bus, redis, subscriber } = await open({ historySize: 100, historyTtlSeconds: 60 });
        const seen = channelName();
        const fresh = channelName();
        const broken = channelName();
        const controller = new AbortController();
        const onSeen = bus.subscribe(seen, { signal: controller.signal });
        const onBroken = bus.subscribe(broken, { signal: controller.signal });
        const onFresh = bus.subscribe(fresh, { signal: controller.signal });
        try {
          await next(onSeen, 'subscribed');
          await next(onBroken, 'subscribed');
          // Where the fresh channel's subscriber stands: what is older never reaches it.
          const c = Number((await next(onFresh, 'subscribed')).id.split('-')[0]);
          const delivered = await bus.publish(seen, 'delivered', {});
          expect(await next(onSeen, 'delivered')).toEqual(delivered);
          // A `ready` without a loss before it fetches nothing.
          await redis.xadd(`stream:${seen}`, '*', 'e', JSON.stringify({ event: 'written.0', data: {}, at: 'x' }));
          subscriber.emit('ready');
          const control = await bus.publish(seen, 'control', {});
          expect((await next(onSeen, 'control')).id).toBe(control.id);
          // Down (at c + 10 s on the bus's clock): events appended meanwhile never came through
          // pub/sub (written here without PUBLISH).
          const clock = vi.spyOn(Date, 'now').mockReturnValue(c + 10_000);
          subscriber.emit('close');
          clock.mockRestore();
          const missed = await redis.xadd(
            `stream:${seen}`,
            '*',
            'e',
            JSON.stringify({ event: 'written.1', data: { n: 1 }, at: 'then' }),
          );
          // A channel nothing was delivered on yet: from two seconds before the loss.
          await redis.xadd(`stream:${fresh}`, `${c + 5000}-0`, 'e', JSON.stringify({ event: 'old', data: {} }));
          await redis.xadd(`stream:${fresh}`, `${c + 9000}-0`, 'e', JSON.stringify({ event: 'recent', data: {} }));
          // A channel whose stream cannot be read: skipped, the others still caught up.
          await redis.set(`stream:${broken}`, 'not a stream');
          subscriber.emit('ready');
          expect(await next(onSeen, 'written.1')).toEqual({
            id: missed,
            channel: seen,
            event: 'written.1',
            data: { n: 1 },
            at: 'then',
          });
          expect(await next(onFresh, 'recent')).toMatchObject({ id: `${c + 9000}-0`, event: 'recent' });
          // Caught up once: a second `ready` without a loss brings nothing again.
          subscriber.emit('ready');
          const after = await bus.publish(seen, 'after', {});
          expect((await next(onSeen, 'after')).id).toBe(after.id);
          const later = await bus.publish(fresh, 'later', {});
          expect((await next(onFresh, 'later')).id).toBe(later.id);
        } finally {
          controller.abort();
          await Promise.all([onSeen.return(undefined), onFresh.return(undefined), onBroken.return(undefined)]);
        }
      });

      it('a first loss sets where the catch-up starts: a second close before the connection is back does not move it', async () => {
        const { bus, redis, subscriber } = await open({ historySize: 100, historyTtlSeconds: 60 });
        const name = channelName();
        const controller = new AbortController();
        const sub = bus.subscribe(name, { signal: controller.signal });
        try {
          const c = Number((await next(sub, 'subscribed')).id.split('-')[0]);
          const clock = vi.spyOn(Date, 'now').mockReturnValue(c + 10_000);
          subscriber.emit('close');
          clock.mockReturnValue(c + 30_000);
          subscriber.emit('close');
          clock.mockRestore();
          // After the subscriber's position, after the first loss's fallback, before the second's.
          await redis.xadd(`stream:${name}`, `${c + 20_000}-0`, 'e', JSON.stringify({ event: 'missed', data: {} }));
          subscriber.emit('ready');
          expect(await next(sub, 'missed')).toMatchObject({ id: `${c + 20_000}-0`, event: 'missed' });
        } finally {
          controller.abort();
          await sub.return(undefined);
        }
      });

      it('closing the bus leaves no listener on the subscriber connection', async () => {
        const subscriber = connectRedis(redisUrl());
        try {
          await redisReady(subscriber);
          const counts = () => ['message', 'close', 'ready'].map((e) => subscriber.listenerCount(e));
          const before = counts();
          const made = await redisBus({ historySize: 10, subscriber });
          expect(counts()).toEqual(before.map((n) => n + 1));
          await made.close();
          expect(counts()).toEqual(before);
        } finally {
          subscriber.disconnect();
        }
      });

      it('a history read that Redis refuses fails the resume with Redis’s own error', async () => {
        const { bus, redis } = await open({ historySize: 10, historyTtlSeconds: 60 });
        const badFloor = channelName();
        await bus.publish(badFloor, 'e', {});
        await redis.del(`stream-floor:${badFloor}`);
        await redis.hset(`stream-floor:${badFloor}`, 'not', 'a string');
        const floorError = await failureOf(bus.subscribe(badFloor, { since: '1-0', replayOnly: true }));
        expect(String(floorError)).toMatch(/WRONGTYPE/);
        const badStream = channelName();
        await redis.set(`stream:${badStream}`, 'not a stream');
        const streamError = await failureOf(bus.subscribe(badStream, { since: '1-0', replayOnly: true }));
        expect(String(streamError)).toMatch(/WRONGTYPE/);
      });
    });
  },
);

describe('the in-process store on a fake clock', () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it('numbers events `<ms>-<n>`: one millisecond’s events count up, a clock that steps back never reorders them', async () => {
    const bus = memoryEventBus({ historySize: 10 });
    const clock = vi.spyOn(Date, 'now');
    const name = channelName();
    const at = async (ms: number) => {
      clock.mockReturnValue(ms);
      return (await bus.publish(name, 'e', {})).id;
    };
    expect([await at(5000), await at(5000), await at(5000), await at(4000), await at(5001)]).toEqual([
      '5000-0',
      '5000-1',
      '5000-2',
      '5000-3',
      '5001-0',
    ]);
    // A fresh channel's position is a millisecond before now; its first event is not lost from it.
    clock.mockReturnValue(9000);
    const fresh = channelName();
    const [position] = await all(bus.subscribe(fresh, { replayOnly: true }));
    expect(position?.id).toBe('8999-0');
    const first = await bus.publish(fresh, 'first', {});
    expect(first.id).toBe('9000-0');
    expect(await all(bus.subscribe(fresh, { since: '8999-0', replayOnly: true }))).toEqual([first]);
    await bus.close();
  });

  it('forgets a channel idle for historyTtlSeconds (not a moment before), checked every minute', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const bus = memoryEventBus({ historySize: 10, historyTtlSeconds: 60 });
    const name = channelName();
    const event = await bus.publish(name, 'e', {});
    vi.advanceTimersByTime(60_000);
    // Idle exactly the TTL at the sweep: kept.
    expect((await all(bus.subscribe(name, { replayOnly: true })))[0]?.id).toBe(event.id);
    vi.advanceTimersByTime(60_000);
    const resumed = await all(bus.subscribe(name, { since: event.id, replayOnly: true }));
    expect(resumed.map((e) => e.event)).toEqual(['history.gap']);
    await bus.close();
  });

  it('keeps a history a day by default', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const bus = memoryEventBus({ historySize: 10 });
    const name = channelName();
    const event = await bus.publish(name, 'e', {});
    vi.advanceTimersByTime(86_400_000);
    expect((await all(bus.subscribe(name, { replayOnly: true })))[0]?.id).toBe(event.id);
    vi.advanceTimersByTime(60_000);
    expect((await all(bus.subscribe(name, { since: event.id, replayOnly: true }))).map((e) => e.event)).toEqual([
      'history.gap',
    ]);
    await bus.close();
  });

  it('closing forgets every history and stops the sweep', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const timers = vi.getTimerCount();
    const bus = memoryEventBus({ historySize: 10 });
    expect(vi.getTimerCount()).toBe(timers + 1);
    const name = channelName();
    const event = await bus.publish(name, 'e', {});
    await bus.close();
    expect(vi.getTimerCount()).toBe(timers);
    expect((await all(bus.subscribe(name, { since: event.id, replayOnly: true }))).map((e) => e.event)).toEqual([
      'history.gap',
    ]);
  });
});

/**
 * A scripted store with one listener on a fresh channel, subscribed: its feed is live from here
 * on, so what is published reaches the hub and reads can be kept. `stop` ends the listener.
 */
async function listeningStore() {
  const store = scriptedStore();
  const name = channelName();
  const controller = new AbortController();
  const listener = store.bus.subscribe(name, { signal: controller.signal });
  await next(listener, 'subscribed');
  const stop = async () => {
    controller.abort();
    await listener.return(undefined);
  };
  return { store, name, stop };
}

/**
 * A store the test drives: ids `<n>-0`, live delivery only to channels it listens to, listen
 * calls that can be held or failed, reads that can fail once or answer `lost`.
 */
function scriptedStore() {
  const history = new Map<string, ChannelEvent[]>();
  const listening = new Set<string>();
  const calls: string[] = [];
  let n = 0;
  let hubs: LocalHubs | undefined;
  const script = {
    listenFailure: undefined as Error | undefined,
    unlistenFailure: undefined as Error | undefined,
    pageFailure: undefined as Error | undefined,
    lost: false,
    hold: undefined as Promise<void> | undefined,
  };
  const reads = { count: 0 };
  const backend = (local: LocalHubs): HistoryBackend => {
    hubs = local;
    return {
      async append(channel, event, data, at) {
        const entry = { id: `${++n}-0`, channel, event, data, at };
        history.set(channel, [...(history.get(channel) ?? []), entry]);
        if (listening.has(channel)) local.deliver(entry);
        return entry;
      },
      async page(channel, after, limit) {
        const failure = script.pageFailure;
        script.pageFailure = undefined;
        if (failure) throw failure;
        const events = (history.get(channel) ?? []).filter((e) => compareIds(e.id, after) > 0).slice(0, limit);
        return { events, lost: script.lost };
      },
      async cursor(channel) {
        return history.get(channel)?.at(-1)?.id ?? '0-0';
      },
      async listen(channel) {
        calls.push(`listen ${channel}`);
        await script.hold;
        if (script.listenFailure) throw script.listenFailure;
        listening.add(channel);
      },
      async unlisten(channel) {
        calls.push(`unlisten ${channel}`);
        listening.delete(channel);
        if (script.unlistenFailure) throw script.unlistenFailure;
      },
      async close() {},
    };
  };
  const bus = createBus(backend, { maxQueued: 500, onHistoryRead: () => reads.count++ });
  return {
    bus,
    calls,
    script,
    reads,
    /** The channels with a hub on this instance, with the last id each delivered. */
    hubs: () => [...(hubs as LocalHubs).cursors()],
    deliver: (event: ChannelEvent) => (hubs as LocalHubs).deliver(event),
  };
}

describe('the shared subscribe algorithm over a scripted store', () => {
  afterEach(() => vi.restoreAllMocks());

  it('listens once per channel however many subscribe; the last to leave stops it and leaves no hub behind', async () => {
    const store = scriptedStore();
    const name = channelName();
    const controller = new AbortController();
    const a = store.bus.subscribe(name, { signal: controller.signal });
    const b = store.bus.subscribe(name, { signal: controller.signal });
    await next(a, 'subscribed');
    await next(b, 'subscribed');
    expect(store.calls).toEqual([`listen ${name}`]);
    expect(store.hubs()).toEqual([[name, undefined]]);
    const event = await store.bus.publish(name, 'e', {});
    expect(store.hubs()).toEqual([[name, event.id]]);
    await a.return(undefined);
    expect(store.calls).toEqual([`listen ${name}`]);
    await b.return(undefined);
    expect(store.calls).toEqual([`listen ${name}`, `unlisten ${name}`]);
    expect(store.hubs()).toEqual([]);
    // Leaving twice changes nothing; a replay alone never listens.
    await b.return(undefined);
    await all(store.bus.subscribe(name, { replayOnly: true }));
    await all(store.bus.subscribe(name, { since: '0-0', replayOnly: true }));
    expect(store.calls).toEqual([`listen ${name}`, `unlisten ${name}`]);
    expect(store.hubs()).toEqual([]);
  });

  it('a listen that fails fails every subscription waiting on it, leaves no hub, and the next subscriber listens anew', async () => {
    const store = scriptedStore();
    const name = channelName();
    let release = () => {};
    store.script.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    store.script.listenFailure = new Error('subscriber connection lost');
    const first = failureOf(store.bus.subscribe(name));
    const second = failureOf(store.bus.subscribe(name));
    release();
    expect(await first).toMatchObject({ message: 'subscriber connection lost' });
    expect(await second).toMatchObject({ message: 'subscriber connection lost' });
    expect(store.hubs()).toEqual([]);
    store.script.listenFailure = undefined;
    const controller = new AbortController();
    const third = store.bus.subscribe(name, { signal: controller.signal });
    await next(third, 'subscribed');
    expect(store.calls).toEqual([`listen ${name}`, `listen ${name}`]);
    const event = await store.bus.publish(name, 'e', {});
    expect(await next(third, 'e')).toEqual(event);
    controller.abort();
    await third.return(undefined);
  });

  it('an unlisten that fails is swallowed: the channel is left all the same, and listened to again later', async () => {
    const store = scriptedStore();
    const name = channelName();
    store.script.unlistenFailure = new Error('subscriber connection lost');
    const sub = store.bus.subscribe(name);
    await next(sub, 'subscribed');
    await sub.return(undefined);
    expect(store.hubs()).toEqual([]);
    const again = store.bus.subscribe(name);
    await next(again, 'subscribed');
    await again.return(undefined);
    expect(store.calls).toEqual([`listen ${name}`, `unlisten ${name}`, `listen ${name}`, `unlisten ${name}`]);
  });

  it('the hub drops an event the store delivers again or late, so it neither reaches nor fills a queue', async () => {
    const store = scriptedStore();
    const name = channelName();
    const controller = new AbortController();
    const sub = store.bus.subscribe(name, { signal: controller.signal, maxQueued: 2 });
    try {
      await next(sub, 'subscribed');
      const e1 = await store.bus.publish(name, 'e1', {});
      const e2 = await store.bus.publish(name, 'e2', {});
      // The queue is full (2): a repeat of e2 or a late e1 would overflow it.
      store.deliver(e2);
      store.deliver(e1);
      // An event of a channel nobody here listens to is ignored.
      store.deliver({ ...e1, channel: channelName() });
      expect(store.hubs()).toEqual([[name, e2.id]]);
      expect(await next(sub, 'e1')).toEqual(e1);
      expect(await next(sub, 'e2')).toEqual(e2);
      const e3 = await store.bus.publish(name, 'e3', {});
      expect(await next(sub, 'e3')).toEqual(e3);
    } finally {
      controller.abort();
      await sub.return(undefined);
    }
  });

  it('a read of the history that failed is not kept: the next resume from that position reads again', async () => {
    const { store, name, stop } = await listeningStore();
    const start = await store.bus.publish(name, 'start', {});
    const missed = await store.bus.publish(name, 'missed', {});
    const last = await store.bus.publish(name, 'last', {});
    // A read kept from a later position, then a failed one from an earlier position.
    expect(await all(store.bus.subscribe(name, { since: missed.id, replayOnly: true }))).toEqual([last]);
    store.script.pageFailure = new Error('Redis transaction aborted');
    expect(await failureOf(store.bus.subscribe(name, { since: start.id, replayOnly: true }))).toMatchObject({
      message: 'Redis transaction aborted',
    });
    const before = store.reads.count;
    // The failed read drops itself only: the later position is still answered from its kept read.
    expect(await all(store.bus.subscribe(name, { since: missed.id, replayOnly: true }))).toEqual([last]);
    expect(store.reads.count - before).toBe(0);
    expect(await all(store.bus.subscribe(name, { since: start.id, replayOnly: true }))).toEqual([missed, last]);
    expect(store.reads.count - before).toBe(1);
    await stop();
  });

  it('a kept read serves the resumes of the next 30 seconds, not one more millisecond', async () => {
    const { store, name, stop } = await listeningStore();
    const start = await store.bus.publish(name, 'start', {});
    await store.bus.publish(name, 'missed', {});
    const t = Date.now();
    const clock = vi.spyOn(Date, 'now').mockReturnValue(t);
    const resumeAt = async (ms: number) => {
      clock.mockReturnValue(ms);
      const before = store.reads.count;
      await all(store.bus.subscribe(name, { since: start.id, replayOnly: true }));
      return store.reads.count - before;
    };
    expect([await resumeAt(t), await resumeAt(t + 29_999), await resumeAt(t + 30_000)]).toEqual([1, 0, 1]);
    clock.mockRestore();
    await stop();
  });

  it('keeps the four newest reads of a channel; a read that lost events never answers a later position', async () => {
    const { store, name, stop } = await listeningStore();
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await store.bus.publish(name, `e${i}`, {})).id);
    // Every read says events were dropped before it: none may stand for another position.
    store.script.lost = true;
    const resume = async (since: string) => {
      const before = store.reads.count;
      const events = await all(store.bus.subscribe(name, { since, replayOnly: true }));
      expect(events[0]).toMatchObject({ event: 'history.gap', id: since });
      expect(events.slice(1).map((e) => e.id)).toEqual(ids.filter((id) => compareIds(id, since) > 0));
      return store.reads.count - before;
    };
    // From the newest position back: each earlier than every kept read, each read anew.
    const positions = [ids[4], ids[3], ids[2], ids[1], ids[0]] as string[];
    const fresh: number[] = [];
    for (const since of positions) fresh.push(await resume(since));
    expect(fresh).toEqual([1, 1, 1, 1, 1]);
    // ids[4]'s read was the oldest of five: dropped. ids[3]'s is still kept.
    expect(await resume(ids[4] as string)).toBe(1);
    expect(await resume(ids[3] as string)).toBe(0);
    await stop();
  });

  it('a later position is answered from a complete earlier read, without a gap and without reading the store', async () => {
    const { store, name, stop } = await listeningStore();
    const events = [];
    for (let i = 0; i < 4; i++) events.push(await store.bus.publish(name, `e${i}`, {}));
    const ids = events.map((e) => e.id);
    const before = store.reads.count;
    expect((await all(store.bus.subscribe(name, { since: ids[0], replayOnly: true }))).map((e) => e.id)).toEqual(
      ids.slice(1),
    );
    expect(await all(store.bus.subscribe(name, { since: ids[2], replayOnly: true }))).toEqual(events.slice(3));
    expect(store.reads.count - before).toBe(1);
    await stop();
  });

  it('a read begun before the channel listens is not kept: what was appended meanwhile reaches later resumes', async () => {
    const store = scriptedStore();
    const name = channelName();
    const start = await store.bus.publish(name, 'start', {});
    let release = () => {};
    store.script.hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const controller = new AbortController();
    const listener = store.bus.subscribe(name, { signal: controller.signal });
    const subscribed = next(listener, 'subscribed');
    // The hub exists but does not listen yet.
    expect(await all(store.bus.subscribe(name, { since: start.id, replayOnly: true }))).toEqual([]);
    const meanwhile = await store.bus.publish(name, 'meanwhile', {});
    release();
    await subscribed;
    expect(await all(store.bus.subscribe(name, { since: start.id, replayOnly: true }))).toEqual([meanwhile]);
    controller.abort();
    await listener.return(undefined);
  });
});
