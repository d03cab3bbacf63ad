import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { pgliteDatabase } from '../../src/db/client.js';
import * as schema from '../../src/db/schema.js';
import { renderContractModule } from '../../src/pages/contract.js';
import { eventNames } from '../../src/resolvers/event-catalog.js';
import { endpoints } from '../../src/rest/endpoints.js';
import { printedSchema } from '../../src/schema/print.js';
import { readDocs } from '../support/docs.js';
import { openEmptyCluster } from '../support/pglite-template.js';

/**
 * Each contract is declared once (issue 19); these checks keep everything written from a
 * declaration, or beside it, true to it.
 */
const docs = readDocs();

describe('REST endpoints: one declaration each', () => {
  it('the docs name every declared endpoint with its method', () => {
    const missing = endpoints
      .map((r) => `${r.method.toUpperCase()} ${r.path}`)
      .filter((route) => !docs.includes(route));
    expect(missing).toEqual([]);
  });

  it('no two declarations share a method and path', () => {
    const keys = endpoints.map((r) => `${r.method} ${r.path}`);
    expect(keys.length).toBe(new Set(keys).size);
  });
});

describe('events: one catalog', () => {
  it('the docs’ event table has a row for every catalogued event', () => {
    const missing = eventNames.filter((name) => !docs.includes(`| \`${name}\` |`));
    expect(missing).toEqual([]);
  });

  it('the GraphQL description of ChannelEvent.event names every catalogued event', () => {
    const printed = printedSchema();
    const missing = eventNames.filter((name) => !printed.includes(`\`${name}\``));
    expect(missing).toEqual([]);
  });
});

describe('the pages share the server’s constants', () => {
  const assets = 'src/pages/assets';
  it('src/pages/assets/contract.js is generated from the current declarations (npm run contract:print)', () => {
    expect(readFileSync(join(assets, 'contract.js'), 'utf8')).toBe(renderContractModule());
  });

  it('no page script repeats an envelope code, a close code or the ticket entry path', () => {
    const repeated = /\b(?:1004|1401|1403|4401|4403|4429)\b|===\s*-1\b|['"]\/agent\/ticket['"]/;
    const offenders = readdirSync(assets)
      .filter((f) => f.endsWith('.js') && f !== 'contract.js')
      .filter((f) => repeated.test(readFileSync(join(assets, f), 'utf8')));
    expect(offenders).toEqual([]);
  });
});

describe('migrations are append-only and complete', () => {
  it('the newest migration snapshot is the drizzle schema (a schema change without its migration fails)', async () => {
    const { generateDrizzleJson, generateMigration } = await import('drizzle-kit/api');
    const journal = JSON.parse(readFileSync('drizzle/meta/_journal.json', 'utf8')) as { entries: { idx: number }[] };
    const last = Math.max(...journal.entries.map((e) => e.idx));
    const snapshot = JSON.parse(readFileSync(`drizzle/meta/${String(last).padStart(4, '0')}_snapshot.json`, 'utf8'));
    expect(await generateMigration(snapshot, generateDrizzleJson(schema) as never)).toEqual([]);
  });

  it('every migration applied to an empty database gives the drizzle schema’s tables, columns and indexes', async () => {
    const { generateDrizzleJson } = await import('drizzle-kit/api');
    const expected = generateDrizzleJson(schema) as unknown as {
      tables: Record<string, { name: string; columns: Record<string, unknown>; indexes: Record<string, unknown> }>;
    };
    const want = Object.values(expected.tables)
      .flatMap((t) => [
        ...Object.keys(t.columns).map((c) => `column ${t.name}.${c}`),
        ...Object.keys(t.indexes).map((i) => `index ${t.name}.${i}`),
      ])
      .sort();
    // An empty PGlite cluster (initdb only, kept between runs: test/support/pglite-template.ts).
    const database = pgliteDatabase(await openEmptyCluster());
    try {
      const rows = async (query: string) => {
        const result = (await database.db.execute(sql.raw(query))) as unknown as { rows: { k: string }[] };
        return result.rows.map((r) => r.k);
      };
      const tables =
        "select table_schema || '.' || table_name as k from information_schema.tables where table_schema not in ('pg_catalog', 'information_schema')";
      expect(await rows(tables)).toEqual([]);
      await database.migrate();
      const columns = await rows(
        "select 'column ' || table_name || '.' || column_name as k from information_schema.columns where table_schema = 'public'",
      );
      // Indexes drizzle declares (not the ones behind primary keys and unique constraints).
      const indexes = await rows(
        `select 'index ' || tablename || '.' || indexname as k from pg_indexes where schemaname = 'public'
         and indexname not in (select conname from pg_constraint)`,
      );
      expect([...columns, ...indexes].sort()).toEqual(want);
    } finally {
      await database.close();
    }
  });
});
