import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildTemplates } from './support/pglite-template.js';
import { dropDatabases, dropRedisKeys } from './support/stores.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** This run's id: part of every test database's name and Redis prefix (test/support/stores.ts). */
    testRun: string;
  }
}

/**
 * Once per test run, before the workers start: the embedded database templates
 * (test/support/pglite-template.ts). On real services (DATABASE_URL) every app gets a fresh
 * PostgreSQL database instead, and nothing is built here; at the end of the run, the databases
 * and Redis keys of this run that are still there are dropped (the domain harness keeps one set
 * of stores per worker for the whole run, and a worker ends without an afterAll of its own).
 */
export default async function setup(project: TestProject) {
  const run = randomBytes(4).toString('hex');
  project.provide('testRun', run);
  const { DATABASE_URL, REDIS_URL } = process.env;
  const dir = DATABASE_URL ? undefined : await mkdtemp(join(tmpdir(), 'parley-pglite-'));
  if (dir) project.provide('pgliteTemplates', await buildTemplates(dir));
  return async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    if (DATABASE_URL) await dropDatabases(DATABASE_URL, `parley\\_test\\_${run}\\_%`);
    if (REDIS_URL) await dropRedisKeys(REDIS_URL, `parley-test:${run}_*`);
  };
}
