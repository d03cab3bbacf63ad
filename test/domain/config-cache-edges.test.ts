import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { merchants } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { findMerchantByAppkey, findPusherAppMerchant } from '../../src/resolvers/merchant.js';
import {
  type CachedVisitorToken,
  CONFIG_CHANNEL,
  createMerchantConfigCache,
  type MerchantConfigCache,
} from '../../src/resolvers/merchant-config.js';
import type { EventBus } from '../../src/stores/bus.js';
import {
  clientIp,
  DATABASE_DOWN,
  eventually,
  type Factories,
  refusalOf,
  selectsDown,
  type TestDeps,
  useTestDeps,
} from '../support/deps.js';

/**
 * The edges of the configuration cache (src/resolvers/merchant-config.ts) and of the appkey
 * lookups through it (src/resolvers/merchant.ts), by value: which invalidation drops which copy,
 * which bus events the listener acts on, what a failed publication reports, the appkey index and
 * its bound, the listener's life when the bus refuses, and the unknown-appkey budget.
 */
let deps: TestDeps;
let make: Factories;
useTestDeps((made) => ({ deps, f: make } = made));

/** A cache on the real stores with a fixed clock; it listens again `resubscribeMs` after losing its stream. */
function cacheWith(overrides: Partial<Pick<Deps, 'bus' | 'db' | 'log'>> = {}, resubscribeMs = 50) {
  return createMerchantConfigCache({ ...deps, now: () => 1_000_000, ...overrides }, { resubscribeMs });
}

/** Runs `test` on a started cache, stopped afterwards whatever happens. */
async function listening<T>(cache: MerchantConfigCache, test: (cache: MerchantConfigCache) => Promise<T>) {
  await cache.start();
  try {
    return await test(cache);
  } finally {
    await cache.stop();
  }
}

const rename = (merchantId: string, appname: string) =>
  deps.db.update(merchants).set({ appname }).where(eq(merchants.id, merchantId));
const appnameOf = async (cache: MerchantConfigCache, merchantId: string) =>
  (await cache.get(merchantId))?.merchant.appname;

// Token checks are given their own times: the token cache never reads a clock.
const T0 = 5_000_000;
const check = (merchantId = 'm'): CachedVisitorToken => ({
  visitorId: 'v',
  merchantId,
  bid: 'b',
  channel: 'visitor-x',
  expiresAt: T0 + 60_000,
});
const hash = () => randomBytes(8).toString('hex');

describe('invalidations drop the copies they name', () => {
  it('invalidate(id) drops that merchant’s copy only; invalidate() drops every copy', async () => {
    const a = await make.merchant();
    const b = await make.merchant();
    await listening(cacheWith(), async (cache) => {
      expect([await appnameOf(cache, a.merchantId), await appnameOf(cache, b.merchantId)]).toEqual([
        'Test shop',
        'Test shop',
      ]);
      await rename(a.merchantId, 'A1');
      await rename(b.merchantId, 'B1');
      cache.invalidate(a.merchantId);
      expect([await appnameOf(cache, a.merchantId), await appnameOf(cache, b.merchantId)]).toEqual(['A1', 'Test shop']);
      // Both copies are settled (no load in flight): only the clearing itself can drop them.
      await rename(a.merchantId, 'A2');
      await rename(b.merchantId, 'B2');
      cache.invalidate();
      expect([await appnameOf(cache, a.merchantId), await appnameOf(cache, b.merchantId)]).toEqual(['A2', 'B2']);
    });
  });

  it('a load in flight is dropped by its merchant’s invalidation, not by another merchant’s', async () => {
    const a = await make.merchant();
    const b = await make.merchant();
    await listening(cacheWith(), async (cache) => {
      const first = cache.get(a.merchantId);
      cache.invalidate(b.merchantId);
      await first;
      expect(cache.get(a.merchantId)).toBe(first);
      cache.invalidate(a.merchantId);
      const second = cache.get(a.merchantId);
      cache.invalidate(a.merchantId);
      await second;
      await rename(a.merchantId, 'Renamed');
      expect(await appnameOf(cache, a.merchantId)).toBe('Renamed');
    });
  });

  it('an older load settling after a newer one started leaves the newer copy in place', async () => {
    const m = await make.merchant();
    await listening(cacheWith(), async (cache) => {
      const older = cache.get(m.merchantId);
      cache.invalidate(m.merchantId);
      const newer = cache.get(m.merchantId);
      expect(newer).not.toBe(older);
      await Promise.all([older, newer]);
      await rename(m.merchantId, 'Renamed');
      // The newer load started after the invalidation: it is the copy kept.
      expect(cache.get(m.merchantId)).toBe(newer);
      expect(await appnameOf(cache, m.merchantId)).toBe('Test shop');
    });
  });

  it('an older load that fails leaves the newer copy in place', async () => {
    const m = await make.merchant();
    // The load started while the database is down rejects.
    const down = selectsDown(deps.db);
    await listening(cacheWith({ db: down.db }), async (cache) => {
      const failed = cache.get(m.merchantId);
      cache.invalidate(m.merchantId);
      down.restore();
      const newer = cache.get(m.merchantId);
      await expect(failed).rejects.toThrow(DATABASE_DOWN);
      expect((await newer)?.merchant.appname).toBe('Test shop');
      await rename(m.merchantId, 'Renamed');
      expect(cache.get(m.merchantId)).toBe(newer);
      expect(await appnameOf(cache, m.merchantId)).toBe('Test shop');
    });
  });
});

describe('announcements the bus refuses', () => {
  /** A cache whose publications fail, and the warnings it logs. */
  function unpublishable() {
    const warnings: unknown[][] = [];
    const log = { warn: (...args: unknown[]) => warnings.push(args) } as unknown as Deps['log'];
    const bus: EventBus = {
      ...deps.bus,
      publish: async () => {
        throw new Error('bus down');
      },
    };
    return { cache: cacheWith({ bus, log }), warnings };
  }

  it('a change: false, this instance’s copy dropped anyway, the merchant and event logged', async () => {
    const m = await make.merchant();
    const { cache, warnings } = unpublishable();
    await listening(cache, async () => {
      await appnameOf(cache, m.merchantId);
      await rename(m.merchantId, 'Renamed');
      expect(await cache.announceChanged(m.merchantId)).toBe(false);
      expect(await appnameOf(cache, m.merchantId)).toBe('Renamed');
      expect(warnings).toEqual([
        [
          { merchantId: m.merchantId, event: 'merchant.config_changed', err: 'bus down' },
          'cache invalidation not published',
        ],
      ]);
    });
  });

  it('a revocation: false, the check forgotten here anyway (and the epoch moved), the event logged', async () => {
    const { cache, warnings } = unpublishable();
    await listening(cache, async () => {
      const h = hash();
      cache.rememberToken(h, check(), T0, cache.tokenEpoch());
      const epoch = cache.tokenEpoch();
      expect(await cache.announceRevoked(h)).toBe(false);
      expect(cache.token(h, T0)).toBeUndefined();
      expect(cache.tokenEpoch()).not.toBe(epoch);
      expect(warnings).toEqual([
        [{ event: 'visitor_token.revoked', err: 'bus down' }, 'cache invalidation not published'],
      ]);
    });
  });
});

describe('the events the listener acts on', () => {
  it('ignores events it does not know, and known ones without their field, keeping every copy', async () => {
    const m = await make.merchant();
    await listening(cacheWith(), async (cache) => {
      await appnameOf(cache, m.merchantId);
      const kept = hash();
      cache.rememberToken(kept, check(m.merchantId), T0, cache.tokenEpoch());
      const epoch = cache.tokenEpoch();
      await rename(m.merchantId, 'Renamed');
      // Unknown names carrying the fields, the known names without them, and no data at all.
      await deps.bus.publish(CONFIG_CHANNEL, 'merchant.renamed', { merchant_id: m.merchantId, token_hash: kept });
      await deps.bus.publish(CONFIG_CHANNEL, 'merchant.config_changed', { token_hash: kept });
      await deps.bus.publish(CONFIG_CHANNEL, 'visitor_token.revoked', { merchant_id: m.merchantId });
      await deps.bus.publish(CONFIG_CHANNEL, 'merchant.config_changed', null);
      await deps.bus.publish(CONFIG_CHANNEL, 'visitor_token.revoked', null);
      // Then one it acts on: once its effect shows, the ones before it were handled (one channel, in order).
      const sentinel = hash();
      await deps.bus.publish(CONFIG_CHANNEL, 'visitor_token.revoked', { token_hash: sentinel });
      await eventually(() => cache.tokenEpoch() !== epoch, 'the revocation after them');
      expect(cache.tokenEpoch()).toBe(epoch + 1);
      expect(cache.listening).toBe(true);
      expect(cache.token(kept, T0)).toEqual(check(m.merchantId));
      expect(await appnameOf(cache, m.merchantId)).toBe('Test shop');
    });
  });
});

describe('the appkey index', () => {
  it('knows only what it was told while listening; forgets it all when it stops or on a history gap', async () => {
    const cache = cacheWith();
    cache.rememberAppkey('early-appkey', 'm_early');
    cache.rememberToken('early-token', check(), T0, cache.tokenEpoch());
    await listening(cache, async () => {
      // What was told before listening was never kept.
      expect(cache.merchantIdOfAppkey('early-appkey')).toBeUndefined();
      expect(cache.token('early-token', T0)).toBeUndefined();
      cache.rememberAppkey('k1', 'm_one');
      expect(cache.merchantIdOfAppkey('k1')).toBe('m_one');
      expect(cache.merchantIdOfAppkey('k2')).toBeUndefined();
      await deps.bus.publish(CONFIG_CHANNEL, 'history.gap', { since: '0-0' });
      await eventually(() => cache.merchantIdOfAppkey('k1') === undefined, 'the index cleared');
      cache.rememberAppkey('k3', 'm_three');
    });
    expect(cache.merchantIdOfAppkey('k3')).toBeUndefined();
    await listening(cache, async () => expect(cache.merchantIdOfAppkey('k3')).toBeUndefined());
  });

  it('keeps at most 50,000 appkeys, dropping the oldest first', async () => {
    await listening(cacheWith(), async (cache) => {
      for (let i = 0; i <= 50_000; i++) cache.rememberAppkey(`k${i}`, `m${i}`);
      expect(cache.merchantIdOfAppkey('k0')).toBeUndefined();
      expect(cache.merchantIdOfAppkey('k1')).toBe('m1');
      expect(cache.merchantIdOfAppkey('k50000')).toBe('m50000');
    });
  });
});

describe('merchants by appkey through the cache (merchant.ts)', () => {
  it('an appkey found once is remembered, then answered from the configuration copy', async () => {
    const m = await make.merchant();
    await listening(cacheWith(), async (cache) => {
      // The configuration reads the lookups make, by merchant id.
      const reads: (string | undefined)[] = [];
      const cached = {
        ...deps,
        configCache: {
          ...cache,
          get(id: string) {
            reads.push(id);
            return cache.get(id);
          },
        },
      };
      expect((await findMerchantByAppkey(cached, m.appkey))?.id).toBe(m.merchantId);
      expect([cache.merchantIdOfAppkey(m.appkey), reads]).toEqual([m.merchantId, []]);
      expect((await findMerchantByAppkey(cached, m.appkey))?.appname).toBe('Test shop');
      expect(reads).toEqual([m.merchantId]);
      // Renamed behind the cache's back: the copy answers (the database would say 'Renamed').
      await rename(m.merchantId, 'Renamed');
      expect((await findMerchantByAppkey(cached, m.appkey))?.appname).toBe('Test shop');
      // An unknown appkey costs its one lookup, no configuration read, and is not remembered.
      reads.length = 0;
      const unknown = `no-such-${hash()}`;
      expect(await findMerchantByAppkey(cached, unknown)).toBeUndefined();
      expect([cache.merchantIdOfAppkey(unknown), reads]).toEqual([undefined, []]);
    });
  });

  it('a remembered appkey its merchant no longer has, or of a merchant that is gone, finds nothing', async () => {
    const m = await make.merchant();
    await listening(cacheWith(), async (cache) => {
      const cached = { ...deps, configCache: cache };
      expect((await findMerchantByAppkey(cached, m.appkey))?.id).toBe(m.merchantId);
      const newAppkey = `new-${hash()}`;
      await deps.db.update(merchants).set({ appkey: newAppkey }).where(eq(merchants.id, m.merchantId));
      await cache.announceChanged(m.merchantId);
      expect(cache.merchantIdOfAppkey(m.appkey)).toBe(m.merchantId);
      expect(await findMerchantByAppkey(cached, m.appkey)).toBeUndefined();
      expect((await findMerchantByAppkey(cached, newAppkey))?.id).toBe(m.merchantId);
      cache.rememberAppkey('orphan-appkey', 'm_nobody');
      expect(await findMerchantByAppkey(cached, 'orphan-appkey')).toBeUndefined();
    });
  });

  it('a Pusher upgrade: unknown appkeys are charged to the address, known ones never; a cached one is served past the budget', async () => {
    const m = await make.merchant();
    const budget = 2;
    const hardening = { ...deps.config.hardening, pusherUnknownAppkeysPerMinute: budget };
    const limited = { ...deps, config: { ...deps.config, hardening } };
    const spent = clientIp();
    for (let i = 0; i < budget; i++)
      expect(await findPusherAppMerchant(limited, `nope-${hash()}`, spent)).toBeUndefined();
    expect(await refusalOf(findPusherAppMerchant(limited, `nope-${hash()}`, spent))).toMatch(
      /^RATE_LIMITED: Too many unknown appkeys from this address: retry in \d+ s$/,
    );
    // Without the cache the lookup of a known appkey is refused too: the refusal comes first.
    expect(await refusalOf(findPusherAppMerchant(limited, m.appkey, spent))).toMatch(/^RATE_LIMITED: /);
    // Known appkeys cost nothing, however many.
    const other = clientIp();
    for (let i = 0; i <= budget; i++)
      expect((await findPusherAppMerchant(limited, m.appkey, other))?.id).toBe(m.merchantId);
    expect(await findPusherAppMerchant(limited, `nope-${hash()}`, other)).toBeUndefined();
    await listening(cacheWith(), async (cache) => {
      const cached = { ...limited, configCache: cache };
      expect((await findPusherAppMerchant(cached, m.appkey, clientIp()))?.id).toBe(m.merchantId);
      expect((await findPusherAppMerchant(cached, m.appkey, spent))?.id).toBe(m.merchantId);
    });
  });
});

describe('the invalidation listener when the bus fails', () => {
  /** The worker's bus, refusing subscriptions while `down`, ending them at once while `ending`, breaking live ones on `cut()`. */
  function unreliableBus() {
    const state = { down: false, ending: false, subscribes: 0, cutting: false, options: [] as unknown[] };
    const bus: EventBus = {
      ...deps.bus,
      async *subscribe(channel, opts) {
        state.subscribes++;
        state.options.push(opts);
        if (state.down) throw new Error('redis down');
        if (state.ending) return;
        for await (const event of deps.bus.subscribe(channel, opts)) {
          if (state.cutting) {
            state.cutting = false;
            throw new Error('connection lost');
          }
          yield event;
        }
      },
    };
    /** Breaks the live subscription (on the next event, which this publishes). */
    const cut = async () => {
      state.cutting = true;
      await deps.bus.publish(CONFIG_CHANNEL, 'test.nudge', {});
    };
    return { bus, state, cut };
  }

  it('a start the bus refuses rejects with its error and is not retried behind the caller; the next start listens', async () => {
    const { bus, state } = unreliableBus();
    state.down = true;
    const cache = cacheWith({ bus }, 1);
    try {
      await expect(cache.start()).rejects.toThrow('redis down');
      expect(cache.listening).toBe(false);
      // A retry would have come after 1 ms, before this longer wait ends (timers fire in order).
      await sleep(30);
      expect(state.subscribes).toBe(1);
      state.down = false;
      await cache.start();
      expect([cache.listening, state.subscribes]).toEqual([true, 2]);
    } finally {
      await cache.stop();
    }
  });

  it('a subscription that ends before it is live lets start() resolve, not listening', async () => {
    const { bus, state } = unreliableBus();
    state.ending = true;
    const cache = cacheWith({ bus });
    try {
      const outcome = await Promise.race([cache.start().then(() => 'resolved'), sleep(2_000, 'still pending')]);
      expect([outcome, cache.listening]).toEqual(['resolved', false]);
    } finally {
      await cache.stop();
    }
  });

  it('after a lost stream it keeps trying while the bus refuses, and listens again once it answers', async () => {
    const { bus, state, cut } = unreliableBus();
    const cache = cacheWith({ bus }, 1);
    try {
      await cache.start();
      state.down = true;
      await cut();
      await eventually(() => state.subscribes >= 4, 'several refused attempts');
      expect(cache.listening).toBe(false);
      state.down = false;
      await eventually(() => cache.listening, 'listening again');
    } finally {
      await cache.stop();
    }
  });

  it('stop() ends the subscription at once (its signal aborted); stop() of a cache never started resolves', async () => {
    const { bus, state } = unreliableBus();
    const cache = cacheWith({ bus });
    await cache.start();
    expect(state.options).toEqual([{ signal: expect.any(AbortSignal), maxQueued: 10_000 }]);
    const stopped = cache.stop();
    expect(cache.listening).toBe(false);
    await stopped;
    expect((state.options[0] as { signal: AbortSignal }).signal.aborted).toBe(true);
    const never = cacheWith();
    await never.stop();
    expect(never.listening).toBe(false);
  });
});
