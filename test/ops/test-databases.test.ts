import type { PGlite } from '@electric-sql/pglite';
import { describe, expect, inject, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { pgliteBehind, RECYCLE, recycledTemplateDatabase } from '../support/pglite-template.js';
import { freshStores, templateDatabase } from '../support/stores.js';

// The tests' embedded databases are recycled (test/support/pglite-template.ts): a closed one is
// reset to the template and handed to the next gateway. What one test left must never reach the
// next: its rows, its sequences' positions, an open transaction, its session's settings.

const templates = inject('pgliteTemplates');
const clientOf = (database: Database) => (database.db as unknown as { $client: PGlite }).$client;
/** The PGlite a database is a view of (a recycled one is handed out again under a new view). */
const pgliteOf = (database: Database) => pgliteBehind(clientOf(database));

/** Every public table's rows and every sequence's position, as text to compare. */
async function contents(client: PGlite) {
  const { rows: tables } = await client.query<{ name: string }>(
    "select quote_ident(tablename) as name from pg_tables where schemaname = 'public' order by tablename",
  );
  const rows: Record<string, unknown[]> = {};
  for (const { name } of tables)
    rows[name] = (await client.query(`select * from public.${name} order by 1`)).rows.map((r) => JSON.stringify(r));
  const { rows: sequences } = await client.query(
    "select sequencename, last_value from pg_sequences where schemaname = 'public' order by 1",
  );
  return { rows, sequences };
}

// Declared by the stores of the run, so CI's run on real services (where every declared test must
// run) has only its own: there, no template, and each test app opens its own PostgreSQL database.
if (!templates)
  it('on real services no embedded database is handed out', async () => {
    const stores = await freshStores();
    expect(stores.databaseUrl).toBeDefined();
    expect(await templateDatabase(stores, 'seeded')).toBeUndefined();
    await stores.drop();
  });

// Skipped when recycling is off (PARLEY_TEST_DB_RECYCLE=off).
if (templates)
  describe.skipIf(!RECYCLE)('recycled test databases', () => {
    const file = templates?.seeded ?? '';

    it('a closed database comes back with the template’s rows and sequences, whatever was left', async () => {
      const first = await recycledTemplateDatabase(file);
      const client = clientOf(first);
      const template = await contents(client);
      const searchPath = async () =>
        (await client.query<{ path: string }>("select current_setting('search_path') as path")).rows[0]?.path;
      const templatePath = await searchPath();
      expect(template.rows.merchants?.length).toBeGreaterThan(0);
      expect(template.sequences.length).toBeGreaterThan(0);
      // Rows gone and changed, a sequence moved, a setting of the session's, and a transaction left open.
      await client.exec('delete from agents');
      await client.exec("update merchants set appname = 'left-over'");
      for (const { sequencename } of template.sequences as { sequencename: string }[])
        await client.query(`select nextval('public.${sequencename}')`);
      await client.exec('set search_path = parley_template');
      await client.exec('begin; delete from public.merchants');
      await first.close();

      const second = await recycledTemplateDatabase(file);
      expect(pgliteOf(second)).toBe(pgliteBehind(client));
      expect(await contents(clientOf(second))).toEqual(template);
      const { rows } = await clientOf(second).query<{ path: string }>("select current_setting('search_path') as path");
      expect(rows[0]?.path).toBe(templatePath);
      await second.close();
    });

    it('a closed database refuses the queries its gateway left running, while the next one holds its PGlite', async () => {
      const first = await recycledTemplateDatabase(file);
      await first.close();
      const second = await recycledTemplateDatabase(file);
      expect(pgliteOf(second)).toBe(pgliteOf(first));
      await expect(clientOf(first).exec('delete from agents')).rejects.toThrow(
        /test database was closed.*exec refused/,
      );
      // Through drizzle, as a gateway queries: its error wraps the refusal.
      const refused = await first.db.execute('select 1').then(
        () => undefined,
        (error: Error) => error,
      );
      expect(String(refused?.cause)).toMatch(/test database was closed.*query refused/);
      const { rows } = await clientOf(second).query<{ n: number }>('select count(*)::int as n from agents');
      expect(rows[0]?.n).toBeGreaterThan(0);
      await second.close();
    });

    it('two databases open at once are two, and each is recycled', async () => {
      const [a, b] = await Promise.all([recycledTemplateDatabase(file), recycledTemplateDatabase(file)]);
      expect(pgliteOf(a)).not.toBe(pgliteOf(b));
      await clientOf(a).exec('delete from agents');
      const { rows } = await clientOf(b).query<{ n: number }>('select count(*)::int as n from agents');
      expect(rows[0]?.n).toBeGreaterThan(0);
      await Promise.all([a.close(), b.close()]);
      const again = await Promise.all([recycledTemplateDatabase(file), recycledTemplateDatabase(file)]);
      expect(new Set(again.map(pgliteOf))).toEqual(new Set([pgliteOf(a), pgliteOf(b)]));
      for (const database of again) {
        const { rows: left } = await clientOf(database).query<{ n: number }>('select count(*)::int as n from agents');
        expect(left[0]?.n).toBeGreaterThan(0);
      }
      await Promise.all(again.map((database) => database.close()));
    });
  });
