import { z } from 'zod';
import { bool, int, type Parsed, url } from './variables.js';

/** The process and its stores: where it listens, which databases, what it logs and measures. */
export const serverVariables = {
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
  DEMO_SEED: bool.optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  METRICS_ENABLED: bool.default('on'),
  OTEL_ENABLED: bool.default('off'),
};

export interface ServerSettings {
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
  demoSeed: boolean;
  logLevel: string;
  /** Serve Prometheus metrics at /metrics. */
  metricsEnabled: boolean;
  /** Create OpenTelemetry spans (for a tracer provider registered by the process). */
  otelEnabled: boolean;
}

export function readServerSettings(e: Parsed<typeof serverVariables>): ServerSettings {
  return {
    env: e.NODE_ENV,
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    pgliteDir: e.PGLITE_DIR,
    redisUrl: e.REDIS_URL,
    redisPrefix: e.REDIS_PREFIX,
    // Demo data is loaded by default on the embedded database only.
    demoSeed: e.DEMO_SEED ?? (!e.DATABASE_URL && e.NODE_ENV !== 'production'),
    logLevel: e.LOG_LEVEL,
    metricsEnabled: e.METRICS_ENABLED,
    otelEnabled: e.OTEL_ENABLED,
  };
}
