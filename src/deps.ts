import type { Redis } from 'ioredis';
import { createSmsDriver, type SmsDriver } from './auth/sms-driver.js';
import type { Config } from './config.js';
import { type Database, openDatabase } from './db/client.js';
import type { Logger } from './log.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { createImagePool } from './resolvers/attachments/images.js';
import type { WorkPool } from './resolvers/attachments/work-pool.js';
import { createMerchantConfigCache, type MerchantConfigCache } from './resolvers/merchant-config.js';
import { createRealtimeService, type RealtimeService } from './resolvers/realtime.js';
import { type EventBus, memoryEventBus, redisEventBus } from './stores/bus.js';
import { type KeyValueStore, memoryKeyValueStore, redisKeyValueStore } from './stores/kv.js';
import { memoryPresenceStore, type PresenceStore, redisPresenceStore } from './stores/presence-store.js';
import { type RateLimiterFactory, rateLimiterFactory } from './stores/rate-limits.js';
import { createObjectStorage, type ObjectStorage } from './stores/storage/index.js';

/** Everything the domain layer (src/resolvers/) works with, passed in rather than imported. */
export interface Deps {
  config: Config;
  database: Database;
  db: Database['db'];
  /** Present when REDIS_URL is set; key names are prefixed with `config.redisPrefix`. */
  redis?: Redis;
  kv: KeyValueStore;
  bus: EventBus;
  /** Agents' live connections and published states (src/resolvers/presence.ts). */
  presence: PresenceStore;
  rateLimiter: RateLimiterFactory;
  sms: SmsDriver;
  log: Logger;
  /** Counters and gauges the domain and adapters report to (no-ops when METRICS_ENABLED is off). */
  metrics: Metrics;
  /** The instance's real-time service (Session-end watches, presence heartbeat); started by the app. */
  realtime: RealtimeService;
  /**
   * Merchants' configuration and visitor token checks in memory, invalidated through the bus
   * (src/resolvers/merchant-config.ts); caches only once started by the app.
   */
  configCache: MerchantConfigCache;
  /** Where attachment bytes live: a local directory or an S3-compatible bucket (README "Attachments"). */
  storage: ObjectStorage;
  /** The instance's bounded pool of image re-encoding jobs (src/resolvers/attachments/images.ts). */
  imageWork: WorkPool;
  now: () => number;
}

/**
 * Builds the deps from the config. `database`: an already opened database to use instead of the
 * configured one (its ownership passes to the deps, which close it).
 */
export async function buildDeps(
  config: Config,
  log: Logger,
  opts: { database?: Database } = {},
): Promise<Deps & { close(): Promise<void> }> {
  const database = opts.database ?? (await openDatabase(config));
  let redis: Redis | undefined;
  let subscriber: Redis | undefined;
  if (config.redisUrl) {
    // Loaded only when configured: the embedded default starts without the Redis client (and the
    // S3 SDK below), which keeps start-up, and every test worker's, a few hundred ms shorter.
    const { connectRedis, redisReady } = await import('./stores/redis.js');
    redis = connectRedis(config.redisUrl, { keyPrefix: config.redisPrefix });
    subscriber = connectRedis(config.redisUrl);
    await Promise.all([redisReady(redis), redisReady(subscriber)]);
  }
  const bus = redis
    ? redisEventBus({
        redis,
        subscriber: subscriber as Redis,
        prefix: config.redisPrefix,
        historySize: config.channelHistorySize,
      })
    : memoryEventBus({ historySize: config.channelHistorySize });
  const storage = await createObjectStorage(config.attachments);
  const deps: Deps & { close(): Promise<void> } = {
    config,
    database,
    db: database.db,
    redis,
    kv: redis ? redisKeyValueStore(redis) : memoryKeyValueStore(),
    bus,
    presence: redis ? redisPresenceStore(redis) : memoryPresenceStore(),
    rateLimiter: rateLimiterFactory({ redis }),
    sms: createSmsDriver({
      driver: config.smsDriver,
      webhookUrl: config.smsWebhookUrl,
      log,
      printCode: config.env === 'development',
    }),
    log,
    metrics: createMetrics({ enabled: config.metricsEnabled }),
    now: Date.now,
    storage,
    imageWork: createImagePool(config.attachments),
    realtime: undefined as unknown as RealtimeService, // set below: the service reads these deps
    configCache: undefined as unknown as MerchantConfigCache, // set below, likewise
    async close() {
      await deps.realtime.stop();
      await deps.configCache.stop();
      await deps.storage.close();
      await bus.close();
      subscriber?.disconnect();
      redis?.disconnect();
      await database.close();
    },
  };
  deps.realtime = createRealtimeService(deps);
  deps.configCache = createMerchantConfigCache(deps);
  return deps;
}
