import type { Redis } from 'ioredis';
import type { SmsDriver } from './auth/sms-driver.js';
import type { Config } from './config.js';
import type { Database } from './db/client.js';
import type { Logger } from './log.js';
import type { Metrics } from './observability/metrics.js';
import type { WorkPool } from './resolvers/attachments/work-pool.js';
import type { SendGate } from './resolvers/budgets/chat.js';
import type { MerchantConfigCache } from './resolvers/merchant-config.js';
import type { RealtimeService } from './resolvers/realtime.js';
import type { EventBus } from './stores/bus.js';
import type { KeyValueStore } from './stores/kv.js';
import type { PresenceStore } from './stores/presence-store.js';
import type { RateLimiterFactory } from './stores/rate-limits.js';
import type { ObjectStorage } from './stores/storage/index.js';

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
  /** Visitor sends being stored, per merchant (src/resolvers/budgets/chat.ts, fairness between merchants). */
  chatSends: SendGate;
  now: () => number;
}
