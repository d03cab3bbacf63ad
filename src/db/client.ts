import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import { migrate as migratePostgres } from 'drizzle-orm/postgres-js/migrator';
import postgres from 'postgres';
import * as schema from './schema.js';

export type Db = PgDatabase<PgQueryResultHKT, typeof schema>;

export interface Database {
  db: Db;
  kind: 'postgres' | 'pglite';
  /**
   * Whether this process is the database's only client (PGlite, in-process): then every write
   * goes through `db`, where `onQuery` sees it, and an in-process cache can be invalidated
   * exactly (src/db/row-cache.ts). PostgreSQL is shared with other instances: false.
   */
  exclusive: boolean;
  /** Applies pending migrations; safe when several instances start at once. */
  migrate(): Promise<void>;
  /** Resolves when the database answers a trivial query within `timeoutMs`. */
  ping(timeoutMs?: number): Promise<void>;
  /**
   * Calls `listener` with the SQL text of every statement run through `db` (not the migrator);
   * returns the function that stops it. For query-count checks and diagnostics.
   */
  onQuery(listener: QueryListener): () => void;
  close(): Promise<void>;
}

type QueryListener = (sql: string) => void;

/** A drizzle logger that forwards every statement to the listeners currently registered. */
function queryListeners() {
  const listeners = new Set<QueryListener>();
  return {
    logger: {
      logQuery(query: string) {
        for (const listener of listeners) listener(query);
      },
    },
    onQuery(listener: QueryListener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
  };
}

const migrationsFolder = fileURLToPath(new URL('../../drizzle', import.meta.url));
/** An arbitrary constant naming our migration lock among PostgreSQL advisory locks. */
const MIGRATION_LOCK_ID = 7_302_104_221;

export async function openDatabase(opts: { databaseUrl?: string; pgliteDir: string }): Promise<Database> {
  if (opts.databaseUrl) return openPostgres(opts.databaseUrl);
  return openPglite(opts.pgliteDir);
}

function openPostgres(url: string): Database {
  const client = postgres(url, {
    max: 10,
    // Fail fast instead of queueing for ever when PostgreSQL is down or the pool is exhausted.
    connect_timeout: 5,
    idle_timeout: 30,
    onnotice: () => {},
    connection: { statement_timeout: 10_000 },
  });
  const queries = queryListeners();
  const db = drizzlePostgres(client, { schema, logger: queries.logger }) as unknown as Db;
  return {
    db,
    kind: 'postgres',
    exclusive: false,
    onQuery: queries.onQuery,
    async migrate() {
      // drizzle's migrator takes no lock: hold an advisory lock on a one-connection client, so
      // instances starting together apply the migrations once, one after the other.
      const single = postgres(url, { max: 1, onnotice: () => {} });
      try {
        await single`select pg_advisory_lock(${MIGRATION_LOCK_ID})`;
        await migratePostgres(drizzlePostgres(single), { migrationsFolder });
      } finally {
        await single.end({ timeout: 5 }); // ending the connection releases the lock
      }
    },
    ping: (timeoutMs = 2000) =>
      withTimeout(
        client`select 1`.then(() => undefined),
        timeoutMs,
        'PostgreSQL',
      ),
    close: () => client.end({ timeout: 5 }),
  };
}

async function openPglite(dir: string): Promise<Database> {
  if (!dir.startsWith('memory://')) mkdirSync(dir, { recursive: true });
  return pgliteDatabase(await PGlite.create(dir));
}

/**
 * A Database over a PGlite the caller opened, e.g. from a dumped data directory
 * (`PGlite.create('memory://', { loadDataDir })`, how the tests get a migrated database in a
 * fraction of initdb's time). Closing the Database closes the client.
 */
export function pgliteDatabase(client: PGlite): Database {
  const queries = queryListeners();
  const db = drizzlePglite(client, { schema, logger: queries.logger }) as unknown as Db;
  return {
    db,
    kind: 'pglite',
    exclusive: true,
    onQuery: queries.onQuery,
    // PGlite is single-process: nobody else can migrate at the same time.
    migrate: () => migratePglite(drizzlePglite(client), { migrationsFolder }),
    ping: (timeoutMs = 2000) =>
      withTimeout(
        db.execute(sql`select 1`).then(() => undefined),
        timeoutMs,
        'PGlite',
      ),
    close: () => client.close(),
  };
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    // ETIMEDOUT: recognised as unavailable by its code (src/errors.ts), not by this text.
    timer = setTimeout(
      () => reject(Object.assign(new Error(`${what} did not answer within ${ms} ms`), { code: 'ETIMEDOUT' })),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
