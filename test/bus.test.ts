import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChannelEvent, type EventBus, memoryEventBus, redisEventBus } from '../src/stores/bus.js';
import { connectRedis, redisReady } from '../src/stores/redis.js';
import { describeWhen } from './support/required.js';

/**
 * The event bus's `since` contract, on each store: a resumed subscription gets the kept events
 * after `since`, then live ones, with no gap and no duplicate — also for an event published
 * while the replay is still running, which reaches the subscription twice (from the history it
 * is reading and from the live listener it joined first) and must be delivered once.
 */
function sinceContract(makeBus: () => Promise<{ bus: EventBus; close(): Promise<void> }>) {
  let bus: EventBus;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ bus, close } = await makeBus());
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
}

describe('event bus in process: since replay', () => {
  sinceContract(async () => {
    const bus = memoryEventBus({ historySize: 1000 });
    return { bus, close: () => bus.close() };
  });
});

describeWhen(
  Boolean(process.env.REDIS_URL),
  'REQUIRE_SERVICES',
  'event bus on Redis: since replay',
  'REDIS_URL is unset',
  () => {
    sinceContract(async () => {
      const url = process.env.REDIS_URL as string;
      const prefix = `parley-test:${randomBytes(6).toString('hex')}:`;
      const redis = connectRedis(url, { keyPrefix: prefix });
      const subscriber = connectRedis(url);
      await Promise.all([redisReady(redis), redisReady(subscriber)]);
      const bus = redisEventBus({ redis, subscriber, prefix, historySize: 1000, historyTtlSeconds: 60 });
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
