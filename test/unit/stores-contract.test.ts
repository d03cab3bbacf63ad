import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { BackendUnavailableError, DomainError } from '../../src/errors.js';
import { compareIds, globalEventId, positionOfSince } from '../../src/stores/event-id.js';
import { type KeyValueStore, memoryKeyValueStore, redisKeyValueStore } from '../../src/stores/kv.js';
import { memoryPresenceStore, type PresenceStore, redisPresenceStore } from '../../src/stores/presence-store.js';
import { type Limit, type RateLimiterFactory, rateLimiterFactory } from '../../src/stores/rate-limits.js';
import { connectRedis, redisReady } from '../../src/stores/redis.js';
import { useTestRedis } from '../support/test-redis.js';

/**
 * The small stores (presence, short-lived values, rate limits) hold one contract in both forms:
 * in memory, the embedded default, and on Redis (REDIS_URL, or else a private redis-server), so a
 * gateway behaves the same on either and the embedded mutation run judges the Redis code too.
 */

const redis = useTestRedis();

/** The forms a contract runs on: memory always, Redis when there is one. */
function forms<T>(memory: () => T | Promise<T>, onRedis: (client: Redis) => T) {
  return [
    ['in memory', memory],
    ...(redis.available ? [['on Redis', async () => onRedis(await redis.client())] as const] : []),
  ] as const;
}

describe.each(forms<PresenceStore>(memoryPresenceStore, redisPresenceStore))('presence store %s', (_, make) => {
  it('a connection counts while its expiry is strictly in the future', async () => {
    const store = await make();
    expect(await store.touch('a1', 'c1', 1_000)).toBe(true);
    expect(await store.touch('a1', 'c1', 2_000)).toBe(false); // known: pushed forward
    expect(await store.isOnline('a1', 1_999)).toBe(true);
    expect(await store.isOnline('a1', 2_000)).toBe(false);
    expect(await store.isOnline('nobody', 0)).toBe(false);
  });

  it('settles online, keeps or replaces the state while connected, offline when every connection expired', async () => {
    const store = await make();
    expect(await store.stateOf('a2')).toBe('offline');
    expect(await store.settle('a2', 'bid-1', 0, null)).toEqual({ before: 'offline', after: 'offline' });
    await store.touch('a2', 'c1', 1_000);
    await store.touch('a2', 'c2', 3_000);
    expect(await store.settle('a2', 'bid-1', 0, null)).toEqual({ before: 'offline', after: 'online' });
    expect(await store.settle('a2', 'bid-1', 0, 'busy')).toEqual({ before: 'online', after: 'busy' });
    // null keeps what a connected agent has; the first connection's expiry drops it, not the agent.
    expect(await store.settle('a2', 'bid-1', 1_500, null)).toEqual({ before: 'busy', after: 'busy' });
    expect(await store.stateOf('a2')).toBe('busy');
    expect(await store.tracked()).toContainEqual({ agentId: 'a2', bid: 'bid-1' });
    expect(await store.isOnline('a2', 1_500)).toBe(true);
    expect(await store.settle('a2', 'bid-1', 3_000, 'away')).toEqual({ before: 'busy', after: 'offline' });
    expect(await store.stateOf('a2')).toBe('offline');
    expect(await store.tracked()).not.toContainEqual(expect.objectContaining({ agentId: 'a2' }));
  });

  it('tracks each agent not offline with its merchant', async () => {
    const store = await make();
    await store.touch('a3', 'c', 10_000);
    await store.touch('a4', 'c', 10_000);
    await store.settle('a3', 'bid-3', 0, null);
    await store.settle('a4', 'bid-4', 0, 'away');
    expect(
      (await store.tracked())
        .filter((t) => ['a3', 'a4'].includes(t.agentId))
        .sort((x, y) => x.agentId.localeCompare(y.agentId)),
    ).toEqual([
      { agentId: 'a3', bid: 'bid-3' },
      { agentId: 'a4', bid: 'bid-4' },
    ]);
  });
});

describe('presence store on Redis', () => {
  it.runIf(redis.available)('keeps its records under the client’s prefix, with an expiry', async () => {
    const client = await redis.client();
    const store = redisPresenceStore(client);
    redisPresenceStore(client); // a second store on one client reuses the settle script
    await store.touch('a5', 'c', 10_000);
    await store.settle('a5', 'bid-5', 0, null);
    expect(await client.get('presence:state:a5')).toBe('online');
    expect(await client.hget('presence:tracked', 'a5')).toBe('bid-5');
    expect(await client.ttl('presence:conns:a5')).toBeGreaterThan(3_000);
  });
});

describe('short-lived values', () => {
  describe.each(forms<KeyValueStore>(() => memoryKeyValueStore(), redisKeyValueStore))('%s', (_, make) => {
    it('set, get, take once, del; set-if-absent only once', async () => {
      const kv = await make();
      expect(await kv.get('k')).toBeNull();
      await kv.set('k', 'v', 60);
      expect(await kv.get('k')).toBe('v');
      expect(await kv.take('k')).toBe('v');
      expect(await kv.take('k')).toBeNull();
      expect(await kv.setIfAbsent('n', 'first', 60)).toBe(true);
      expect(await kv.setIfAbsent('n', 'second', 60)).toBe(false);
      expect(await kv.get('n')).toBe('first');
      await kv.del('n');
      expect(await kv.get('n')).toBeNull();
    });

    it('sets: add, remove, members; removing from a missing set is nothing', async () => {
      const kv = await make();
      await kv.addToSet('s', 'x', 60);
      await kv.addToSet('s', 'y', 60);
      await kv.addToSet('s', 'x', 60);
      expect((await kv.members('s')).sort()).toEqual(['x', 'y']);
      await kv.removeFromSet('s', 'x');
      expect(await kv.members('s')).toEqual(['y']);
      await kv.removeFromSet('missing', 'x');
      expect(await kv.members('missing')).toEqual([]);
    });
  });

  it('in memory, a value and a set live exactly their seconds; adding to a set renews it', async () => {
    let now = 0;
    const kv = memoryKeyValueStore(() => now);
    await kv.set('k', 'v', 2);
    await kv.setIfAbsent('n', 'v', 2);
    await kv.addToSet('s', 'x', 2);
    now = 1_999;
    expect([await kv.get('k'), await kv.get('n'), await kv.members('s')]).toEqual(['v', 'v', ['x']]);
    await kv.addToSet('s', 'y', 2);
    now = 2_000;
    expect([await kv.get('k'), await kv.get('n')]).toEqual([null, null]);
    expect(await kv.setIfAbsent('n', 'again', 2)).toBe(true);
    expect((await kv.members('s')).sort()).toEqual(['x', 'y']);
    now = 3_998;
    expect(await kv.members('s')).toHaveLength(2);
    now = 3_999;
    expect(await kv.members('s')).toEqual([]);
  });

  it.runIf(redis.available)('on Redis, values and sets carry their time to live', async () => {
    const client = await redis.client();
    const kv = redisKeyValueStore(client);
    await kv.set('k', 'v', 30);
    await kv.setIfAbsent('n', 'v', 40);
    await kv.addToSet('s', 'x', 50);
    expect([await client.ttl('k'), await client.ttl('n'), await client.ttl('s')]).toEqual([30, 40, 50]);
  });
});

const limit = (points: number, durationSeconds = 60, blockSeconds?: number): Limit => ({
  name: `contract-${randomBytes(4).toString('hex')}`,
  points,
  durationSeconds,
  blockSeconds,
});
/** About `seconds` (within 5): a window's wait, read a moment after it began on a busy machine. */
const about = (seconds: number) => expect.closeTo(seconds, -1);
/** The refusal of `work` as [code, message, retry-after], or 'answered'. */
async function refusal(work: Promise<unknown>) {
  try {
    await work;
    return 'answered';
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    return [error.code, error.message, error.retryAfterSeconds];
  }
}

describe.each(
  forms<RateLimiterFactory>(
    () => rateLimiterFactory({}),
    (redis) => rateLimiterFactory({ redis }),
  ),
)('rate limits %s', (_, make) => {
  it('counts points per subject; refuses with the wait left in the window, in whole seconds', async () => {
    const limits = await make();
    const l = limit(2, 60);
    await limits(l).consume('s', () => 'one');
    await limits(l).consume('s', () => 'two');
    expect(await limits(l).isBlocked('s')).toEqual(about(60));
    const [code, message, wait] = (await refusal(limits(l).consume('s', (w) => `over, retry in ${w} s`))) as unknown[];
    expect([code, message, wait]).toEqual(['RATE_LIMITED', `over, retry in ${wait} s`, about(60)]);
    expect(await refusal(limits(l).consume('other', () => 'x'))).toBe('answered');
    expect(await limits(l).isBlocked('other')).toBe(0);
    // The refused attempt counted too (3 of 2): two points back leave one to spend.
    await limits(l).reward('s', 2);
    expect(await limits(l).isBlocked('s')).toBe(0);
    await limits(l).consume('s', () => 'again');
    expect(await limits(l).isBlocked('s')).toEqual(about(60));
    await limits(l).reset('s');
    expect(await limits(l).isBlocked('s')).toBe(0);
  });

  it('in order: stops at the first limit spent, counted on the same keys as consume', async () => {
    const limits = await make();
    const [a, b] = [limit(3, 60), limit(1, 30)];
    const charges = [
      { limit: a, subject: 's', message: (w: number) => `a ${w}` },
      { limit: b, subject: 's', message: (w: number) => `b ${w}` },
    ];
    await limits.consumeInOrder(charges);
    const [code, message, wait] = (await refusal(limits.consumeInOrder(charges))) as unknown[];
    expect([code, message, wait]).toEqual(['RATE_LIMITED', `b ${wait}`, about(30)]);
    expect(await limits(b).isBlocked('s')).toEqual(about(30));
    // a was counted twice: one point left.
    await limits(a).consume('s', () => 'a');
    expect(await limits(a).isBlocked('s')).toEqual(about(60));
    await limits(b).reset('s');
    expect(await refusal(limits.consumeInOrder([charges[1]!]))).toBe('answered');
  });

  it('a limit that blocks once spent stays blocked for its block, past its window', async () => {
    const limits = await make();
    const l = limit(1, 5, 120);
    await limits.consumeInOrder([{ limit: l, subject: 's', message: () => 'one' }]);
    const [code, message, wait] = (await refusal(
      limits.consumeInOrder([{ limit: l, subject: 's', message: (w) => `blocked ${w}` }]),
    )) as unknown[];
    expect([code, message, wait]).toEqual(['RATE_LIMITED', `blocked ${wait}`, about(120)]);
  });
});

describe('rate limits when Redis is down', () => {
  it('every operation fails as the store being unavailable, not as a refusal', async () => {
    const limits = rateLimiterFactory({ redis: await redis.dead() });
    const l = limit(5);
    await expect(limits(l).consume('s', () => 'x')).rejects.toBeInstanceOf(BackendUnavailableError);
    await expect(limits(l).isBlocked('s')).rejects.toBeInstanceOf(BackendUnavailableError);
    await expect(limits(l).reset('s')).rejects.toBeInstanceOf(BackendUnavailableError);
    await expect(limits(l).reward('s')).rejects.toBeInstanceOf(BackendUnavailableError);
    await expect(limits.consumeInOrder([{ limit: l, subject: 's', message: () => 'x' }])).rejects.toThrowError(
      new BackendUnavailableError('redis'),
    );
  });

  it('in memory a refusal stays a refusal', async () => {
    const limits = rateLimiterFactory({});
    const l = limit(1);
    await limits(l).consume('s', () => 'x');
    await expect(limits(l).consume('s', () => 'over')).rejects.toMatchObject({ code: 'RATE_LIMITED', message: 'over' });
  });
});

describe('Redis clients', () => {
  it('fail fast while Redis is down: a command is refused at once as unavailable, not queued', async () => {
    const dead = await redis.dead();
    expect(dead.listenerCount('error')).toBeGreaterThan(0); // an 'error' event cannot crash the process
    // Refused by the client itself, before any retry: not held in an offline queue.
    await expect(redisKeyValueStore(dead).get('k')).rejects.toSatisfy(
      (error) =>
        error instanceof BackendUnavailableError && /enableOfflineQueue/.test(String((error.cause as Error)?.message)),
    );
    await expect(redisReady(dead, 100)).rejects.toThrow('Redis did not become ready within 100 ms');
    expect(dead.listenerCount('ready')).toBe(0);
  });

  it('connect at once unless lazy, reconnect at most a second apart', async () => {
    const lazy = await redis.dead({ lazy: true });
    expect(lazy.status).toBe('wait');
    const eager = await redis.dead();
    expect(eager.status).not.toBe('wait');
    const retry = eager.options.retryStrategy as (times: number) => number;
    expect([retry(1), retry(5), retry(30)]).toEqual([100, 500, 1_000]);
  });

  it.runIf(redis.available)(
    'become ready, leave no listener behind, and keep their keys under the prefix',
    async () => {
      const client = redis.kept(connectRedis(redis.url(), { keyPrefix: 'parley-test-prefix:' }));
      const raw = redis.kept(connectRedis(redis.url()));
      const before = client.listenerCount('ready');
      await redisReady(client);
      await redisReady(client); // already ready
      expect(client.listenerCount('ready')).toBe(before);
      await client.set('k', 'v', 'EX', 10);
      await redisReady(raw);
      expect(await raw.get('parley-test-prefix:k')).toBe('v');
    },
  );
});

describe('event ids', () => {
  it('compare by time, then by sequence; anything else counts as 0-0', () => {
    expect(compareIds('2-0', '10-0')).toBeLessThan(0);
    expect(compareIds('5-10', '5-9')).toBeGreaterThan(0);
    expect(compareIds('5-3', '5-3')).toBe(0);
    expect(compareIds('junk', '0-1')).toBeLessThan(0);
    expect(compareIds('0-1', 'junk')).toBeGreaterThan(0);
    expect(compareIds('junk', '0-0')).toBe(0);
  });

  it('a global id is the channel and the position; the markers add their name', () => {
    expect(globalEventId({ channel: 'global-b1', id: '5-1', event: 'agent.state' })).toBe('global-b1:5-1');
    expect(globalEventId({ channel: 'global-b1', id: '5-1', event: 'subscribed' })).toBe('global-b1:5-1:subscribed');
    expect(globalEventId({ channel: 'c', id: '5-1', event: 'history.gap' })).toBe('c:5-1:history.gap');
  });

  it('since: a position as it is, a global id of the same channel as its position, anything else nothing', () => {
    expect(positionOfSince('private-x', '7-2')).toBe('7-2');
    expect(positionOfSince('private-x', 'private-x:7-2')).toBe('7-2');
    expect(positionOfSince('private-x', 'private-x:7-2:subscribed')).toBe('7-2');
    expect(positionOfSince('a:b', 'a:b:7-2')).toBe('7-2');
    expect(positionOfSince('private-x', 'private-y:7-2')).toBeUndefined();
    expect(positionOfSince('private-x', 'nonsense')).toBeUndefined();
  });
});
