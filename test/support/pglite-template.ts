import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
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
  const client = await openEmptyCluster();
  const database = pgliteDatabase(client);
  await database.migrate();
  const files: TemplateFiles = { migrated: join(dir, 'migrated.tar'), seeded: join(dir, 'seeded.tar') };
  await dump(client, files.migrated);
  // The same path as an app's start with DEMO_SEED on.
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
const CLUSTER_REVISION = 1; // bump when openEmptyCluster's preparation changes
const here = dirname(fileURLToPath(import.meta.url));
const CACHE_DIR = join(here, '..', '..', 'node_modules', '.cache', 'parley-test');

function pgliteVersion(): string {
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  const root = entry.slice(0, entry.lastIndexOf('/dist/'));
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
  const bytes = await readFile(cached).catch(() => undefined);
  if (bytes) {
    const tarball = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    return PGlite.create('memory://', { loadDataDir: Object.assign(new Blob(), { arrayBuffer: async () => tarball }) });
  }
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
  // Written under a private name and renamed: another run may be reading or writing it too.
  await mkdir(CACHE_DIR, { recursive: true });
  const partial = `${cached}.${process.pid}.partial`;
  await dump(client, partial);
  await rename(partial, cached);
  return client;
}

const emptyClusterFile = () => join(CACHE_DIR, `empty-cluster-pglite-${pgliteVersion()}-r${CLUSTER_REVISION}.tar`);

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
  const tarball = await client.dumpDataDir('none');
  await writeFile(file, new Uint8Array(await tarball.arrayBuffer()));
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
