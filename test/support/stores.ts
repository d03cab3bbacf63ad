import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { inject } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { openTemplateDatabase, recycledTemplateDatabase, type TemplateKind } from './pglite-template.js';

// Kept apart from test-app.ts: the domain harness (deps.ts) needs the stores but not the gateway,
// and importing the whole gateway would cost every domain test file (and every mutant run) a second.

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
  // Named after the run, so the run's end drops whatever a worker left (test/global-setup.ts).
  const suffix = `${inject('testRun')}_${randomBytes(6).toString('hex')}`;
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
      if (adminUrl && databaseUrl) await dropDatabases(adminUrl, new URL(databaseUrl).pathname.slice(1));
      if (redisUrl) await dropRedisKeys(redisUrl, `${redisPrefix}*`);
    },
  };
}

/** Drops the databases named `pattern` (a LIKE pattern; `_` escaped by the caller where it matters). */
export async function dropDatabases(adminUrl: string, pattern: string) {
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  const found = await admin<{ datname: string }[]>`select datname from pg_database where datname like ${pattern}`;
  for (const { datname } of found) await admin.unsafe(`drop database if exists ${datname} with (force)`);
  await admin.end();
}

/** Deletes the Redis keys that match `pattern` (a SCAN MATCH pattern). */
export async function dropRedisKeys(redisUrl: string, pattern: string) {
  const { Redis } = await import('ioredis');
  const redis = new Redis(redisUrl);
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
  redis.disconnect();
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
  if (stores.pgliteDir === 'memory://') return recycledTemplateDatabase(templates[kind]);
  if (existsSync(join(stores.pgliteDir, 'PG_VERSION'))) return undefined;
  return openTemplateDatabase(templates[kind], stores.pgliteDir);
}
