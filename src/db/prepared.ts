import type { Db } from './client.js';

/**
 * A query built once per database and then executed with placeholders: drizzle's query building
 * costs more CPU than the round trip on the hot paths (bootstraps, identity checks), and a named
 * statement lets PostgreSQL skip planning too. `build` must end in `.prepare(name)`.
 */
export function preparedQuery<Q>(build: (db: Db) => Q): (db: Db) => Q {
  const byDatabase = new WeakMap<Db, Q>();
  return (db) => {
    let query = byDatabase.get(db);
    if (!query) {
      query = build(db);
      byDatabase.set(db, query);
    }
    return query;
  };
}
