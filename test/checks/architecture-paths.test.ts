import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join, posix } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * ARCHITECTURE.md true to the tree: every path it names exists, and its "Folders" tree names
 * every entry of src/ and of the folders it lists file by file (the domain and the real-time
 * transports), so a file added, moved or removed there shows up in the map or fails here.
 */
const ARCHITECTURE = readFileSync('ARCHITECTURE.md', 'utf8');
/** Not in the repository by design: the compiled build (gitignored). */
const BUILD_OUTPUT = /^dist(\/|$)/;
/** The folders whose every entry the tree must name (a subfolder counts as one entry). */
const LISTED_FILE_BY_FILE = ['src', 'src/resolvers', 'src/subscriptions'];

/** The code block under "## Folders". */
function foldersBlock(doc: string): string[] {
  const section = doc.split(/^## Folders$/m)[1]?.split(/^## /m)[0] ?? '';
  return (section.split('```')[1] ?? '').split('\n').slice(1);
}

/** File names a description mentions: `name.ts` or a relative path such as `assets/contract.js`. */
function mentionedFiles(text: string): string[] {
  return [...text.matchAll(/(?<![\w./-])((?:[\w-]+\/)*[\w.-]+\.ts|(?:[\w-]+\/)+[\w.-]+\.(?:js|mjs|json))\b/g)].map(
    (m) => m[1] as string,
  );
}

/**
 * Every path the tree names, repository-relative: an entry line (`  name.ts, other/   what it
 * holds`) names its entries under the nearest less-indented folder; its description and the
 * continuation lines below it (indented to the description column) name files of that folder, or
 * of the repository when they start with a top-level folder.
 */
function pathsOfTree(lines: string[]): { entries: string[]; mentioned: string[] } {
  const entries: string[] = [];
  const mentioned: string[] = [];
  const parents: { indent: number; dir: string }[] = [];
  let here = '';
  const resolve = (name: string) =>
    /^(src|test|client|bench|scripts|drizzle|docs|dist)\//.test(name) ? name : posix.join(here, name);
  for (const line of lines) {
    if (!line.trim()) continue;
    const indent = line.length - line.trimStart().length;
    const entry = indent < 12 ? /^(\s*)(\S+(?:, \S+)*)(?:\s{2,}(.*))?$/.exec(line) : null;
    if (!entry) {
      mentioned.push(...mentionedFiles(line).map(resolve));
      continue;
    }
    while (parents.length && (parents.at(-1) as { indent: number }).indent >= indent) parents.pop();
    const parent = parents.at(-1)?.dir ?? '';
    const names = (entry[2] as string).split(', ');
    for (const name of names) entries.push(posix.join(parent, name));
    const dir = names.find((n) => n.endsWith('/'));
    if (dir) parents.push({ indent, dir: posix.join(parent, dir) });
    here = dir ? posix.join(parent, dir) : parent;
    mentioned.push(...mentionedFiles(entry[3] ?? '').map(resolve));
  }
  return { entries, mentioned };
}

/** Paths in backticks in the prose: repository-relative ones, and bare file names (found by name under src/). */
function backtickedPaths(doc: string): { paths: string[]; names: string[] } {
  const quoted = [...doc.matchAll(/`([^`\s]+)`/g)].map((m) => m[1] as string).filter((q) => !/[<>*{}]/.test(q));
  return {
    paths: quoted.filter((q) => /^(src|test|client|bench|scripts|drizzle|docs)\/[\w./-]*$/.test(q)),
    names: quoted.filter((q) => /^[\w-]+\.(ts|js|mjs)$/.test(q)),
  };
}

const filesUnder = (dir: string) => readdirSync(dir, { recursive: true, encoding: 'utf8' }).map((f) => basename(f));

describe('ARCHITECTURE.md names the tree as it is', () => {
  const tree = pathsOfTree(foldersBlock(ARCHITECTURE));

  it('every entry of the "Folders" tree exists', () => {
    expect(tree.entries.length).toBeGreaterThan(40);
    expect(tree.entries.filter((p) => !BUILD_OUTPUT.test(p) && !existsSync(p))).toEqual([]);
  });

  it('every file a description of the tree mentions exists', () => {
    expect(tree.mentioned.length).toBeGreaterThan(20);
    expect(tree.mentioned.filter((p) => !BUILD_OUTPUT.test(p) && !existsSync(p))).toEqual([]);
  });

  it('every path in backticks exists, and every file name in backticks is a file under src/', () => {
    const { paths, names } = backtickedPaths(ARCHITECTURE);
    expect(paths.length).toBeGreaterThan(5);
    expect(paths.filter((p) => !existsSync(p))).toEqual([]);
    const srcFiles = new Set(filesUnder('src'));
    expect(names.filter((n) => !srcFiles.has(n))).toEqual([]);
  });

  it(`names every entry of ${LISTED_FILE_BY_FILE.join(', ')}`, () => {
    const named = new Set([...tree.entries, ...tree.mentioned].map((p) => p.replace(/\/$/, '')));
    const unnamed = LISTED_FILE_BY_FILE.flatMap((dir) =>
      readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isDirectory() || /\.ts$/.test(e.name))
        .map((e) => join(dir, e.name))
        .filter((p) => !named.has(p)),
    );
    expect(unnamed).toEqual([]);
  });

  it('the reader of the tree finds entries, nested folders, descriptions and continuation lines', () => {
    const sample = [
      'src/',
      '  main.ts            starts it',
      '  cli.ts, cli/       the CLI over src/resolvers/admin.ts',
      '  rest/              REST: route.ts (routes),',
      '                     endpoints.ts and assets/contract.js',
      '  resolvers/         the domain:',
      '    viewer.ts          who is calling',
      'docs/                by subject',
    ];
    expect(pathsOfTree(sample)).toEqual({
      entries: [
        'src/',
        'src/main.ts',
        'src/cli.ts',
        'src/cli/',
        'src/rest/',
        'src/resolvers/',
        'src/resolvers/viewer.ts',
        'docs/',
      ],
      mentioned: [
        'src/resolvers/admin.ts',
        'src/rest/route.ts',
        'src/rest/endpoints.ts',
        'src/rest/assets/contract.js',
      ],
    });
  });
});
