import { Writable } from 'node:stream';
import { type App, buildApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config.js';
import { pgliteDatabase } from '../../src/db/client.js';
import { createLogger } from '../../src/log.js';
import { openEmptyCluster } from './pglite-template.js';
import { freshStores, type TestStores, templateDatabase } from './stores.js';

export { freshStores, type TestStores } from './stores.js';

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
    /** Start from an empty database (migrations and demo seed run), not the template. */
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
    // Whether an instance is busy depends on the machine (CI runs beside a busy loop): the fair
    // share is off unless a test turns it on (CHAT_FAIR_SHARE_LOOP_DELAY_MS 0, always busy).
    CHAT_FAIR_SHARE_LOOP_DELAY_MS: '60000',
    // Suites that drive a visitor past its budgets would wait a second for each refusal: answered
    // at once unless a test turns the hold on (test/api/visitor-refusal-delay.test.ts).
    VISITOR_REFUSAL_DELAY_MS: '0',
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
  // An empty embedded database in memory is the kept empty cluster (initdb only, no migrations).
  const database = opts.emptyDatabase
    ? !stores.databaseUrl && stores.pgliteDir === 'memory://'
      ? pgliteDatabase(await openEmptyCluster())
      : undefined
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

/**
 * A gateway with the default settings shared by the tests of one file that need nothing of their
 * own (no restart, no env): started on the first call, pushed onto `apps`, which the file stops
 * in its afterAll. Each test still makes its own clients and counts only its own events.
 */
export function sharedTestApp(apps: TestApp[]): () => Promise<TestApp> {
  let shared: Promise<TestApp> | undefined;
  return () => {
    shared ??= startTestApp().then((t) => {
      apps.push(t);
      return t;
    });
    return shared;
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
