import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The documentation a user reads: the README (the door) and every page of `docs/` (the
 * reference, by subject). Contract tests look for a declaration's row anywhere in it, so a
 * subject can move between pages without a test change.
 */
export function readDocs(): string {
  const pages = existsSync('docs')
    ? readdirSync('docs', { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.md'))
        .sort()
        .map((f) => readFileSync(join('docs', f), 'utf8'))
    : [];
  return [readFileSync('README.md', 'utf8'), ...pages].join('\n');
}
