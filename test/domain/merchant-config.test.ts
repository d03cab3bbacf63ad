import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { agentGroups, merchants, visitorAttributeDefs } from '../../src/db/schema.js';
import {
  type CachedVisitorToken,
  CONFIG_CHANNEL,
  CONFIG_SAFETY_TTL_MS,
  createMerchantConfigCache,
  loadMerchantConfig,
  VISITOR_TOKEN_CACHE_MS,
} from '../../src/resolvers/merchant-config.js';
import type { ChannelEvent, EventBus } from '../../src/stores/bus.js';
import {
  DATABASE_DOWN,
  eventually,
  type Factories,
  recordEvents,
  selectsDown,
  type TestDeps,
  useTestDeps,
} from '../support/deps.js';

/**
 * docs/operations.md "Configuration cache": an instance keeps merchants' configuration and visitor token
 * checks in memory only while it listens to the invalidations, drops a copy when a write path
 * announces a change (here at once, elsewhere when the event arrives), and never keeps a copy
 * past its safety TTL (configuration) or 1 s (token checks).
 */
let deps: TestDeps;
let make: Factories;
useTestDeps((made) => ({ deps, f: make } = made));

/** A cache on the real stores with its own clock and bus (`stop` in a finally); it listens again 50 ms after losing its stream (1 s in the gateway). */
function cacheAt(clock = { now: Date.now() }, bus: EventBus = deps.bus) {
  return { cache: createMerchantConfigCache({ ...deps, bus, now: () => clock.now }, { resubscribeMs: 50 }), clock };
}

const rename = (merchantId: string, appname: string) =>
  deps.db.update(merchants).set({ appname }).where(eq(merchants.id, merchantId));
const appnameOf = async (cache: ReturnType<typeof createMerchantConfigCache>, merchantId: string) =>
  (await cache.get(merchantId))?.merchant.appname;

const token = (merchantId: string, expiresAt: number): CachedVisitorToken => ({
  visitorId: 'v',
  merchantId,
  bid: 'b',
  channel: 'visitor-x',
  expiresAt,
});
const hash = () => randomBytes(8).toString('hex');

describe('the merchant configuration', () => {
  it('is the merchant row, its groups (default first, then by position and name) and its attribute definitions in display order', async () => {
    const merchant = await make.merchant();
    const id = merchant.merchantId;
    await deps.db.delete(agentGroups).where(eq(agentGroups.merchantId, id));
    await deps.db.insert(agentGroups).values([
      { id: `g-${hash()}`, merchantId: id, name: 'b-late', position: 2 },
      { id: `g-${hash()}`, merchantId: id, name: 'c-first', position: 1 },
      { id: `g-${hash()}`, merchantId: id, name: 'a-first', position: 1 },
      { id: `g-${hash()}`, merchantId: id, name: 'z-default', position: 9, isDefault: true },
    ]);
    await deps.db.insert(visitorAttributeDefs).values([
      { merchantId: id, key: 'vip', label: 'VIP', type: 'boolean', editable: true, position: 2 },
      { merchantId: id, key: 'avatar', label: 'Avatar', type: 'image', editable: true, position: 1 },
      { merchantId: id, key: 'age', label: 'Age', type: 'number', editable: false, position: 1 },
    ]);
    const config = await loadMerchantConfig(deps, id);
    expect(config?.merchant).toMatchObject({ id, bid: merchant.bid, appkey: merchant.appkey });
    expect(config?.groups.map((g) => [g.name, g.isDefault])).toEqual([
      ['z-default', true],
      ['a-first', false],
      ['c-first', false],
      ['b-late', false],
    ]);
    expect(config?.groups[0]?.id).toMatch(/^g-/);
    // An image is never editable (merchant.ts), whatever its row says.
    expect(config?.attributeDefs).toEqual([
      { key: 'age', label: 'Age', type: 'number', editable: false },
      { key: 'avatar', label: 'Avatar', type: 'image', editable: false },
      { key: 'vip', label: 'VIP', type: 'boolean', editable: true },
    ]);
    expect(await loadMerchantConfig(deps, `no-such-${hash()}`)).toBeUndefined();
  });

  it('a cache that is not listening keeps nothing: every read goes to the database', async () => {
    const merchant = await make.merchant();
    const { cache } = cacheAt();
    expect(cache.listening).toBe(false);
    expect(await appnameOf(cache, merchant.merchantId)).toBe('Test shop');
    await rename(merchant.merchantId, 'Renamed');
    expect(await appnameOf(cache, merchant.merchantId)).toBe('Renamed');
    const h = hash();
    cache.rememberToken(h, token(merchant.merchantId, Date.now() + 60_000), Date.now(), cache.tokenEpoch());
    expect(cache.token(h, Date.now())).toBeUndefined();
  });

  it('while listening: one load shared by concurrent readers, kept until a change is announced', async () => {
    const merchant = await make.merchant();
    const { cache } = cacheAt();
    const recorder = recordEvents(deps, [CONFIG_CHANNEL]);
    await recorder.ready;
    try {
      await cache.start();
      expect(cache.listening).toBe(true);
      expect(cache.get(merchant.merchantId)).toBe(cache.get(merchant.merchantId));
      expect(await appnameOf(cache, merchant.merchantId)).toBe('Test shop');
      await rename(merchant.merchantId, 'Renamed');
      expect(await appnameOf(cache, merchant.merchantId)).toBe('Test shop');
      expect(await cache.announceChanged(merchant.merchantId)).toBe(true);
      expect(await appnameOf(cache, merchant.merchantId)).toBe('Renamed');
      await eventually(
        () => recorder.of('merchant.config_changed').some((e) => matches(e, { merchant_id: merchant.merchantId })),
        'the invalidation on the internal channel',
      );
    } finally {
      recorder.stop();
      await cache.stop();
    }
  });

  it('another instance drops its copy when the invalidation arrives', async () => {
    const merchant = await make.merchant();
    const here = cacheAt().cache;
    const there = cacheAt().cache;
    try {
      await Promise.all([here.start(), there.start()]);
      expect(await appnameOf(there, merchant.merchantId)).toBe('Test shop');
      await rename(merchant.merchantId, 'Renamed');
      await here.announceChanged(merchant.merchantId);
      await eventually(async () => (await appnameOf(there, merchant.merchantId)) === 'Renamed', 'the other instance');
    } finally {
      await Promise.all([here.stop(), there.stop()]);
    }
  });

  it('a copy is reloaded after the safety TTL even when no change was announced', async () => {
    const merchant = await make.merchant();
    const { cache, clock } = cacheAt();
    try {
      await cache.start();
      expect(await appnameOf(cache, merchant.merchantId)).toBe('Test shop');
      await rename(merchant.merchantId, 'Renamed');
      clock.now += CONFIG_SAFETY_TTL_MS - 1;
      expect(await appnameOf(cache, merchant.merchantId)).toBe('Test shop');
      clock.now += 1;
      expect(await appnameOf(cache, merchant.merchantId)).toBe('Renamed');
    } finally {
      await cache.stop();
    }
  });

  it('a load that overlaps a change is not kept; a failed load is not kept', async () => {
    const merchant = await make.merchant();
    const { cache } = cacheAt();
    try {
      await cache.start();
      const overlapping = cache.get(merchant.merchantId);
      cache.invalidate(merchant.merchantId);
      await rename(merchant.merchantId, 'Renamed');
      await overlapping;
      expect(await appnameOf(cache, merchant.merchantId)).toBe('Renamed');
      // The same when every copy is dropped at once.
      const again = cache.get(merchant.merchantId);
      cache.invalidate();
      await rename(merchant.merchantId, 'Again');
      await again;
      expect(await appnameOf(cache, merchant.merchantId)).toBe('Again');
    } finally {
      await cache.stop();
    }
    const down = selectsDown(deps.db);
    const flaky = createMerchantConfigCache({ ...deps, db: down.db });
    try {
      await flaky.start();
      await expect(flaky.get(merchant.merchantId)).rejects.toThrow(DATABASE_DOWN);
      down.restore();
      expect(await appnameOf(flaky, merchant.merchantId)).toBe('Again');
    } finally {
      await flaky.stop();
    }
  });

  it('stop() ends the caching; start() is idempotent and may be called again', async () => {
    const merchant = await make.merchant();
    const { cache } = cacheAt();
    expect(cache.start()).toBe(cache.start());
    await cache.start();
    await appnameOf(cache, merchant.merchantId);
    await cache.stop();
    expect(cache.listening).toBe(false);
    await rename(merchant.merchantId, 'Renamed');
    expect(await appnameOf(cache, merchant.merchantId)).toBe('Renamed');
    await cache.start();
    expect(cache.listening).toBe(true);
    await cache.stop();
  });
});

const matches = (event: ChannelEvent, data: unknown) => JSON.stringify(event.data) === JSON.stringify(data);

describe('visitor token checks', () => {
  it('are reused for at most 1 s from the start of their query, and never past the token’s expiry', async () => {
    const { cache } = cacheAt();
    try {
      await cache.start();
      const start = Date.now();
      const long = hash();
      cache.rememberToken(long, token('m', start + 60_000), start, cache.tokenEpoch());
      expect(cache.token(long, start + VISITOR_TOKEN_CACHE_MS - 1)).toMatchObject({ visitorId: 'v' });
      expect(cache.token(long, start + VISITOR_TOKEN_CACHE_MS)).toBeUndefined();
      const short = hash();
      cache.rememberToken(short, token('m', start + 500), start, cache.tokenEpoch());
      expect(cache.token(short, start + 499)).toBeDefined();
      expect(cache.token(short, start + 500)).toBeUndefined();
      // Expired entries are dropped, not only hidden.
      expect(cache.token(short, start)).toBeUndefined();
      expect(cache.token(hash(), start)).toBeUndefined();
    } finally {
      await cache.stop();
    }
  });

  it('a revocation is forgotten here at once and announced to every instance; a check started before it is not kept', async () => {
    const { cache } = cacheAt();
    const other = cacheAt().cache;
    const recorder = recordEvents(deps, [CONFIG_CHANNEL]);
    await recorder.ready;
    try {
      await Promise.all([cache.start(), other.start()]);
      const now = Date.now();
      const h = hash();
      cache.rememberToken(h, token('m', now + 60_000), now, cache.tokenEpoch());
      other.rememberToken(h, token('m', now + 60_000), now, other.tokenEpoch());
      const epoch = cache.tokenEpoch();
      expect(await cache.announceRevoked(h)).toBe(true);
      expect(cache.token(h, now)).toBeUndefined();
      cache.rememberToken(h, token('m', now + 60_000), now, epoch);
      expect(cache.token(h, now)).toBeUndefined();
      await eventually(() => other.token(h, now) === undefined, 'the other instance to forget it');
      expect(recorder.of('visitor_token.revoked').some((e) => matches(e, { token_hash: h }))).toBe(true);
    } finally {
      recorder.stop();
      await Promise.all([cache.stop(), other.stop()]);
    }
  });

  it('keeps at most 50,000 checks, dropping the oldest first', async () => {
    const { cache } = cacheAt();
    try {
      await cache.start();
      const now = Date.now();
      const epoch = cache.tokenEpoch();
      for (let i = 0; i <= 50_000; i++) cache.rememberToken(`h${i}`, token('m', now + 60_000), now, epoch);
      expect(cache.token('h0', now)).toBeUndefined();
      expect(cache.token('h1', now)).toBeDefined();
      expect(cache.token('h50000', now)).toBeDefined();
    } finally {
      await cache.stop();
    }
  });
});

describe('lost invalidations', () => {
  it('a history gap on the internal channel drops everything (changes may have been missed)', async () => {
    const merchant = await make.merchant();
    const { cache } = cacheAt();
    try {
      await cache.start();
      await appnameOf(cache, merchant.merchantId);
      const now = Date.now();
      cache.rememberToken('gap', token('m', now + 60_000), now, cache.tokenEpoch());
      await rename(merchant.merchantId, 'Renamed');
      await deps.bus.publish(CONFIG_CHANNEL, 'history.gap', { since: '0-0' });
      await eventually(() => cache.token('gap', now) === undefined, 'the token checks dropped');
      expect(await appnameOf(cache, merchant.merchantId)).toBe('Renamed');
    } finally {
      await cache.stop();
    }
  });

  it('when the invalidation stream fails the cache stops caching, then listens again', async () => {
    const merchant = await make.merchant();
    // A bus whose subscriptions can be broken from outside, as a lost Redis connection would.
    const breakers: AbortController[] = [];
    const breakable: EventBus = {
      ...deps.bus,
      async *subscribe(channel, opts) {
        const broken = new AbortController();
        breakers.push(broken);
        for await (const event of deps.bus.subscribe(channel, opts)) {
          yield event;
          if (broken.signal.aborted) throw new Error('connection lost');
        }
      },
    };
    const { cache } = cacheAt(undefined, breakable);
    try {
      await cache.start();
      await appnameOf(cache, merchant.merchantId);
      breakers[0]?.abort();
      await deps.bus.publish(CONFIG_CHANNEL, 'test.nudge', {});
      await eventually(() => !cache.listening, 'not listening');
      await rename(merchant.merchantId, 'Renamed');
      expect(await appnameOf(cache, merchant.merchantId)).toBe('Renamed');
      await eventually(() => cache.listening && breakers.length === 2, 'listening again');
    } finally {
      await cache.stop();
    }
  });
});
