import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildTemplates } from './support/pglite-template.js';

/**
 * Once per test run, before the workers start: the embedded database templates
 * (test/support/pglite-template.ts). On real services (DATABASE_URL) every app gets a fresh
 * PostgreSQL database instead, and nothing is built here.
 */
export default async function setup(project: TestProject) {
  if (process.env.DATABASE_URL) return;
  const dir = await mkdtemp(join(tmpdir(), 'parley-pglite-'));
  project.provide('pgliteTemplates', await buildTemplates(dir));
  return () => rm(dir, { recursive: true, force: true });
}
