import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChannelEvent, type EventBus, SlowConsumerError } from '../../src/stores/bus.js';
import { memoryEventBus } from '../../src/stores/bus-memory.js';
import { redisEventBus } from '../../src/stores/bus-redis.js';
import { compareIds } from '../../src/stores/event-id.js';
import { connectRedis, redisReady } from '../../src/stores/redis.js';
import { describeWhen } from '../support/required.js';
import { useTestRedis } from '../support/test-redis.js';

/**
 * The event bus's `since` contract, on each store: a resumed subscription gets the kept events
 * after `since`, then live ones, with no gap and no duplicate — also for an event published
 * while the replay is still running, which reaches the subscription twice (from the history it
 * is reading and from the live listener it joined first) and must be delivered once.
 */
/** The history size of the buses under test: small, so a test can overflow it. */
const SMALL_HISTORY = 3;

function sinceContract(
  makeBus: (historySize: number, onHistoryRead?: () => void) => Promise<{ bus: EventBus; close(): Promise<void> }>,
) {
  let bus: EventBus;
  let close: () => Promise<void>;
  /** Reads of a channel's history that reached the store (the bus's `onHistoryRead`). */
  const storeReads = { count: 0 };
  beforeAll(async () => {
    ({ bus, close } = await makeBus(1000, () => storeReads.count++));
  });
  afterAll(() => close());

  const channel = () => `bus-test-${randomBytes(4).toString('hex')}`;

  async function next(it: AsyncGenerator<ChannelEvent>, what: string): Promise<ChannelEvent> {
    const result = await it.next();
    if (result.done) throw new Error(`the subscription ended before ${what}`);
    return result.value;
  }

  it('an event published during the replay is delivered exactly once, after the missed ones', async () => {
    const name = channel();
    const start = await bus.publish(name, 'm0', {});
    // More than one replay page (100), so the replay is still reading when the next event comes.
    const missed: string[] = [];
    for (let i = 1; i <= 150; i++) missed.push((await bus.publish(name, `m${i}`, {})).id);

    const controller = new AbortController();
    const resumed = bus.subscribe(name, { since: start.id, signal: controller.signal });
    const watcher = bus.subscribe(name, { signal: controller.signal });
    try {
      expect((await next(resumed, 'the first replayed event')).id).toBe(missed[0]);
      expect((await next(watcher, 'subscribed')).event).toBe('subscribed');
      // Published after the replay's first page was read and before its second: it is in the
      // history the replay reads next AND in the live queue the subscription joined first.
      const during = await bus.publish(name, 'during.replay', {});
      // Every listener of a channel hears an event at once: once the watcher has it, so has the
      // resumed subscription's live queue.
      expect((await next(watcher, 'during.replay')).id).toBe(during.id);

      const ids = [missed[0]];
      while (ids.at(-1) !== during.id) ids.push((await next(resumed, 'during.replay')).id);
      // Once the replay is over, the next event is the next one published, not a second copy.
      const after = await bus.publish(name, 'after.replay', {});
      ids.push((await next(resumed, 'after.replay')).id);
      expect(ids).toEqual([...missed, during.id, after.id]);
    } finally {
      controller.abort();
      await Promise.all([resumed.return(undefined), watcher.return(undefined)]);
    }
  });

  it('a since at the newest event replays nothing and delivers the next live event once', async () => {
    const name = channel();
    const last = await bus.publish(name, 'seen', {});
    const controller = new AbortController();
    const resumed = bus.subscribe(name, { since: last.id, signal: controller.signal });
    try {
      const pending = next(resumed, 'live');
      const live = await bus.publish(name, 'live', {});
      expect((await pending).id).toBe(live.id);
    } finally {
      controller.abort();
      await resumed.return(undefined);
    }
  });

  it('without since: first `subscribed` at the channel position (resuming from it misses nothing), then live events', async () => {
    const name = channel();
    const before = await bus.publish(name, 'before', { n: 0 });
    const controller = new AbortController();
    const live = bus.subscribe(name, { signal: controller.signal });
    try {
      const first = await next(live, 'subscribed');
      expect(first).toMatchObject({ id: before.id, channel: name, event: 'subscribed', data: {} });
      const published = await bus.publish(name, 'after', { n: 1 });
      expect(published).toMatchObject({ channel: name, event: 'after', data: { n: 1 } });
      expect(await next(live, 'after')).toEqual(published);
      expect(compareIds(published.id, before.id)).toBeGreaterThan(0);
      // A fresh channel has a position too, and resuming from it counts nothing as lost.
      const fresh = channel();
      const empty = bus.subscribe(fresh, { signal: controller.signal });
      const position = (await next(empty, 'subscribed')).id;
      const resumed = bus.subscribe(fresh, { since: position, signal: controller.signal });
      const pending = next(resumed, 'the first event');
      const event = await bus.publish(fresh, 'first', {});
      expect(await pending).toEqual(event);
      await Promise.all([empty.return(undefined), resumed.return(undefined)]);
    } finally {
      controller.abort();
      await live.return(undefined);
    }
  });

  it('ephemeral events are delivered live and in order, and never evict the kept history (issue 27, row 3)', async () => {
    const small = await makeBus(SMALL_HISTORY);
    const bus = small.bus;
    const name = channel();
    const start = await bus.publish(name, 'before', {});
    const kept: string[] = [];
    for (let i = 0; i < SMALL_HISTORY; i++) kept.push((await bus.publish(name, `kept.${i}`, {})).id);
    const controller = new AbortController();
    const live = bus.subscribe(name, { signal: controller.signal });
    try {
      expect((await next(live, 'subscribed')).event).toBe('subscribed');
      // A flood of typing-like events, ten times the history.
      const flood: string[] = [];
      for (let i = 0; i < 10 * SMALL_HISTORY; i++)
        flood.push((await bus.publish(name, 'typing', { i }, { ephemeral: true })).id);
      const after = await bus.publish(name, 'after', {});
      const heard: string[] = [];
      for (let i = 0; i <= flood.length; i++) heard.push((await next(live, 'a live event')).id);
      expect(heard).toEqual([...flood, after.id]);
      expect([...heard].sort(compareIds)).toEqual(heard);
      // A resume from the last kept event before the flood: no gap, the later real event only.
      const resumed = bus.subscribe(name, { since: kept.at(-1), signal: controller.signal, replayOnly: true });
      const replayed: ChannelEvent[] = [];
      for await (const event of resumed) replayed.push(event);
      expect(replayed.map((e) => [e.event, e.id])).toEqual([['after', after.id]]);
      // What the history keeps is still the last SMALL_HISTORY real events.
      const fromStart = bus.subscribe(name, { since: start.id, signal: controller.signal, replayOnly: true });
      const all: string[] = [];
      for await (const event of fromStart) all.push(event.event);
      expect(all).toEqual(['history.gap', 'kept.1', 'kept.2', 'after']);
    } finally {
      controller.abort();
      await live.return(undefined);
      await small.close();
    }
  });

  it('a since before the kept history starts with history.gap, then what is kept; an unknown channel is all gap', async () => {
    const small = await makeBus(SMALL_HISTORY);
    const bus = small.bus;
    const name = channel();
    const start = await bus.publish(name, 'dropped.0', {});
    for (let i = 1; i <= 5; i++) await bus.publish(name, `dropped.${i}`, {});
    const kept: string[] = [];
    for (let i = 0; i < SMALL_HISTORY; i++) kept.push((await bus.publish(name, `kept.${i}`, {})).event);
    const controller = new AbortController();
    const resumed = bus.subscribe(name, { since: start.id, signal: controller.signal });
    try {
      expect(await next(resumed, 'history.gap')).toMatchObject({
        id: start.id,
        channel: name,
        event: 'history.gap',
        data: { since: start.id },
      });
      const replayed: string[] = [];
      for (let i = 0; i < SMALL_HISTORY; i++) replayed.push((await next(resumed, 'a kept event')).event);
      expect(replayed).toEqual(kept);
      const unknown = bus.subscribe(channel(), { since: start.id, signal: controller.signal });
      expect((await next(unknown, 'history.gap')).event).toBe('history.gap');
      await unknown.return(undefined);
    } finally {
      controller.abort();
      await resumed.return(undefined);
      await small.close();
    }
  });

  it('a consumer more than maxQueued live events behind is ended as a slow consumer (RATE_LIMITED)', async () => {
    const name = channel();
    const controller = new AbortController();
    const slow = bus.subscribe(name, { signal: controller.signal, maxQueued: 2 });
    const watcher = bus.subscribe(name, { signal: controller.signal });
    try {
      await next(slow, 'subscribed');
      await next(watcher, 'subscribed');
      const third = (await Promise.all([1, 2, 3].map((n) => bus.publish(name, `e${n}`, {}))))[2];
      while ((await next(watcher, 'the third event')).id !== third?.id);
      const error = await slow.next().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(SlowConsumerError);
      expect(error).toMatchObject({ code: 'RATE_LIMITED', channel: name });
      // Two behind is within the bound.
      const patient = bus.subscribe(name, { signal: controller.signal, maxQueued: 2 });
      await next(patient, 'subscribed');
      const two = [await bus.publish(name, 'f1', {}), await bus.publish(name, 'f2', {})];
      while ((await next(watcher, 'f2')).id !== two[1]?.id);
      expect([(await next(patient, 'f1')).id, (await next(patient, 'f2')).id]).toEqual(two.map((e) => e.id));
      await patient.return(undefined);
    } finally {
      controller.abort();
      await Promise.all([slow.return(undefined), watcher.return(undefined)]);
    }
  });

  it('replayOnly: the kept events after since (or the subscribed event), then the end, without listening', async () => {
    const name = channel();
    const start = await bus.publish(name, 'start', {});
    const kept = [await bus.publish(name, 'k1', {}), await bus.publish(name, 'k2', {})];
    const replayed: ChannelEvent[] = [];
    for await (const event of bus.subscribe(name, { since: start.id, replayOnly: true })) replayed.push(event);
    expect(replayed).toEqual(kept);
    const fresh: ChannelEvent[] = [];
    for await (const event of bus.subscribe(name, { replayOnly: true })) fresh.push(event);
    expect(fresh.map((e) => [e.event, e.id])).toEqual([['subscribed', kept[1]?.id]]);
  });

  describe('a reconnect storm: many subscribers of one channel resume with since at once', () => {
    /** Every event of `resumed` until `last` (inclusive): the replay, then live events. */
    async function until(resumed: AsyncGenerator<ChannelEvent>, last: string): Promise<string[]> {
      const ids: string[] = [];
      while (ids.at(-1) !== last) ids.push((await next(resumed, `event ${last}`)).id);
      return ids;
    }

    it('subscribers resuming from the same position share one read of the store; each gets every missed event once, in order, then the live one', async () => {
      const name = channel();
      const seen = await bus.publish(name, 'seen', {});
      const missed = [
        await bus.publish(name, 'm1', {}),
        await bus.publish(name, 'm2', {}),
        await bus.publish(name, 'm3', {}),
      ];
      const controller = new AbortController();
      setMaxListeners(20, controller.signal);
      const tabs = Array.from({ length: 20 }, () => bus.subscribe(name, { since: seen.id, signal: controller.signal }));
      const readsBefore = storeReads.count;
      try {
        const replays = await Promise.all(tabs.map((tab) => until(tab, (missed[2] as ChannelEvent).id)));
        expect(storeReads.count - readsBefore).toBe(1);
        const live = await bus.publish(name, 'live', {});
        const lives = await Promise.all(tabs.map((tab) => next(tab, 'the live event')));
        for (const [i, replay] of replays.entries()) {
          expect([...replay, lives[i]?.id]).toEqual([...missed.map((e) => e.id), live.id]);
        }
      } finally {
        controller.abort();
        await Promise.all(tabs.map((tab) => tab.return(undefined)));
      }
    });

    it('a later position is answered from the read of an earlier one; an earlier position reads the store itself', async () => {
      const name = channel();
      const events = [];
      for (let i = 0; i < 6; i++) events.push(await bus.publish(name, `e${i}`, {}));
      const ids = events.map((e) => e.id);
      const controller = new AbortController();
      // In this order: the first read (after e1) serves e2's and e4's positions; e0's needs its own.
      const positions = [ids[1], ids[2], ids[4], ids[0]] as string[];
      const readsBefore = storeReads.count;
      const tabs = positions.map((since) => bus.subscribe(name, { since, signal: controller.signal }));
      try {
        const replays = await Promise.all(tabs.map((tab) => until(tab, ids[5] as string)));
        expect(storeReads.count - readsBefore).toBe(2);
        for (const [i, since] of positions.entries()) {
          expect(replays[i]).toEqual(ids.filter((id) => compareIds(id, since) > 0));
        }
      } finally {
        controller.abort();
        await Promise.all(tabs.map((tab) => tab.return(undefined)));
      }
    });

    it('an event reaching the channel after a read ends its sharing: a later resume from the same position gets that event too', async () => {
      const name = channel();
      const seen = await bus.publish(name, 'seen', {});
      const missed = await bus.publish(name, 'missed', {});
      const controller = new AbortController();
      const first = bus.subscribe(name, { since: seen.id, signal: controller.signal });
      const readsBefore = storeReads.count;
      let second: AsyncGenerator<ChannelEvent> | undefined;
      try {
        expect(await until(first, missed.id)).toEqual([missed.id]);
        const meanwhile = await bus.publish(name, 'meanwhile', {});
        // Once the first subscriber has it, the channel's listener on this instance has it.
        expect((await next(first, 'meanwhile')).id).toBe(meanwhile.id);
        second = bus.subscribe(name, { since: seen.id, signal: controller.signal });
        expect(await until(second, meanwhile.id)).toEqual([missed.id, meanwhile.id]);
        expect(storeReads.count - readsBefore).toBe(2);
      } finally {
        controller.abort();
        await Promise.all([first.return(undefined), second?.return(undefined)]);
      }
    });
  });

  it('aborting ends a subscription that is waiting for events, at once', async () => {
    const controller = new AbortController();
    const idle = bus.subscribe(channel(), { signal: controller.signal });
    await next(idle, 'subscribed');
    const ended = idle.next();
    controller.abort();
    expect(await ended).toEqual({ done: true, value: undefined });
  });
}

describe('event bus in process: since replay', () => {
  sinceContract(async (historySize, onHistoryRead) => {
    const bus = memoryEventBus({ historySize, onHistoryRead });
    return { bus, close: () => bus.close() };
  });
});

// On REDIS_URL, or else on a private redis-server when the machine has one (so the Redis bus is
// tested, and mutated, in the embedded mode too).
const testRedis = useTestRedis();
describeWhen(
  testRedis.available,
  'REQUIRE_SERVICES',
  'event bus on Redis: since replay',
  'REDIS_URL is unset and redis-server is not installed',
  () => {
    sinceContract(async (historySize, onHistoryRead) => {
      const url = testRedis.url();
      const prefix = `parley-test:${randomBytes(6).toString('hex')}:`;
      const redis = connectRedis(url, { keyPrefix: prefix });
      const subscriber = connectRedis(url);
      await Promise.all([redisReady(redis), redisReady(subscriber)]);
      const bus = redisEventBus({ redis, subscriber, prefix, historySize, historyTtlSeconds: 60, onHistoryRead });
      return {
        bus,
        async close() {
          await bus.close();
          const keys = await redis.keys(`${prefix}*`);
          if (keys.length) await redis.del(...keys.map((k) => k.slice(prefix.length)));
          subscriber.disconnect();
          redis.disconnect();
        },
      };
    });
  },
);
