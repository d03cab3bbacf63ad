import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The dependency direction of ARCHITECTURE.md, enforced:
 *   db, stores, auth  <-  resolvers  <-  schema, rest, subscriptions, pages (over http)
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SRC = join(ROOT, 'src');

/** Packages of the protocol adapters: the domain layer must not know HTTP, GraphQL or WebSockets. */
const ADAPTER_PACKAGES = /^(express|express-session|graphql|graphql-yoga|ws|graphql-ws|@pothos\/[^/]+)(\/.*)?$/;
/** The adapters and the composition root (src/app.ts, src/main.ts, src/cli.ts, src/compose.ts: buildDeps) sit above the domain layer. */
const ADAPTER_FOLDERS = ['schema', 'rest', 'http', 'subscriptions', 'pages', 'cli', 'app', 'main', 'compose'];

const sourceFiles = (folder: string): string[] =>
  readdirSync(join(SRC, folder), { recursive: true, encoding: 'utf8' })
    .filter((file) => /\.[cm]?tsx?$/.test(file) && !file.endsWith('.d.ts'))
    .map((file) => join(SRC, folder, file));

/** Every module a source file imports: static, type-only, re-exports, dynamic `import()` and `require`. */
function importsOf(source: string): string[] {
  return ts.preProcessFile(source, true, true).importedFiles.map((f) => f.fileName);
}

/** The folder (or top-level module, without extension) under src/ an import of `file` lands in; undefined for a package. */
function srcFolderOf(file: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const target = relative(SRC, resolve(dirname(file), specifier));
  return target.startsWith('..') ? undefined : target.split(/[\\/]/)[0]?.replace(/\.[cm]?[jt]s$/, '');
}

/** The imports of `file` that break its layer's rule: `forbiddenFolders` of src/, or (optionally) adapter packages. */
function violations(file: string, source: string, forbiddenFolders: string[], packagesToo: boolean): string[] {
  return importsOf(source)
    .filter((specifier) => {
      if (packagesToo && ADAPTER_PACKAGES.test(specifier)) return true;
      const folder = srcFolderOf(file, specifier);
      return folder !== undefined && forbiddenFolders.includes(folder);
    })
    .map((specifier) => `${relative(ROOT, file)} imports ${specifier}`);
}

const check = (folder: string, forbiddenFolders: string[], packagesToo: boolean) =>
  sourceFiles(folder).flatMap((file) => violations(file, readFileSync(file, 'utf8'), forbiddenFolders, packagesToo));

describe('Architecture: the dependency direction of ARCHITECTURE.md', () => {
  it('src/resolvers/ imports no protocol: no express, graphql, graphql-yoga, ws, graphql-ws, @pothos, nor src/{schema,rest,http,subscriptions,pages,cli}, nor the composition root', () => {
    expect(sourceFiles('resolvers').length).toBeGreaterThan(5);
    expect(check('resolvers', ADAPTER_FOLDERS, true)).toEqual([]);
  });

  it('src/db/, src/stores/ and src/auth/ import neither the domain layer nor an adapter', () => {
    for (const folder of ['db', 'stores', 'auth']) {
      expect(check(folder, ['resolvers', ...ADAPTER_FOLDERS], false)).toEqual([]);
    }
  });

  it('the checker sees every kind of import (it would catch a violation)', () => {
    const file = join(SRC, 'resolvers', 'example.ts');
    const source = [
      "import express from 'express';",
      "import type { GraphQLError } from 'graphql';",
      "import { builder } from '../schema/builder.js';",
      "export { envelope } from '../rest/envelope.js';",
      "const ws = await import('ws');",
      "const plugin = require('@pothos/plugin-errors');",
      "import { useServer } from 'graphql-ws/use/ws';",
      "import { requestSessionPort } from '../http/session.js';",
      "import { buildApp } from '../app.js';",
      "import { merchants } from '../db/schema.js';", // allowed
      "import { z } from 'zod';", // allowed
      "import { hashToken } from './viewer.js';", // allowed
    ].join('\n');
    expect(violations(file, source, ADAPTER_FOLDERS, true).sort()).toEqual(
      [
        'src/resolvers/example.ts imports express',
        'src/resolvers/example.ts imports graphql',
        'src/resolvers/example.ts imports ../schema/builder.js',
        'src/resolvers/example.ts imports ../rest/envelope.js',
        'src/resolvers/example.ts imports graphql-ws/use/ws',
        'src/resolvers/example.ts imports ../http/session.js',
        'src/resolvers/example.ts imports ../app.js',
        'src/resolvers/example.ts imports ws',
        'src/resolvers/example.ts imports @pothos/plugin-errors',
      ].sort(),
    );
  });
});
