import type { Redis } from 'ioredis';
import { createSmsDriver } from './auth/sms-driver.js';
import type { Config } from './config.js';
import { type Database, openDatabase } from './db/client.js';
import type { Deps } from './deps.js';
import type { Logger } from './log.js';
import { createMetrics } from './observability/metrics.js';
import { createImagePool } from './resolvers/attachments/images.js';
import { createSendGate } from './resolvers/budgets/chat.js';
import { eventLoopLoad } from './resolvers/budgets/fair-share.js';
import { createMerchantConfigCache, type MerchantConfigCache } from './resolvers/merchant-config.js';
import { createRealtimeService, type RealtimeService } from './resolvers/realtime.js';
import { memoryEventBus } from './stores/bus-memory.js';
import { redisEventBus } from './stores/bus-redis.js';
import { memoryKeyValueStore, redisKeyValueStore } from './stores/kv.js';
import { memoryPresenceStore, redisPresenceStore } from './stores/presence-store.js';
import { rateLimiterFactory } from './stores/rate-limits.js';
import { createObjectStorage } from './stores/storage/index.js';

/**
 * The composition of the deps (the composition root's: app.ts, the CLI, tests and benchmarks
 * build them here); the `Deps` type stays low in src/deps.ts, which the domain imports.
 */

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
  const metrics = createMetrics({ enabled: config.metricsEnabled });
  const onHistoryRead = () => metrics.historyRead();
  const bus = redis
    ? redisEventBus({
        redis,
        subscriber: subscriber as Redis,
        prefix: config.redisPrefix,
        historySize: config.channelHistorySize,
        onHistoryRead,
      })
    : memoryEventBus({ historySize: config.channelHistorySize, onHistoryRead });
  const storage = await createObjectStorage(config.attachments);
  const sendLoad = eventLoopLoad(config.chatLimits.fairShareLoopDelayMs);
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
    metrics,
    now: Date.now,
    storage,
    imageWork: createImagePool(config.attachments),
    chatSends: createSendGate(config.chatLimits, sendLoad),
    realtime: undefined as unknown as RealtimeService, // set below: the service reads these deps
    configCache: undefined as unknown as MerchantConfigCache, // set below, likewise
    async close() {
      sendLoad.stop();
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
