import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import postgres from 'postgres';
import { inject } from 'vitest';
import { type App, buildApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config.js';
import type { Database } from '../../src/db/client.js';
import { createLogger } from '../../src/log.js';
import { openTemplateDatabase, type TemplateKind } from './pglite-template.js';

/** The answer of every captcha in tests (CAPTCHA_TEST_ANSWER). */
export const CAPTCHA = 'test1';
export const INTERNAL_TOKEN = 'internal-test-token-0123456789';

export interface TestApp {
  app: App;
  url: string;
  wsUrl: string;
  config: Config;
  /** Every log line the server wrote, parsed. */
  logs: Record<string, unknown>[];
  /** The raw log output, for "no secret in any log line" checks. */
  rawLogs(): string;
  stop(): Promise<void>;
}

/** Where the backing stores of a test app live; shared by the instances of one scale-out test. */
export interface TestStores {
  databaseUrl?: string;
  pgliteDir: string;
  redisUrl?: string;
  redisPrefix: string;
  drop(): Promise<void>;
}

/**
 * Fresh, private stores: a new PostgreSQL database (when DATABASE_URL is set) or an in-memory
 * PGlite, and a Redis key prefix of its own (when REDIS_URL is set), so runs never collide.
 */
export async function freshStores(): Promise<TestStores> {
  const suffix = randomBytes(6).toString('hex');
  const redisUrl = process.env.REDIS_URL || undefined;
  const redisPrefix = `parley-test:${suffix}:`;
  const adminUrl = process.env.DATABASE_URL || undefined;
  let databaseUrl: string | undefined;
  if (adminUrl) {
    const name = `parley_test_${suffix}`;
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    await admin.end();
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    databaseUrl = url.toString();
  }
  return {
    databaseUrl,
    pgliteDir: 'memory://',
    redisUrl,
    redisPrefix,
    async drop() {
      if (adminUrl && databaseUrl) {
        const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
        await admin.unsafe(`drop database if exists ${new URL(databaseUrl).pathname.slice(1)} with (force)`);
        await admin.end();
      }
      if (redisUrl) {
        const redis = new Redis(redisUrl);
        let cursor = '0';
        do {
          const [next, keys] = await redis.scan(cursor, 'MATCH', `${redisPrefix}*`, 'COUNT', 500);
          cursor = next;
          if (keys.length) await redis.del(...keys);
        } while (cursor !== '0');
        redis.disconnect();
      }
    },
  };
}

/**
 * The embedded database of `stores` opened from this run's template (test/global-setup.ts): in
 * memory, or in a directory that holds no database yet (a restart test's second app reopens what
 * the first left). Undefined where the app opens its own: on PostgreSQL, an existing directory,
 * or when no template was built.
 */
export async function templateDatabase(stores: TestStores, kind: TemplateKind): Promise<Database | undefined> {
  const templates = inject('pgliteTemplates');
  if (stores.databaseUrl || !templates) return undefined;
  if (stores.pgliteDir === 'memory://') return openTemplateDatabase(templates[kind]);
  if (existsSync(join(stores.pgliteDir, 'PG_VERSION'))) return undefined;
  return openTemplateDatabase(templates[kind], stores.pgliteDir);
}

/**
 * Starts the real gateway on a free port of 127.0.0.1 with demo data, on its own stores (or on
 * `stores` shared with another instance). `env` overrides environment variables.
 */
export async function startTestApp(
  opts: {
    env?: Record<string, string>;
    stores?: TestStores;
    /**
     * Applied to the validated config: runs the real gateway with `env: 'production'` switches on
     * embedded stores, which loadConfig refuses (production requires PostgreSQL and Redis).
     */
    config?: Partial<Config>;
    /** Start from an empty embedded database (migrations and demo seed run), not the template. */
    emptyDatabase?: boolean;
  } = {},
): Promise<TestApp> {
  const stores = opts.stores ?? (await freshStores());
  const ownsStores = !opts.stores;
  const config = loadConfig({
    NODE_ENV: 'test',
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    CAPTCHA_TEST_ANSWER: CAPTCHA,
    INTERNAL_API_TOKEN: INTERNAL_TOKEN,
    DEMO_SEED: 'on',
    PGLITE_DIR: stores.pgliteDir,
    ...(stores.databaseUrl ? { DATABASE_URL: stores.databaseUrl } : {}),
    ...(stores.redisUrl ? { REDIS_URL: stores.redisUrl } : {}),
    REDIS_PREFIX: stores.redisPrefix,
    ...opts.env,
  });
  Object.assign(config, opts.config);
  let raw = '';
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      raw += chunk.toString();
      for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line));
      done();
    },
  });
  const database = opts.emptyDatabase
    ? undefined
    : await templateDatabase(stores, config.demoSeed ? 'seeded' : 'migrated');
  const app = await buildApp(config, { log: createLogger(config.logLevel, sink), database });
  const port = await app.start();
  return {
    app,
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}/graphql`,
    config,
    logs,
    rawLogs: () => raw,
    async stop() {
      await app.stop();
      if (ownsStores) await stores.drop();
    },
  };
}

/** Runs `fn` with the app's domain clock (deps.now) moved `ms` forward. */
export async function withClockAhead<T>(t: TestApp, ms: number, fn: () => Promise<T>): Promise<T> {
  const realNow = t.app.deps.now;
  t.app.deps.now = () => realNow() + ms;
  try {
    return await fn();
  } finally {
    t.app.deps.now = realNow;
  }
}
