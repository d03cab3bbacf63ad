import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkSchema, schemaChanges } from '../../scripts/schema-check.js';

const V1 = `type Query {
  """The visitor bootstrap."""
  visitorBootstrap: Visitor!
}
type Visitor {
  uid: String!
  nickname: String!
}
`;

describe('GraphQL breaking-change check (graphql-inspector)', () => {
  it('adding a field is not breaking; removing one or changing its type is', async () => {
    const added = await schemaChanges(V1, V1.replace('nickname: String!', 'nickname: String!\n  lang: String!'));
    expect(added.map((c) => c.level)).toEqual(['NON_BREAKING']);
    const removed = await schemaChanges(V1, V1.replace('  nickname: String!\n', ''));
    expect(removed).toEqual([
      expect.objectContaining({ level: 'BREAKING', message: expect.stringMatching(/nickname/) }),
    ]);
    const retyped = await schemaChanges(V1, V1.replace('uid: String!', 'uid: Int!'));
    expect(retyped.some((c) => c.level === 'BREAKING')).toBe(true);
  });

  describe('against the previous commit of a repository', () => {
    const repos: string[] = [];
    afterEach(() => {
      for (const dir of repos.splice(0)) rmSync(dir, { recursive: true, force: true });
    });
    const repo = () => {
      const dir = mkdtempSync(join(tmpdir(), 'parley-schema-'));
      repos.push(dir);
      const git = (...args: string[]) =>
        execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd: dir });
      git('init', '-q');
      const commit = (sdl: string, message: string) => {
        writeFileSync(join(dir, 'schema.graphql'), sdl);
        git('add', 'schema.graphql');
        git('commit', '-q', '-m', message);
      };
      return { dir, commit };
    };
    const run = async (dir: string) => {
      const lines: string[] = [];
      const code = await checkSchema('HEAD~1', { cwd: dir, log: (l) => lines.push(l) });
      return { code, output: lines.join('\n') };
    };

    it('skips with a message on a first commit', async () => {
      const { dir, commit } = repo();
      commit(V1, 'first');
      expect(await run(dir)).toEqual({ code: 0, output: expect.stringMatching(/skipped: there is no HEAD~1/) });
    });

    it('passes a compatible change and fails a breaking one', async () => {
      const { dir, commit } = repo();
      commit(V1, 'first');
      commit(V1.replace('nickname: String!', 'nickname: String!\n  avatar: String!'), 'add avatar');
      expect((await run(dir)).code).toBe(0);
      commit(V1, 'drop avatar');
      const broken = await run(dir);
      expect(broken.code).toBe(1);
      expect(broken.output).toMatch(/\[BREAKING\].*avatar/);
    });

    it('lets a deliberate break through with a Schema-Breaking: trailer', async () => {
      const { dir, commit } = repo();
      commit(V1, 'first');
      commit(V1.replace('  nickname: String!\n', ''), 'Drop nickname\n\nSchema-Breaking: no client reads it');
      const result = await run(dir);
      expect(result.code).toBe(0);
      expect(result.output).toMatch(/accepted/);
    });
  });
});
