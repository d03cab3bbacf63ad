import { z } from 'zod';

/** Everything the gateway reads from its environment, validated once at start-up. */
export interface Config {
  env: 'development' | 'production' | 'test';
  port: number;
  host: string;
  /** PostgreSQL via postgres.js; when absent the embedded PGlite in `pgliteDir` is used. */
  databaseUrl?: string;
  pgliteDir: string;
  /** Redis for sessions, captchas, rate limits and pub/sub; when absent, in-process stores. */
  redisUrl?: string;
  /** Prefix of every Redis key, so several deployments (or test runs) can share one Redis. */
  redisPrefix: string;
  sessionSecret: string;
  sessionTtlSeconds: number;
  sessionAbsoluteTtlSeconds: number;
  publicWsAddress?: string;
  demoSeed: boolean;
  captchaTestAnswer?: string;
  smsDriver: 'log' | 'webhook';
  smsWebhookUrl?: string;
  smsRegistration: boolean;
  /** Merchant self-registration through /agent/join (docs/desk.md): off by default. */
  registration: boolean;
  internalApiToken?: string;
  trustProxy: boolean;
  allowedOrigins: string[];
  /** Abuse limits of the HTTP server and the visitor bootstrap (docs/security.md). */
  hardening: {
    /** `visitor.online` is published at most once per visitor per this many seconds. */
    visitorOnlineIntervalSeconds: number;
    /** Node's `server.headersTimeout`: the request line and headers must arrive within it. */
    headersTimeoutMs: number;
    /** Node's `server.requestTimeout`: the whole request (body included) must arrive within it. */
    requestTimeoutMs: number;
    /** Node's `server.keepAliveTimeout`: an idle keep-alive connection is closed after it. */
    keepAliveTimeoutMs: number;
    /** Open HTTP connections per client address (0: no cap); not applied behind TRUST_PROXY. */
    maxConnectionsPerAddress: number;
    /** When set, GET /metrics requires `Authorization: Bearer <token>`. */
    metricsToken?: string;
    /** `POST /pusher/auth` calls per client address per minute. */
    pusherAuthPerMinute: number;
  };
  /** Budgets of the chat's writes (src/resolvers/budgets/chat.ts, README "Security and reliability"). */
  chatLimits: {
    /** Messages per sender (visitor or agent) per 10 seconds. */
    messageBurst: number;
    /** Messages per sender per hour. */
    messagesPerHour: number;
    /** Visitor messages per merchant per minute, all its visitors together. */
    merchantMessagesPerMinute: number;
    /** Conversations a visitor may open per hour, and as many it may close. */
    conversationsPerHour: number;
    /** Visitor sends of one merchant being stored at once on an instance (fairness between merchants). */
    merchantSendsInFlight: number;
    /** Visitor sends of one merchant waiting for one of those slots; past it refused at once. */
    merchantSendsQueued: number;
    /**
     * The instance is busy when its event loop runs this late on average (≈ 0.5 s): then a
     * merchant over an equal share of the recent visitor sends is refused first (0: always).
     */
    fairShareLoopDelayMs: number;
    /** Contact details a visitor may leave per hour (`leaveContactDetails`). */
    contactDetailsPerHour: number;
    /** Contact details one merchant's visitors may leave per minute, all together. */
    merchantContactDetailsPerMinute: number;
    /** Requests for a human a visitor may make per hour (`requestHuman`, `/visitor/chat/human`). */
    humanRequestsPerHour: number;
    /** Requests for a human one merchant's visitors may make per minute, all together. */
    merchantHumanRequestsPerMinute: number;
    /** Reads a visitor may make per minute (its messages, conversation and bootstrap, together). */
    visitorReadsPerMinute: number;
    /** Read receipts a visitor may send per minute (`markRead`, `/visitor/message/read`). */
    readMarksPerMinute: number;
    /** Ratings a visitor may send per hour (`rateConversation`, `/visitor/chat/rate`), repeats included. */
    ratingsPerHour: number;
  };
  logLevel: string;
  presenceGraceSeconds: number;
  channelHistorySize: number;
  /** Caps on real-time sockets and subscriptions (src/subscriptions/limits.ts, docs/security.md). */
  realtimeLimits: {
    socketsPerIdentity: number;
    socketsPerAddress: number;
    subscriptionsPerIdentity: number;
    subscriptionsPerAddress: number;
    maxSockets: number;
    maxSubscriptions: number;
  };
  visitorTokenTtlSeconds: number;
  /** Serve Prometheus metrics at /metrics. */
  metricsEnabled: boolean;
  /** Create OpenTelemetry spans (for a tracer provider registered by the process). */
  otelEnabled: boolean;
  /** Attachments (docs/attachments.md): where files are stored and how they are served. */
  attachments: AttachmentsConfig;
  /** Webhook delivery (docs/integration.md "Webhooks"). */
  webhooks: WebhooksConfig;
  /** API keys (docs/integration.md "API keys"): requests one key may make per minute, across instances. */
  apiKeyRequestsPerMinute: number;
  /** Bots (docs/integration.md "Bots"). */
  bots: {
    /** A bot that has not answered a visitor's message within this many seconds hands the conversation off. */
    handoffTimeoutSeconds: number;
  };
}

export interface WebhooksConfig {
  /** Seconds between attempts: the n-th retry waits the n-th value (±10 % jitter); after the last, the delivery fails. */
  retrySchedule: number[];
  /** Endpoints on private, loopback and link-local addresses are allowed (development and tests). */
  allowPrivate: boolean;
  /** An attempt without a complete answer within this many ms fails (and is retried). */
  timeoutMs: number;
  /** Attempts in flight per endpoint across all instances. */
  concurrency: number;
  /** After a rotation, the previous secret signs too for this many seconds. */
  secretOverlapSeconds: number;
  /** Finished deliveries are kept in the log this many days. */
  logRetentionDays: number;
}

/** The default retry schedule: 10 retries over about 27.7 hours (≥ 24 h even with -10 % jitter). */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE = '5,30,120,600,1800,3600,7200,14400,28800,43200';

export interface AttachmentsConfig {
  /** `local`: files under `dir`/objects; `s3`: an S3-compatible bucket. */
  driver: 'local' | 's3';
  /** The local driver's files, and the scratch directory (`incoming/`) of uploads in progress with either driver. */
  dir: string;
  s3?: {
    /** Unset: AWS S3 itself; otherwise MinIO, Cloudflare R2, Ceph… */
    endpoint?: string;
    region: string;
    bucket: string;
    /** Unset: the AWS SDK's default credential chain (instance role, AWS_* variables). */
    accessKeyId?: string;
    secretAccessKey?: string;
    forcePathStyle: boolean;
    /** Prepended to every object key (several deployments can share one bucket). */
    keyPrefix: string;
  };
  /** Lifetime of a signed download URL, in seconds. */
  urlTtlSeconds: number;
  /** An upload no message references is removed after this many seconds. */
  unreferencedTtlSeconds: number;
  /** Uploads per identity (visitor or agent) per minute. */
  uploadsPerMinute: number;
  /** Bytes a visitor may upload per hour (all its uploads counted, sent as messages or not). */
  uploadBytesPerVisitorPerHour: number;
  /** Bytes visitors from one client address may upload per hour, whatever their tokens. */
  uploadBytesPerAddressPerHour: number;
  /** The pixel budget of an image upload, every frame of an animation counted. */
  imageMaxPixels: number;
  /** Image re-encoding jobs at once on the instance. */
  imageWorkers: number;
  /** Image re-encoding jobs at once for one merchant. */
  imageWorkersPerMerchant: number;
  /** Image jobs of one merchant waiting for a slot at once (more are refused at once). */
  imageQueuePerMerchant: number;
  /** How long an image job waits for a slot before it is refused (503, Retry-After). */
  imageQueueTimeoutMs: number;
}

export class ConfigError extends Error {}

const bool = z
  .enum(['1', '0', 'true', 'false', 'on', 'off', 'yes', 'no'])
  .transform((v) => ['1', 'true', 'on', 'yes'].includes(v));
const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const url = (protocols: string[]) =>
  z
    .string()
    .url()
    .refine((v) => protocols.includes(new URL(v).protocol), `must start with ${protocols.join(' or ')}//`);

const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: int(0, 65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATABASE_URL: url(['postgres:', 'postgresql:']).optional(),
  PGLITE_DIR: z.string().min(1).default('.data/pglite'),
  REDIS_URL: url(['redis:', 'rediss:']).optional(),
  REDIS_PREFIX: z
    .string()
    .regex(/^[\w:.-]{1,64}$/)
    .default('parley:'),
  SESSION_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  SESSION_TTL_SECONDS: int(60, 30 * 86400).default(8 * 3600),
  SESSION_ABSOLUTE_TTL_SECONDS: int(60, 90 * 86400).default(7 * 86400),
  PUBLIC_WS_ADDRESS: url(['ws:', 'wss:']).optional(),
  DEMO_SEED: bool.optional(),
  CAPTCHA_TEST_ANSWER: z
    .string()
    .regex(/^[A-Za-z0-9]{1,16}$/, 'must be 1-16 letters or digits')
    .optional(),
  SMS_DRIVER: z.enum(['log', 'webhook']).default('log'),
  SMS_WEBHOOK_URL: url(['http:', 'https:']).optional(),
  SMS_REGISTRATION: bool.default('off'),
  REGISTRATION: bool.default('off'),
  INTERNAL_API_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  TRUST_PROXY: bool.default('off'),
  ALLOWED_ORIGINS: z.string().optional(),
  VISITOR_ONLINE_INTERVAL_SECONDS: int(1, 86_400).default(60),
  HTTP_HEADERS_TIMEOUT_MS: int(1000, 600_000).default(10_000),
  HTTP_REQUEST_TIMEOUT_MS: int(1000, 3_600_000).default(30_000),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: int(1000, 600_000).default(5000),
  MAX_CONNECTIONS_PER_ADDRESS: int(0, 1_000_000).default(256),
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  PUSHER_AUTH_PER_MINUTE: int(1, 1_000_000).default(120),
  CHAT_MESSAGE_BURST: int(1, 1_000_000).default(30),
  CHAT_MESSAGES_PER_HOUR: int(1, 10_000_000).default(1200),
  CHAT_MERCHANT_MESSAGES_PER_MINUTE: int(1, 10_000_000).default(1200),
  CHAT_CONVERSATIONS_PER_HOUR: int(1, 1_000_000).default(30),
  CHAT_MERCHANT_SENDS_IN_FLIGHT: int(1, 100_000).default(4),
  CHAT_MERCHANT_SENDS_QUEUED: int(0, 1_000_000).default(16),
  CHAT_FAIR_SHARE_LOOP_DELAY_MS: int(0, 60_000).default(20),
  CHAT_CONTACT_DETAILS_PER_HOUR: int(1, 1_000_000).default(10),
  CHAT_MERCHANT_CONTACT_DETAILS_PER_MINUTE: int(1, 10_000_000).default(300),
  CHAT_HUMAN_REQUESTS_PER_HOUR: int(1, 1_000_000).default(10),
  CHAT_MERCHANT_HUMAN_REQUESTS_PER_MINUTE: int(1, 10_000_000).default(300),
  CHAT_VISITOR_READS_PER_MINUTE: int(1, 10_000_000).default(600),
  CHAT_READ_MARKS_PER_MINUTE: int(1, 10_000_000).default(300),
  CHAT_RATINGS_PER_HOUR: int(1, 1_000_000).default(10),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  PRESENCE_GRACE_SECONDS: int(0, 3600).default(15),
  CHANNEL_HISTORY_SIZE: int(10, 1_000_000).default(1000),
  WS_MAX_SOCKETS_PER_IDENTITY: int(1, 1_000_000).default(20),
  WS_MAX_SOCKETS_PER_ADDRESS: int(1, 1_000_000).default(200),
  WS_MAX_SUBSCRIPTIONS_PER_IDENTITY: int(1, 10_000_000).default(100),
  WS_MAX_SUBSCRIPTIONS_PER_ADDRESS: int(1, 10_000_000).default(1000),
  WS_MAX_SOCKETS: int(1, 10_000_000).default(10_000),
  WS_MAX_SUBSCRIPTIONS: int(1, 10_000_000).default(20_000),
  VISITOR_TOKEN_TTL_SECONDS: int(60, 365 * 86400).default(30 * 86400),
  METRICS_ENABLED: bool.default('on'),
  OTEL_ENABLED: bool.default('off'),
  STORAGE_DRIVER: z.enum(['local', 's3']).default('local'),
  ATTACHMENTS_DIR: z.string().min(1).default('.data/attachments'),
  S3_ENDPOINT: url(['http:', 'https:']).optional(),
  S3_REGION: z.string().min(1).default('us-east-1'),
  S3_BUCKET: z.string().min(1).optional(),
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  S3_FORCE_PATH_STYLE: bool.default('off'),
  S3_KEY_PREFIX: z
    .string()
    .regex(/^[\w./-]{0,128}$/)
    .default(''),
  ATTACHMENT_URL_TTL_SECONDS: int(60, 7 * 86400).default(3600),
  ATTACHMENT_UNREFERENCED_TTL_SECONDS: int(60, 365 * 86400).default(3600),
  UPLOADS_PER_MINUTE: int(1, 10_000).default(20),
  UPLOAD_BYTES_PER_VISITOR_PER_HOUR: int(1024, 2 ** 50).default(200 * 1024 ** 2),
  UPLOAD_BYTES_PER_ADDRESS_PER_HOUR: int(1024, 2 ** 50).default(1024 ** 3),
  IMAGE_MAX_PIXELS: int(1, 1_000_000_000).default(16_777_216),
  IMAGE_WORKERS: int(1, 256).default(2),
  IMAGE_WORKERS_PER_MERCHANT: int(1, 256).default(1),
  IMAGE_QUEUE_PER_MERCHANT: int(0, 100_000).default(16),
  IMAGE_QUEUE_TIMEOUT_MS: int(100, 600_000).default(10_000),
  WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .regex(/^\s*\d+(\.\d+)?(\s*,\s*\d+(\.\d+)?)*\s*$/, 'comma-separated seconds, e.g. 5,30,120')
    .default(DEFAULT_WEBHOOK_RETRY_SCHEDULE),
  WEBHOOK_ALLOW_PRIVATE: bool.default('off'),
  WEBHOOK_TIMEOUT_MS: int(100, 60_000).default(10_000),
  WEBHOOK_CONCURRENCY: int(1, 100).default(4),
  WEBHOOK_SECRET_OVERLAP_SECONDS: int(0, 30 * 86400).default(86400),
  WEBHOOK_LOG_RETENTION_DAYS: int(1, 365).default(14),
  API_KEY_REQUESTS_PER_MINUTE: int(1, 1_000_000).default(600),
  BOT_HANDOFF_TIMEOUT_SECONDS: int(1, 86400).default(60),
});

/** Every environment variable the gateway reads (.env.example documents each; a test checks it). */
export const CONFIG_VARIABLES = Object.keys(envSchema.shape);

/** A throwaway secret for development; production refuses to start without a real one. */
const DEV_SESSION_SECRET = 'parley-development-secret-not-for-production-use';

/**
 * Reads and validates the environment. Throws a ConfigError whose message names every bad
 * variable, so `main.ts` can print it without a stack trace.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty variables count as unset, the way shells and .env files usually mean them.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  const problems: string[] = [];
  if (e.NODE_ENV === 'production') {
    if (!e.SESSION_SECRET) problems.push('SESSION_SECRET: required when NODE_ENV=production');
    if (!e.DATABASE_URL) problems.push('DATABASE_URL: required when NODE_ENV=production');
    if (!e.REDIS_URL) problems.push('REDIS_URL: required when NODE_ENV=production');
    if (e.CAPTCHA_TEST_ANSWER)
      problems.push('CAPTCHA_TEST_ANSWER: a test-only switch, refused when NODE_ENV=production');
    if (e.DEMO_SEED) problems.push('DEMO_SEED: demo data is never loaded when NODE_ENV=production');
  }
  if (e.HTTP_HEADERS_TIMEOUT_MS > e.HTTP_REQUEST_TIMEOUT_MS)
    problems.push('HTTP_HEADERS_TIMEOUT_MS: must not exceed HTTP_REQUEST_TIMEOUT_MS');
  if (e.SMS_DRIVER === 'webhook' && !e.SMS_WEBHOOK_URL)
    problems.push('SMS_WEBHOOK_URL: required when SMS_DRIVER=webhook');
  if (e.STORAGE_DRIVER === 's3' && !e.S3_BUCKET) problems.push('S3_BUCKET: required when STORAGE_DRIVER=s3');
  if (Boolean(e.S3_ACCESS_KEY_ID) !== Boolean(e.S3_SECRET_ACCESS_KEY))
    problems.push('S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY: give both or neither');
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`);

  return {
    env: e.NODE_ENV,
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    pgliteDir: e.PGLITE_DIR,
    redisUrl: e.REDIS_URL,
    redisPrefix: e.REDIS_PREFIX,
    sessionSecret: e.SESSION_SECRET ?? DEV_SESSION_SECRET,
    sessionTtlSeconds: e.SESSION_TTL_SECONDS,
    sessionAbsoluteTtlSeconds: e.SESSION_ABSOLUTE_TTL_SECONDS,
    publicWsAddress: e.PUBLIC_WS_ADDRESS,
    // Demo data is loaded by default on the embedded database only.
    demoSeed: e.DEMO_SEED ?? (!e.DATABASE_URL && e.NODE_ENV !== 'production'),
    captchaTestAnswer: e.CAPTCHA_TEST_ANSWER,
    smsDriver: e.SMS_DRIVER,
    smsWebhookUrl: e.SMS_WEBHOOK_URL,
    smsRegistration: e.SMS_REGISTRATION,
    registration: e.REGISTRATION,
    internalApiToken: e.INTERNAL_API_TOKEN,
    trustProxy: e.TRUST_PROXY,
    allowedOrigins: (e.ALLOWED_ORIGINS ?? '')
      .split(',')
      .map((o) => o.trim())
      .filter(Boolean),
    hardening: {
      visitorOnlineIntervalSeconds: e.VISITOR_ONLINE_INTERVAL_SECONDS,
      headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS,
      maxConnectionsPerAddress: e.MAX_CONNECTIONS_PER_ADDRESS,
      metricsToken: e.METRICS_TOKEN,
      pusherAuthPerMinute: e.PUSHER_AUTH_PER_MINUTE,
    },
    chatLimits: {
      messageBurst: e.CHAT_MESSAGE_BURST,
      messagesPerHour: e.CHAT_MESSAGES_PER_HOUR,
      merchantMessagesPerMinute: e.CHAT_MERCHANT_MESSAGES_PER_MINUTE,
      conversationsPerHour: e.CHAT_CONVERSATIONS_PER_HOUR,
      merchantSendsInFlight: e.CHAT_MERCHANT_SENDS_IN_FLIGHT,
      merchantSendsQueued: e.CHAT_MERCHANT_SENDS_QUEUED,
      fairShareLoopDelayMs: e.CHAT_FAIR_SHARE_LOOP_DELAY_MS,
      contactDetailsPerHour: e.CHAT_CONTACT_DETAILS_PER_HOUR,
      merchantContactDetailsPerMinute: e.CHAT_MERCHANT_CONTACT_DETAILS_PER_MINUTE,
      humanRequestsPerHour: e.CHAT_HUMAN_REQUESTS_PER_HOUR,
      merchantHumanRequestsPerMinute: e.CHAT_MERCHANT_HUMAN_REQUESTS_PER_MINUTE,
      visitorReadsPerMinute: e.CHAT_VISITOR_READS_PER_MINUTE,
      readMarksPerMinute: e.CHAT_READ_MARKS_PER_MINUTE,
      ratingsPerHour: e.CHAT_RATINGS_PER_HOUR,
    },
    logLevel: e.LOG_LEVEL,
    presenceGraceSeconds: e.PRESENCE_GRACE_SECONDS,
    channelHistorySize: e.CHANNEL_HISTORY_SIZE,
    realtimeLimits: {
      socketsPerIdentity: e.WS_MAX_SOCKETS_PER_IDENTITY,
      socketsPerAddress: e.WS_MAX_SOCKETS_PER_ADDRESS,
      subscriptionsPerIdentity: e.WS_MAX_SUBSCRIPTIONS_PER_IDENTITY,
      subscriptionsPerAddress: e.WS_MAX_SUBSCRIPTIONS_PER_ADDRESS,
      maxSockets: e.WS_MAX_SOCKETS,
      maxSubscriptions: e.WS_MAX_SUBSCRIPTIONS,
    },
    visitorTokenTtlSeconds: e.VISITOR_TOKEN_TTL_SECONDS,
    metricsEnabled: e.METRICS_ENABLED,
    otelEnabled: e.OTEL_ENABLED,
    attachments: {
      driver: e.STORAGE_DRIVER,
      dir: e.ATTACHMENTS_DIR,
      s3:
        e.STORAGE_DRIVER === 's3' && e.S3_BUCKET
          ? {
              endpoint: e.S3_ENDPOINT,
              region: e.S3_REGION,
              bucket: e.S3_BUCKET,
              accessKeyId: e.S3_ACCESS_KEY_ID,
              secretAccessKey: e.S3_SECRET_ACCESS_KEY,
              forcePathStyle: e.S3_FORCE_PATH_STYLE,
              keyPrefix: e.S3_KEY_PREFIX,
            }
          : undefined,
      urlTtlSeconds: e.ATTACHMENT_URL_TTL_SECONDS,
      unreferencedTtlSeconds: e.ATTACHMENT_UNREFERENCED_TTL_SECONDS,
      uploadsPerMinute: e.UPLOADS_PER_MINUTE,
      uploadBytesPerVisitorPerHour: e.UPLOAD_BYTES_PER_VISITOR_PER_HOUR,
      uploadBytesPerAddressPerHour: e.UPLOAD_BYTES_PER_ADDRESS_PER_HOUR,
      imageMaxPixels: e.IMAGE_MAX_PIXELS,
      imageWorkers: e.IMAGE_WORKERS,
      imageWorkersPerMerchant: e.IMAGE_WORKERS_PER_MERCHANT,
      imageQueuePerMerchant: e.IMAGE_QUEUE_PER_MERCHANT,
      imageQueueTimeoutMs: e.IMAGE_QUEUE_TIMEOUT_MS,
    },
    webhooks: {
      retrySchedule: e.WEBHOOK_RETRY_SCHEDULE.split(',').map((v) => Number(v.trim())),
      allowPrivate: e.WEBHOOK_ALLOW_PRIVATE,
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      concurrency: e.WEBHOOK_CONCURRENCY,
      secretOverlapSeconds: e.WEBHOOK_SECRET_OVERLAP_SECONDS,
      logRetentionDays: e.WEBHOOK_LOG_RETENTION_DAYS,
    },
    apiKeyRequestsPerMinute: e.API_KEY_REQUESTS_PER_MINUTE,
    bots: { handoffTimeoutSeconds: e.BOT_HANDOFF_TIMEOUT_SECONDS },
  };
}
