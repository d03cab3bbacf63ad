import type { Database } from './client.js';

/**
 * An in-process cache of rows read from some tables, for a database this process alone writes
 * (`Database.exclusive`: the embedded PGlite). Every statement run through `db` passes
 * `onQuery` before it runs, so a write is seen before it can be read back:
 * - a statement that is not a `select` and names one of `tables` (as drizzle quotes them:
 *   `"visitors"`), and any `delete` or `truncate` (a cascade may reach the tables unnamed), empty
 *   the cache and bump its epoch;
 * - a read stores its rows only if no such statement was seen while it ran, so a read that raced
 *   a write never stores what it saw before it.
 * On a shared database (PostgreSQL, other instances write) `read` always goes to the database.
 * At most `max` entries; past that the oldest goes.
 */
export interface RowCache<T> {
  read(key: string, load: () => Promise<T>): Promise<T>;
}

export function createRowCache<T>(database: Database, opts: { tables: string[]; max: number }): RowCache<T> {
  if (!database.exclusive) return { read: (_key, load) => load() };
  const entries = new Map<string, T>();
  let epoch = 0;
  const named = opts.tables.map((table) => `"${table}"`);
  database.onQuery((statement) => {
    const head = statement.trimStart().slice(0, 8).toLowerCase();
    if (head.startsWith('select')) return;
    if (head.startsWith('delete') || head.startsWith('truncate') || named.some((t) => statement.includes(t))) {
      epoch++;
      entries.clear();
    }
  });
  return {
    async read(key, load) {
      const hit = entries.get(key);
      if (hit !== undefined) return hit;
      const started = epoch;
      const rows = await load();
      if (epoch === started) {
        if (entries.size >= opts.max) entries.delete(entries.keys().next().value as string);
        entries.set(key, rows);
      }
      return rows;
    },
  };
}
