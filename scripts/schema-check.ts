import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { diff } from '@graphql-inspector/core';
import { buildSchema } from 'graphql';

/**
 * The GraphQL breaking-change check (`npm run schema:check [-- <base>]`): compares the
 * checked-in schema.graphql with the one of `<base>` (default: the previous commit, HEAD~1)
 * using graphql-inspector, prints every change and fails on a breaking one.
 *
 * A deliberate break is let through when the newest commit message carries a
 * `Schema-Breaking: <why>` trailer (see CONTRIBUTING.md).
 */

export interface SchemaChange {
  level: 'BREAKING' | 'DANGEROUS' | 'NON_BREAKING';
  message: string;
}

/** The changes from `oldSdl` to `newSdl`, as graphql-inspector classifies them. */
export async function schemaChanges(oldSdl: string, newSdl: string): Promise<SchemaChange[]> {
  const changes = await diff(buildSchema(oldSdl), buildSchema(newSdl));
  return changes.map((c) => ({ level: c.criticality.level as SchemaChange['level'], message: c.message }));
}

/** Runs the check in the repository at `cwd`; returns the exit code. */
export async function checkSchema(
  base: string,
  opts: { cwd?: string; log?: (line: string) => void } = {},
): Promise<number> {
  const cwd = opts.cwd ?? process.cwd();
  const log = opts.log ?? console.log;
  const tryGit = (...args: string[]) => {
    try {
      return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    } catch {
      return undefined;
    }
  };
  const current = join(cwd, 'schema.graphql');
  if (!existsSync(current)) {
    log('schema.graphql is missing: run `npm run schema:print` and commit it.');
    return 1;
  }
  if (!tryGit('rev-parse', '--verify', '--quiet', `${base}^{commit}`)) {
    log(`schema check skipped: there is no ${base} commit to compare with (first commit).`);
    return 0;
  }
  const previous = tryGit('show', `${base}:schema.graphql`);
  if (previous === undefined) {
    log(`schema check skipped: ${base} has no schema.graphql yet.`);
    return 0;
  }
  const changes = await schemaChanges(previous, readFileSync(current, 'utf8'));
  const breaking = changes.filter((c) => c.level === 'BREAKING');
  log(`schema.graphql against ${base}: ${changes.length} change(s), ${breaking.length} breaking.`);
  for (const c of changes) log(`  [${c.level}] ${c.message}`);
  if (breaking.length === 0) return 0;
  const trailer = /^Schema-Breaking:\s*\S/m.test(tryGit('log', '-1', '--format=%B') ?? '');
  if (trailer) {
    log('Breaking changes accepted: the newest commit message has a Schema-Breaking: trailer.');
    return 0;
  }
  log(
    'Breaking changes fail the check. Keep the old fields (deprecate them with @deprecated instead), or, when the break is deliberate, add a "Schema-Breaking: <why>" trailer to the commit message.',
  );
  return 1;
}

if (process.argv[1]?.endsWith('schema-check.ts')) {
  process.exitCode = await checkSchema(process.argv[2] ?? process.env.SCHEMA_BASE ?? 'HEAD~1');
}
