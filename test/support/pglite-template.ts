import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { buildDeps } from '../../src/compose.js';
import { loadConfig } from '../../src/config.js';
import { type Database, pgliteDatabase } from '../../src/db/client.js';
import { createLogger } from '../../src/log.js';
import { loadDemoDataIfEmpty } from '../../src/resolvers/demo.js';

/**
 * Embedded test databases from a template. PGlite's initdb, the migrations and the demo seed
 * (argon2 hashes) cost seconds of CPU per database; test/global-setup.ts runs them once per test
 * run and dumps the data directory, and each test's PGlite loads that dump instead (a fraction of
 * a second). A test that checks migrating or seeding an empty database opts out
 * (`startTestApp({ emptyDatabase: true })`, or opens its own).
 */

/** `migrated`: the schema only; `seeded`: the schema and the demo data (DEMO_SEED). */
export type TemplateKind = 'migrated' | 'seeded';
export type TemplateFiles = Record<TemplateKind, string>;

declare module 'vitest' {
  export interface ProvidedContext {
    /** The template dumps of this run (test/global-setup.ts); absent on real services. */
    pgliteTemplates?: TemplateFiles;
  }
}

/** Builds both templates into `dir`. */
export async function buildTemplates(dir: string): Promise<TemplateFiles> {
  const files: TemplateFiles = { migrated: join(dir, 'migrated.tar'), seeded: join(dir, 'seeded.tar') };
  await copyFile(await migratedClusterFile(), files.migrated);
  const client = await openDump(files.migrated);
  const database = pgliteDatabase(client);
  // The same path as an app's start with DEMO_SEED on. The seed runs every run: its rows carry the
  // run's time, and its code is the gateway's.
  const config = loadConfig({ NODE_ENV: 'test', PGLITE_DIR: 'memory://', LOG_LEVEL: 'warn' });
  const deps = await buildDeps(config, createLogger('warn'), { database });
  await loadDemoDataIfEmpty(deps);
  await dump(client, files.seeded);
  await deps.close();
  return files;
}

/**
 * Where the empty cluster is kept between runs (gitignored with node_modules). Its name carries
 * PGlite's version and the preparation's revision: the dump depends on nothing else.
 */
const CLUSTER_REVISION = 2; // bump when openEmptyCluster's preparation or dump's format changes
const here = dirname(fileURLToPath(import.meta.url));
const CACHE_DIR = join(here, '..', '..', 'node_modules', '.cache', 'parley-test');

function packageVersion(name: string): string {
  const entry = createRequire(import.meta.url).resolve(name);
  const root = entry.slice(0, entry.indexOf(`/node_modules/${name}/`) + `/node_modules/${name}`.length);
  return (createRequire(import.meta.url)(join(root, 'package.json')) as { version: string }).version;
}

/**
 * A PGlite cluster with nothing of Parley in it: initdb (most of the templates' cost, ~5-9 s of
 * CPU here) once per PGlite version on this machine, then loaded from the kept dump. The
 * migrations and the demo seed run on it every run, so changes to them always count; tests of
 * migrating an empty database open one too.
 */
export async function openEmptyCluster(): Promise<PGlite> {
  const cached = emptyClusterFile();
  const kept = await openDump(cached).catch(() => undefined);
  if (kept) return kept;
  // 1 MB WAL segments instead of 16 MB keep the dump small.
  const client = await PGlite.create('memory://', { initDbStartParams: ['--wal-segsize=1'] });
  // Every start zeroes shared_buffers (128 MB by default: most of a start's CPU); a test database
  // holds a few hundred kilobytes. Fewer recycled WAL segments, again for the dump's size.
  for (const setting of ["shared_buffers = '4MB'", "min_wal_size = '2MB'", "max_wal_size = '4MB'"]) {
    await client.exec(`alter system set ${setting}`);
  }
  // template0 and template1 are half of the dump, and no test creates a database on PGlite.
  await client.exec("update pg_database set datistemplate = false where datname in ('template0', 'template1')");
  await client.exec('drop database template0');
  await client.exec('drop database template1');
  await keep(client, cached);
  return client;
}

/** Writes `client`'s dump into the cache as `file`. */
async function keep(client: PGlite, file: string) {
  // Written under a private name and renamed: another run may be reading or writing it too.
  await mkdir(CACHE_DIR, { recursive: true });
  const partial = `${file}.${process.pid}.partial`;
  await dump(client, partial);
  await rename(partial, file);
}

/** A PGlite in memory from a dump file (read once, not kept: for the global setup's own use). */
async function openDump(file: string): Promise<PGlite> {
  const bytes = await readFile(file);
  const tarball = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return PGlite.create('memory://', { loadDataDir: Object.assign(new Blob(), { arrayBuffer: async () => tarball }) });
}

/**
 * The migrated template, kept between runs like the empty cluster and named by a hash of what
 * makes it: the migrations as the migrator reads them (drizzle/*.sql and the journal), the
 * migrator's call (src/db/client.ts) and drizzle-orm's version, on this empty cluster. Migrations
 * are DDL only (nothing depends on the time or a random value), so the same inputs make the same
 * database; any change to them, a new migration included, builds it again (about 3 s of CPU).
 * Older ones are not removed (worktrees share node_modules, and another may be reading one): about
 * 9 MB per set of migrations, until node_modules goes.
 */
async function migratedClusterFile(): Promise<string> {
  const root = join(here, '..', '..');
  const migrations = (await readdir(join(root, 'drizzle'))).filter((f) => f.endsWith('.sql')).sort();
  const inputs = [...migrations.map((f) => `drizzle/${f}`), 'drizzle/meta/_journal.json', 'src/db/client.ts'];
  const hash = createHash('sha256');
  for (const input of inputs) hash.update(`${input}\0`).update(await readFile(join(root, input)));
  hash.update(packageVersion('drizzle-orm'));
  const name = `migrated-${emptyClusterName()}-${hash.digest('hex').slice(0, 16)}.tar`;
  const file = join(CACHE_DIR, name);
  if (existsSync(file)) return file;
  const client = await openEmptyCluster();
  await pgliteDatabase(client).migrate();
  await keep(client, file);
  await client.close();
  return file;
}

const emptyClusterName = () => `pglite-${packageVersion('@electric-sql/pglite')}-r${CLUSTER_REVISION}`;
const emptyClusterFile = () => join(CACHE_DIR, `empty-cluster-${emptyClusterName()}.tar`);

/**
 * The empty cluster written into `dir` (which holds no database yet), for a process started on
 * that directory: it runs the migrations itself, but not initdb (about 4 s of CPU).
 */
export async function emptyClusterIn(dir: string): Promise<void> {
  await (await openEmptyCluster()).close(); // the kept dump exists from here on
  await (await openTemplateDatabase(emptyClusterFile(), dir)).close();
}

async function dump(client: PGlite, file: string) {
  await client.exec('checkpoint'); // nothing left to replay when a copy starts
  // The WAL a copy needs: from the checkpoint's redo point to the end. The directory also holds
  // segments recycled for later use (six of the dump's seven 1 MB segments), which every copy
  // would load into memory for nothing: postgres makes new segments when it needs them.
  const {
    rows: [wal],
  } = await client.query<{ first: string; last: string }>(
    'select pg_walfile_name(redo_lsn) as first, pg_walfile_name(pg_current_wal_insert_lsn()) as last from pg_control_checkpoint()',
  );
  if (!wal) throw new Error('no checkpoint to dump from');
  const tarball = new Uint8Array(await (await client.dumpDataDir('none')).arrayBuffer());
  await writeFile(
    file,
    withoutTarEntries(tarball, (name) => isUnneededWalSegment(name, wal.first, wal.last)),
  );
}

/** A WAL segment's name (timeline, log, segment: 24 hex digits) sorts in WAL order on one timeline. */
function isUnneededWalSegment(name: string, first: string, last: string) {
  const segment = /^\/?pg_wal\/([0-9A-F]{24})$/.exec(name)?.[1];
  return segment !== undefined && (segment < first || segment > last);
}

/** The tar archive without the entries `drop` names (PGlite writes ustar: name and prefix fields). */
function withoutTarEntries(tar: Uint8Array, drop: (name: string) => boolean): Uint8Array {
  const field = (header: Uint8Array, at: number, length: number) =>
    Buffer.from(header.subarray(at, at + length))
      .toString('latin1')
      .replace(/\0.*$/s, '');
  const kept: Uint8Array[] = [];
  let offset = 0;
  while (offset + 512 <= tar.length) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((byte) => byte === 0)) break; // the end-of-archive blocks
    const size = Number.parseInt(field(header, 124, 12).trim() || '0', 8);
    const length = 512 + Math.ceil(size / 512) * 512;
    const prefix = field(header, 345, 155);
    const name = prefix ? `${prefix}/${field(header, 0, 100)}` : field(header, 0, 100);
    if (!drop(name)) kept.push(tar.subarray(offset, offset + length));
    offset += length;
  }
  kept.push(new Uint8Array(1024));
  return Buffer.concat(kept);
}

const dumps = new Map<string, Promise<ArrayBuffer>>();

/**
 * A new database with the template's contents (the dump is read once per worker), in memory or
 * in `dir`, which must hold no database yet.
 */
export async function openTemplateDatabase(file: string, dir = 'memory://'): Promise<Database> {
  let bytes = dumps.get(file);
  if (!bytes) {
    bytes = readFile(file).then((b) => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer);
    dumps.set(file, bytes);
  }
  const tarball = await bytes;
  // Node's Blob.arrayBuffer() reassembles a large Blob chunk by chunk (a few hundred ms here);
  // PGlite only reads these bytes (it copies each file into its own file system).
  const loadDataDir = Object.assign(new Blob(), { arrayBuffer: async () => tarball });
  if (dir !== 'memory://') await mkdir(dir, { recursive: true });
  return pgliteDatabase(await PGlite.create(dir, { loadDataDir }));
}

/**
 * Spare in-memory databases per template file, handed back by a closed gateway: opening a dump
 * costs about 250 ms of CPU here (PGlite's WebAssembly, the data directory's load, the collection
 * of the last instance's memory: 85 % of a test gateway's start), putting the template's rows back
 * about 50 ms. PARLEY_TEST_DB_RECYCLE=off opens every database from the dump, as before.
 */
const spares = new Map<string, Recyclable[]>();
export const RECYCLE = process.env.PARLEY_TEST_DB_RECYCLE !== 'off';

interface Recyclable {
  client: PGlite;
  /** Ends the session's state, then puts the template's rows and sequence positions back (one statement each). */
  reset: string[];
}

/**
 * A new in-memory database with the template's contents, as openTemplateDatabase, from a spare
 * when one is free. Closing it does not close PGlite: its rows are reset to the template's and it
 * becomes a spare. A database left unusable (a reset that fails) is closed instead.
 */
export async function recycledTemplateDatabase(file: string): Promise<Database> {
  if (!RECYCLE) return openTemplateDatabase(file);
  const spare = spares.get(file)?.pop() ?? (await recyclable(await openTemplateDatabase(file)));
  let closed: Promise<void> | undefined;
  const database = pgliteDatabase(refusingOnceClosed(spare.client, () => closed !== undefined));
  const recycle = async () => {
    try {
      for (const step of spare.reset) await spare.client.exec(step);
    } catch {
      await spare.client.close();
      return;
    }
    spares.set(file, [...(spares.get(file) ?? []), spare]);
  };
  return {
    ...database,
    close: () => {
      closed ??= recycle();
      return closed;
    },
  };
}

/** The PGlite behind a recycled database's client (the client itself is a view of it per hand-out). */
const pglites = new WeakMap<object, PGlite>();
export const pgliteBehind = (client: PGlite): PGlite => pglites.get(client) ?? client;

/**
 * The spare's client as one gateway sees it: once that gateway closed its database, a query
 * (work it left running, a timer firing after its stop) is refused loudly instead of reaching the
 * next gateway's rows in the same PGlite.
 */
function refusingOnceClosed(client: PGlite, isClosed: () => boolean): PGlite {
  const view = new Proxy(client, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        // Rejected, as the query would have been (PGlite's calls are async).
        if (isClosed())
          return Promise.reject(
            new Error(`this test database was closed (it now serves another gateway): ${String(key)} refused`),
          );
        return value.apply(target, args);
      };
    },
  });
  pglites.set(view, client);
  return view;
}

/** Copies the fresh database's rows into a schema of their own, and writes the statement that restores them. */
async function recyclable(database: Database): Promise<Recyclable> {
  const client = (database.db as unknown as { $client: PGlite }).$client;
  const { rows: tables } = await client.query<{ name: string }>(
    "select quote_ident(tablename) as name from pg_tables where schemaname = 'public' order by tablename",
  );
  const { rows: sequences } = await client.query<{ name: string; value: string | null }>(
    "select quote_ident(sequencename) as name, last_value::text as value from pg_sequences where schemaname = 'public'",
  );
  await client.exec('create schema parley_template');
  for (const { name } of tables) await client.exec(`create table parley_template.${name} as table public.${name}`);
  const restore = [
    // The copies have no foreign keys to order by: the triggers that check them are off meanwhile.
    'set local session_replication_role = replica',
    `truncate ${tables.map(({ name }) => `public.${name}`).join(', ')}`,
    ...tables.map(({ name }) => `insert into public.${name} table parley_template.${name}`),
    ...sequences.map(({ name, value }) =>
      value === null ? `select setval('public.${name}', 1, false)` : `select setval('public.${name}', ${value})`,
    ),
  ];
  // A gateway stopped mid-transaction, or holding session state (settings, prepared statements,
  // advisory locks): ended first, each alone (discard refuses to run in a transaction block).
  const reset = ['rollback', 'discard all', `begin;\n${restore.join(';\n')};\ncommit`];
  return { client, reset };
}
