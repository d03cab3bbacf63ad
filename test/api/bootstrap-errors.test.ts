import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { bearer, visitorData } from './bootstrap.fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.stop());

const codeOf = (body: { errors?: { extensions?: { code?: string } }[] }) => body.errors?.[0]?.extensions?.code;

describe('GraphQL errors are typed (extensions.code)', () => {
  it('unauthenticated: UNAUTHENTICATED for either bootstrap without its identity', async () => {
    const client = new HttpClient(t.url);
    const visitor = await client.graphql('{ visitorBootstrap { visitor { uid } } }');
    expect(visitor.status).toBe(200);
    expect(visitor.body).toEqual({
      data: null,
      errors: [{ message: expect.any(String), path: ['visitorBootstrap'], extensions: { code: 'UNAUTHENTICATED' } }],
    });
    const agent = await client.graphql('{ agentWorkbench { agent { agentId } } }');
    expect(codeOf(agent.body)).toBe('UNAUTHENTICATED');
  });

  it('forbidden role: FORBIDDEN for a ticket_agent asking for the workbench', async () => {
    const tom = await agentSession(t.url, 'tom');
    const gql = await tom.client.graphql('{ agentWorkbench { agent { agentId } } }');
    expect(gql.body).toEqual({
      data: null,
      errors: [{ message: expect.any(String), path: ['agentWorkbench'], extensions: { code: 'FORBIDDEN' } }],
    });
    // tom's own profile is no online reception: it stays readable.
    const me = await tom.client.graphql('{ currentAgent { agentId level } }');
    expect(me.body.data).toEqual({ currentAgent: { agentId: 'a_tom', level: 'ticket_agent' } });
  });

  it('bad argument: BAD_USER_INPUT naming the field', async () => {
    const gql = await new HttpClient(t.url).graphql(
      'mutation($lang: String) { issueVisitorToken(appkey: "demo-appkey", lang: $lang) { uid } }',
      { lang: 'not a language' },
    );
    expect(gql.body.errors).toEqual([
      expect.objectContaining({ message: expect.stringMatching(/^lang /), extensions: { code: 'BAD_USER_INPUT' } }),
    ]);
  });

  it('an invalid document is refused before execution (GRAPHQL_VALIDATION_FAILED)', async () => {
    const gql = await new HttpClient(t.url).graphql('{ visitorBootstrap { visitor { password } } }');
    expect(gql.body.data).toBeUndefined();
    expect(codeOf(gql.body)).toBe('GRAPHQL_VALIDATION_FAILED');
  });
});

describe('Internal errors are masked', () => {
  it('a failing query answers "Internal error" (GraphQL INTERNAL_SERVER_ERROR, REST code 1500): no SQL, no stack', async () => {
    const { token } = await visitorToken(t.url);
    const alice = await agentSession(t.url, 'alice');
    // A real fault, not a mock: the attribute table disappears under the running server.
    await t.app.deps.db.execute(sql`alter table visitor_attribute_defs rename to visitor_attribute_defs_gone`);
    try {
      const gql = await new HttpClient(t.url).graphql(
        '{ visitorBootstrap { visitor { uid } } }',
        undefined,
        bearer(token),
      );
      expect(gql.body).toEqual({
        data: null,
        errors: [
          { message: 'Internal error', path: ['visitorBootstrap'], extensions: { code: 'INTERNAL_SERVER_ERROR' } },
        ],
      });
      const rest = await visitorData(t.url, token);
      expect(rest.status).toBe(500);
      expect(rest.body).toEqual({ code: 1500, msg: 'Internal error', data: [] });
      const workbench = await alice.client.json('/agent/data/get');
      expect(workbench.body).toEqual({ code: 1500, msg: 'Internal error', data: [] });

      for (const answer of [JSON.stringify(gql.body), JSON.stringify(rest.body), JSON.stringify(workbench.body)]) {
        expect(answer).not.toMatch(/visitor_attribute_defs|select|relation|stack|\.ts:/i);
      }
      // The details go to the server log instead.
      expect(t.rawLogs()).toContain('visitor_attribute_defs');
    } finally {
      await t.app.deps.db.execute(sql`alter table visitor_attribute_defs_gone rename to visitor_attribute_defs`);
    }
    expect((await visitorData(t.url, token)).body.code).toBe(0);
  });
});
