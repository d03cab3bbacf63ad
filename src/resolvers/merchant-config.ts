import { asc, desc, eq, sql } from 'drizzle-orm';
import { preparedQuery } from '../db/prepared.js';
import {
  agentGroups,
  type BusinessHoursCalendar,
  type Merchant,
  merchants,
  visitorAttributeDefs,
} from '../db/schema.js';
import type { Deps } from '../deps.js';
import { type EventData, toWire } from './event-catalog.js';
import { isEditable, type VisitorAttributeDef } from './merchant.js';

/**
 * The instance's in-process cache of what a merchant configures (the merchant row: settings,
 * switches, upload limits, workbench settings, extensions; its agent groups; its visitor
 * attribute definitions) and, briefly, of visitor token checks. docs/operations.md "Configuration cache".
 *
 * - It caches only while it listens to {@link CONFIG_CHANNEL} (from `start()` until `stop()`):
 *   a deps that was never started (the CLI, domain tests) reads the database every time.
 * - Every write path announces its change ({@link announceMerchantConfigChanged}): the writing
 *   instance drops its copy at once, every other instance when the bus event arrives (the Redis
 *   pub/sub delay). If that event is lost, the copy is dropped after {@link CONFIG_SAFETY_TTL_MS}.
 * - A visitor token check is kept at most {@link VISITOR_TOKEN_CACHE_MS} from the start of the
 *   query that produced it and never past the token's expiry; a revocation is announced too. So a
 *   revoked token is refused on every instance within 1 s at worst, even with the event lost.
 * - A load that overlaps an invalidation is not kept (a configuration's load is kept from its
 *   start, so the invalidation drops it; a token check is kept after its query, so a revocation
 *   bumps an epoch the check compares), and a copy read before a change is never stored after it.
 */

/** The bus channel of invalidations. Internal: no client identity may subscribe to it. */
export const CONFIG_CHANNEL = 'internal:config';
/** A cached merchant configuration is reloaded after this long even without an event. */
export const CONFIG_SAFETY_TTL_MS = 30_000;
/** A visitor token check is reused for at most this long. */
export const VISITOR_TOKEN_CACHE_MS = 1_000;
/** Cached token checks kept at most (oldest dropped first). */
const MAX_TOKENS = 50_000;
/** Wait before listening again after the invalidation subscription failed. */
const RESUBSCRIBE_MS = 1_000;

interface MerchantConfig {
  merchant: Merchant;
  /** Default group first, then by position and name. */
  groups: { id: string; name: string; isDefault: boolean; businessHours: BusinessHoursCalendar | null }[];
  /** In display order. */
  attributeDefs: VisitorAttributeDef[];
}

/** What a visitor token check yields (the visitor viewer's fields). */
export interface CachedVisitorToken {
  visitorId: string;
  merchantId: string;
  bid: string;
  channel: string;
  /** Unix ms: the token's own expiry. */
  expiresAt: number;
}

export interface MerchantConfigCache {
  /** The merchant's configuration, from memory when cached; undefined when there is no such merchant. */
  get(merchantId: string): Promise<MerchantConfig | undefined>;
  /** Drops one merchant's copy (or every copy): the next read loads it again. */
  invalidate(merchantId?: string): void;
  /** A cached token check still valid at `now`, if any. */
  token(hash: string, now: number): CachedVisitorToken | undefined;
  /** The epoch to pass to `rememberToken` (read before the query). */
  tokenEpoch(): number;
  /** Keeps a token check made by a query started at `startedAt` (unless a revocation came since `epoch`). */
  rememberToken(hash: string, value: CachedVisitorToken, startedAt: number, epoch: number): void;
  forgetToken(hash: string): void;
  /**
   * The merchant an appkey was found to name (a Pusher upgrade, a visitor token request), while
   * the invalidations are heard. Appkeys are never reassigned; readers still check the merchant's
   * configuration copy names the same appkey.
   */
  merchantIdOfAppkey(appkey: string): string | undefined;
  rememberAppkey(appkey: string, merchantId: string): void;
  /** After a committed change: drops this instance's copy now and publishes the invalidation (false: not published). */
  announceChanged(merchantId: string): Promise<boolean>;
  /** After a revocation: forgets the token here and publishes it (false: not published). */
  announceRevoked(tokenHash: string): Promise<boolean>;
  /** True while the invalidation subscription is live (and so while anything is cached). */
  readonly listening: boolean;
  /** Subscribes to invalidations; resolves once listening. Idempotent. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

const merchantById = preparedQuery((db) =>
  db
    .select()
    .from(merchants)
    .where(eq(merchants.id, sql.placeholder('merchantId')))
    .limit(1)
    .prepare('merchant_by_id'),
);

const groupsOf = preparedQuery((db) =>
  db
    .select()
    .from(agentGroups)
    .where(eq(agentGroups.merchantId, sql.placeholder('merchantId')))
    .orderBy(desc(agentGroups.isDefault), asc(agentGroups.position), asc(agentGroups.name))
    .prepare('agent_groups_of'),
);

const attributeDefsOf = preparedQuery((db) =>
  db
    .select()
    .from(visitorAttributeDefs)
    .where(eq(visitorAttributeDefs.merchantId, sql.placeholder('merchantId')))
    .orderBy(asc(visitorAttributeDefs.position), asc(visitorAttributeDefs.key))
    .prepare('attribute_defs_of'),
);

/** Reads a merchant's configuration from the database (three queries in parallel). */
export async function loadMerchantConfig(deps: Pick<Deps, 'db'>, merchantId: string) {
  const [[merchant], groups, defs] = await Promise.all([
    merchantById(deps.db).execute({ merchantId }),
    groupsOf(deps.db).execute({ merchantId }),
    attributeDefsOf(deps.db).execute({ merchantId }),
  ]);
  if (!merchant) return undefined;
  return {
    merchant,
    groups: groups.map((g) => ({ id: g.id, name: g.name, isDefault: g.isDefault, businessHours: g.businessHours })),
    attributeDefs: defs.map((d) => ({
      key: d.key,
      label: d.label,
      type: d.type,
      editable: isEditable(d.type, d.editable),
    })),
  } satisfies MerchantConfig;
}

export function createMerchantConfigCache(
  deps: Pick<Deps, 'db' | 'bus' | 'log' | 'now'>,
  { resubscribeMs = RESUBSCRIBE_MS }: { resubscribeMs?: number } = {},
): MerchantConfigCache {
  // Nothing is cached unless the invalidations are heard: the stores keep a copy only while the
  // listener listens, and every copy goes when it stops (`onStopped`), so a lookup needs no check.
  const isListening = () => listener.listening;
  const configs = createConfigCopies(deps, isListening);
  const tokens = createTokenChecks(isListening);
  const appkeys = createAppkeyIndex(isListening);
  const clearAll = () => {
    configs.invalidate();
    tokens.clear();
    appkeys.clear();
  };
  const listener = createInvalidationListener(deps, resubscribeMs, {
    onEvent(event, data) {
      const d = data as { merchant_id?: string; token_hash?: string };
      if (event === 'merchant.config_changed' && typeof d?.merchant_id === 'string') configs.invalidate(d.merchant_id);
      else if (event === 'visitor_token.revoked' && typeof d?.token_hash === 'string') tokens.forget(d.token_hash);
      else if (event === 'history.gap') clearAll();
    },
    // Not listening means not caching: whatever is kept may miss a change.
    onStopped: clearAll,
  });

  async function announce<N extends 'merchant.config_changed' | 'visitor_token.revoked'>(
    name: N,
    data: EventData<N>,
    logged: Record<string, unknown>,
  ) {
    try {
      await deps.bus.publish(CONFIG_CHANNEL, name, toWire(name, data));
      return true;
    } catch (error) {
      deps.log.warn({ ...logged, event: name, err: (error as Error).message }, 'cache invalidation not published');
      return false;
    }
  }

  return {
    get listening() {
      return listener.listening;
    },
    get: configs.get,
    invalidate: configs.invalidate,
    token: tokens.get,
    tokenEpoch: tokens.epoch,
    rememberToken: tokens.remember,
    forgetToken: tokens.forget,
    merchantIdOfAppkey: appkeys.get,
    rememberAppkey: appkeys.remember,
    async announceChanged(merchantId) {
      configs.invalidate(merchantId);
      return announce('merchant.config_changed', { merchantId }, { merchantId });
    },
    async announceRevoked(tokenHash) {
      tokens.forget(tokenHash);
      return announce('visitor_token.revoked', { tokenHash }, {});
    },
    start: listener.start,
    async stop() {
      listener.stop();
      clearAll();
    },
  };
}

/** The merchant configurations kept in memory while the invalidations are heard. */
function createConfigCopies(deps: Pick<Deps, 'db' | 'now'>, isListening: () => boolean) {
  const configs = new Map<string, { value: Promise<MerchantConfig | undefined>; loadedAt: number }>();
  return {
    get(merchantId: string): Promise<MerchantConfig | undefined> {
      if (!isListening()) return loadMerchantConfig(deps, merchantId);
      const now = deps.now();
      const hit = configs.get(merchantId);
      if (hit && now - hit.loadedAt < CONFIG_SAFETY_TTL_MS) return hit.value;
      const value = loadMerchantConfig(deps, merchantId);
      // Concurrent readers share one load, kept from its start: an invalidation drops it even
      // while it is in flight, so a load overlapping a change is never kept. A failed one is not.
      const entry = { value, loadedAt: now };
      configs.set(merchantId, entry);
      value.catch(() => {
        if (configs.get(merchantId) === entry) configs.delete(merchantId);
      });
      return value;
    },
    /** Drops one merchant's copy, or every copy. */
    invalidate(merchantId?: string) {
      if (merchantId === undefined) configs.clear();
      else configs.delete(merchantId);
    },
  };
}

/** Visitor token checks kept briefly (never past the token's expiry) while the revocations are heard. */
function createTokenChecks(isListening: () => boolean) {
  const tokens = new Map<string, { value: CachedVisitorToken; until: number }>();
  // Bumped by every revocation: a check whose query started before one is not kept.
  let epoch = 0;
  return {
    get(hash: string, now: number): CachedVisitorToken | undefined {
      const hit = tokens.get(hash);
      if (!hit) return undefined;
      if (now >= hit.until || now >= hit.value.expiresAt) {
        tokens.delete(hash);
        return undefined;
      }
      return hit.value;
    },
    epoch: () => epoch,
    remember(hash: string, value: CachedVisitorToken, startedAt: number, since: number) {
      if (!isListening() || since !== epoch) return;
      if (tokens.size >= MAX_TOKENS) {
        const oldest = tokens.keys().next().value;
        if (oldest !== undefined) tokens.delete(oldest);
      }
      tokens.set(hash, { value, until: startedAt + VISITOR_TOKEN_CACHE_MS });
    },
    forget(hash: string) {
      epoch++;
      tokens.delete(hash);
    },
    clear() {
      epoch++;
      tokens.clear();
    },
  };
}

/**
 * Appkey → merchant id, for the appkeys found in the database while the invalidations are heard
 * (only those: an unknown appkey is never kept, so a made-up one cannot fill it beyond the
 * merchants there are, and a merchant registered later is found).
 */
function createAppkeyIndex(isListening: () => boolean) {
  const ids = new Map<string, string>();
  return {
    get: (appkey: string) => ids.get(appkey),
    remember(appkey: string, merchantId: string) {
      if (!isListening()) return;
      if (ids.size >= MAX_TOKENS) {
        const oldest = ids.keys().next().value;
        if (oldest !== undefined) ids.delete(oldest);
      }
      ids.set(appkey, merchantId);
    },
    clear: () => ids.clear(),
  };
}

/**
 * The subscription to {@link CONFIG_CHANNEL}: live from `start()` until `stop()`, listening again
 * after a pause when the bus drops it. `onStopped` runs whenever it stops listening.
 */
function createInvalidationListener(
  deps: Pick<Deps, 'bus' | 'log'>,
  resubscribeMs: number,
  handlers: { onEvent(event: string, data: unknown): void; onStopped(): void },
) {
  let listening = false;
  let abort: AbortController | undefined;
  let started: Promise<void> | undefined;
  let retry: NodeJS.Timeout | undefined;

  /** Listens again after a pause, and keeps trying while the bus refuses (until `stop()`). */
  function scheduleRetry(previous: AbortController) {
    retry = setTimeout(() => {
      if (abort !== previous) return; // stopped, or started afresh
      listen().catch(() => {
        if (abort && !abort.signal.aborted) scheduleRetry(abort);
      });
    }, resubscribeMs);
    retry.unref?.();
  }

  /** Subscribes; resolves when live (after the `subscribed` event), then consumes in the background. */
  function listen(): Promise<void> {
    const controller = new AbortController();
    abort = controller;
    const events = deps.bus.subscribe(CONFIG_CHANNEL, { signal: controller.signal, maxQueued: 10_000 });
    return new Promise<void>((resolve, reject) => {
      let live = false;
      void (async () => {
        try {
          for await (const e of events) {
            if (!live) {
              live = true;
              listening = true;
              resolve();
            }
            handlers.onEvent(e.event, e.data);
          }
        } catch (error) {
          if (!live) reject(error);
          else if (!controller.signal.aborted)
            deps.log.warn(
              { err: (error as Error).message },
              'configuration cache: invalidations lost, listening again',
            );
        } finally {
          listening = false;
          handlers.onStopped();
          if (live && !controller.signal.aborted) scheduleRetry(controller);
          if (!live) resolve();
        }
      })();
    });
  }

  return {
    get listening() {
      return listening;
    },
    /** Resolves once listening. Idempotent. */
    start() {
      started ??= listen().catch((error) => {
        started = undefined;
        throw error;
      });
      return started;
    },
    stop() {
      clearTimeout(retry);
      abort?.abort();
      abort = undefined;
      started = undefined;
      listening = false;
    },
  };
}

/**
 * Every write of a merchant's configuration calls this after its commit: this instance drops its
 * copy at once, the others when the event arrives. Resolves false when the event could not be
 * published (the other instances then reload within {@link CONFIG_SAFETY_TTL_MS}).
 */
export const announceMerchantConfigChanged = (deps: Pick<Deps, 'configCache'>, merchantId: string) =>
  deps.configCache.announceChanged(merchantId);

/** A visitor token was revoked: every instance forgets its cached check (hash of the token only). */
export const announceVisitorTokenRevoked = (deps: Pick<Deps, 'configCache'>, tokenHash: string) =>
  deps.configCache.announceRevoked(tokenHash);
