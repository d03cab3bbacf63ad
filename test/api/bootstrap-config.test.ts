import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGraphQLServer } from '../../src/schema/yoga.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { bearer, rawGet } from './bootstrap.fixtures.js';

const PUBLIC_WS = 'wss://chat.example.com/realtime';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ env: { NODE_ENV: 'development', PUBLIC_WS_ADDRESS: PUBLIC_WS } });
});
afterAll(() => t.stop());

describe('ws_address with PUBLIC_WS_ADDRESS set', () => {
  it('is PUBLIC_WS_ADDRESS for visitors and agents, over REST and GraphQL, whatever the request Host', async () => {
    const { token } = await visitorToken(t.url);
    const visitor = await rawGet(t.url, '/visitor/data/get', { ...bearer(token), host: 'other.example.org' });
    expect(visitor.body.data.setting.ws_address).toBe(PUBLIC_WS);

    const alice = await agentSession(t.url, 'alice');
    const agent = await rawGet(t.url, '/agent/data/get', { token: alice.token, host: 'other.example.org' });
    expect(agent.body.data.setting.ws_address).toBe(PUBLIC_WS);

    const gql = await alice.client.graphql('{ agentWorkbench { setting { wsAddress } } }');
    expect(gql.body.data.agentWorkbench.setting.wsAddress).toBe(PUBLIC_WS);
    const gqlVisitor = await new HttpClient(t.url).graphql(
      '{ visitorBootstrap { setting { wsAddress } } }',
      undefined,
      bearer(token),
    );
    expect(gqlVisitor.body.data.visitorBootstrap.setting.wsAddress).toBe(PUBLIC_WS);
  });
});

describe('GraphiQL', () => {
  const asBrowser = { accept: 'text/html,application/xhtml+xml' };

  it('is served at GET /graphql to a browser in development', async () => {
    const res = await fetch(`${t.url}/graphql`, { headers: asBrowser });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await res.text()).toMatch(/graphiql/i);
  });

  it('is not served in production nor in test', async () => {
    for (const env of ['production', 'test'] as const) {
      const yoga = createGraphQLServer({ ...t.app.deps, config: { ...t.config, env } });
      const res = await yoga.fetch('http://localhost/graphql', { headers: asBrowser });
      const body = await res.text();
      expect([env, res.status]).toEqual([env, 406]); // no HTML representation to offer
      expect(res.headers.get('content-type') ?? '').not.toMatch(/text\/html/);
      expect(body).not.toMatch(/graphiql/i);
    }
  });
});
