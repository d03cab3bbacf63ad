import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type SQL, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import WebSocket from 'ws';
import { ConfigError, loadConfig } from '../../src/config.js';
import { openTemplateDatabase } from '../support/pglite-template.js';
import { freePort } from '../support/private-services.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

type Row = Record<string, unknown>;

/** Runs a query on either driver (postgres.js answers an array, PGlite `{ rows }`). */
async function rows(t: TestApp, query: SQL): Promise<Row[]> {
  const result = (await t.app.deps.db.execute(query)) as unknown as Row[] | { rows: Row[] };
  return Array.isArray(result) ? [...result] : result.rows;
}

/**
 * Everything a migration could change: every column, index and constraint of the application's
 * schemas, the migrations journal, and the rows of every table (count and digest).
 */
async function databaseSnapshot(t: TestApp) {
  const schemas = sql`table_schema not in ('pg_catalog', 'information_schema')`;
  const columns = await rows(
    t,
    sql`select table_schema, table_name, column_name, data_type, is_nullable, column_default
        from information_schema.columns where ${schemas}
        order by table_schema, table_name, column_name`,
  );
  const indexes = await rows(
    t,
    sql`select schemaname, tablename, indexname, indexdef from pg_indexes
        where schemaname not in ('pg_catalog', 'information_schema') order by schemaname, indexname`,
  );
  const constraints = await rows(
    t,
    sql`select conname, pg_get_constraintdef(oid) as def from pg_constraint
        where connamespace not in ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
        order by conname, def`,
  );
  const migrations = await rows(t, sql`select hash, created_at from drizzle.__drizzle_migrations order by id`);
  const tables = await rows(
    t,
    sql`select table_schema, table_name from information_schema.tables
        where ${schemas} and table_type = 'BASE TABLE' order by table_schema, table_name`,
  );
  const data: Record<string, unknown> = {};
  for (const { table_schema, table_name } of tables) {
    const name = `"${table_schema}"."${table_name}"`;
    const [row] = await rows(
      t,
      sql.raw(`select count(*)::int as n, md5(coalesce(string_agg(r::text, ',' order by r::text), '')) as digest
               from ${name} r`),
    );
    data[name] = row;
  }
  return { columns, indexes, constraints, migrations, data };
}

describe('configuration', () => {
  it('has safe defaults on a bare machine: port 3000, embedded PGlite, in-process stores, demo data', () => {
    const config = loadConfig({});
    expect(config.port).toBe(3000);
    expect(config.databaseUrl).toBeUndefined();
    expect(config.pgliteDir).toBe('.data/pglite');
    expect(config.redisUrl).toBeUndefined();
    expect(config.demoSeed).toBe(true);
  });

  it('names the bad variable, without a stack trace', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(ConfigError);
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/PORT/);
    expect(() => loadConfig({ REDIS_URL: 'http://x' })).toThrow(/REDIS_URL/);
    expect(() => loadConfig({ SMS_DRIVER: 'webhook' })).toThrow(/SMS_WEBHOOK_URL/);
  });

  it('refuses to start in production without secrets and stores, or with a test-only switch', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(/SESSION_SECRET[\s\S]*DATABASE_URL[\s\S]*REDIS_URL/);
    const production = {
      NODE_ENV: 'production',
      SESSION_SECRET: 'x'.repeat(40),
      DATABASE_URL: 'postgres://localhost/db',
      REDIS_URL: 'redis://localhost:6379',
    };
    expect(loadConfig(production).demoSeed).toBe(false);
    expect(() => loadConfig({ ...production, CAPTCHA_TEST_ANSWER: 'abc' })).toThrow(/CAPTCHA_TEST_ANSWER/);
    expect(() => loadConfig({ ...production, DEMO_SEED: 'on' })).toThrow(/DEMO_SEED/);
  });
});

describe('health', () => {
  let t: TestApp;
  beforeAll(async () => {
    // From an empty database, so the migrations (and the demo seed) run here, not in a template.
    t = await startTestApp({ emptyDatabase: true });
  });
  afterAll(() => t.stop());

  it('GET /healthz says the process is alive', async () => {
    const res = await fetch(`${t.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('GET /readyz reports the database and Redis', async () => {
    const res = await fetch(`${t.url}/readyz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      status: 'ready',
      database: 'ok',
      redis: t.config.redisUrl ? 'ok' : 'not configured',
    });
  });

  it('migrations are idempotent: applying them again changes nothing', async () => {
    const before = await databaseSnapshot(t);
    expect(before.columns.length).toBeGreaterThan(20); // the snapshot sees the real schema
    expect(before.migrations.length).toBeGreaterThan(0);
    await t.app.deps.database.migrate();
    expect(await databaseSnapshot(t)).toEqual(before);
    const res = await fetch(`${t.url}/readyz`);
    expect(res.status).toBe(200);
  });

  it('unknown paths answer a 404 envelope', async () => {
    const res = await fetch(`${t.url}/nope`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: 1404, data: [] });
  });
});

describe('graceful shutdown', () => {
  it('SIGTERM stops the server process with exit code 0, closing its sockets with 1001', async () => {
    const port = await freePort();
    // The process opens a copy of this run's template when there is one: initdb would cost it
    // seconds of CPU, and what is tested here is the shutdown.
    const templates = inject('pgliteTemplates');
    const dir = await mkdtemp(join(tmpdir(), 'parley-sigterm-'));
    if (templates) await (await openTemplateDatabase(templates.seeded, dir)).close();
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: {
        ...process.env,
        PORT: String(port),
        HOST: '127.0.0.1',
        PGLITE_DIR: templates ? dir : 'memory://',
        DATABASE_URL: '',
        REDIS_URL: '',
        LOG_LEVEL: 'warn',
      },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 30_000;
      while (
        !(await fetch(`http://127.0.0.1:${port}/healthz`)
          .then((r) => r.ok)
          .catch(() => false))
      ) {
        if (Date.now() > deadline) throw new Error('server did not start');
        await new Promise((r) => setTimeout(r, 200));
      }
      const socket = new WebSocket(`ws://127.0.0.1:${port}/graphql`, 'graphql-transport-ws');
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
      child.kill('SIGTERM');
      expect(await closed).toBe(1001);
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });
});
