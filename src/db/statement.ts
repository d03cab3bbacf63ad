import type { Db } from './client.js';

/**
 * A statement of fixed SQL text (`$1`, `$2`, … placeholders) run on the driver under `db` — a
 * database or one of its transactions — without drizzle's query building, which costs more CPU
 * than the round trip on the message path (BENCHMARKS.md, issue 33). On PostgreSQL it is a named
 * prepared statement (postgres.js keeps one per connection and text: parsed and planned once); on
 * PGlite a plain query. Every statement is still announced to the database's query listeners
 * (`Database.onQuery`) first, as drizzle does, so the row cache and the statement counts see it.
 * The text must not vary with the data (one prepared statement per distinct text): pass lists
 * as one array parameter (`= any($1::bigint[])`, `unnest`).
 */
export function runStatement<R>(db: Db | DbOrTx, text: string, params: readonly unknown[]): Promise<R[]> {
  const session = (db as unknown as { session: DriverSession }).session;
  session.logger.logQuery(text, params as unknown[]);
  const { client } = session;
  if (isPostgresJs(client)) return client.unsafe(text, params as unknown[], { prepare: true });
  return client.query(text, params as unknown[]).then((result) => result.rows as R[]);
}

/** Anything with drizzle's session: a database or a transaction of it. */
type DbOrTx = { transaction: unknown };

/** What drizzle's postgres-js and pglite sessions hold (drizzle-orm 0.45): the driver's client and the logger. */
interface DriverSession {
  client: PostgresJsClient | PgliteClient;
  logger: { logQuery(text: string, params: unknown[]): void };
}
interface PostgresJsClient {
  unsafe<R>(text: string, params: unknown[], opts: { prepare: boolean }): Promise<R[]>;
}
interface PgliteClient {
  query(text: string, params: unknown[]): Promise<{ rows: unknown[] }>;
}

const isPostgresJs = (client: DriverSession['client']): client is PostgresJsClient =>
  typeof (client as Partial<PostgresJsClient>).unsafe === 'function';
