import { z } from 'zod';
import { bool, int, type Parsed } from './variables.js';

/** The default retry schedule: 10 retries over about 27.7 hours (≥ 24 h even with -10 % jitter). */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE = '5,30,120,600,1800,3600,7200,14400,28800,43200';

/** The merchant's systems (docs/integration.md): webhook delivery, API keys, bots. */
export const integrationVariables = {
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
};

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

export interface IntegrationSettings {
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

export function readIntegrationSettings(e: Parsed<typeof integrationVariables>): IntegrationSettings {
  return {
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
