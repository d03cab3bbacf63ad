import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CSRF_HEADER, GRAPHQL_LIMITS } from '../../src/schema/security.js';
import { agentSession, HttpClient } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { closeAllSockets, connectSocket } from '../support/ws.js';

const deep = (levels: number) => {
  // currentAgent has no nested objects; __type introspection nests as deep as we like.
  let selection = 'name';
  for (let i = 0; i < levels; i++) selection = `ofType { ${selection} }`;
  return `{ __type(name: "Agent") { fields { type { ${selection} } } } }`;
};
// __typename aliases are allowed freely; any other field counts.
const aliases = (n: number) =>
  `{ ${Array.from({ length: n }, (_, i) => `a${i}: currentAgent { agentId }`).join(' ')} }`;

describe('graphql: limits over HTTP', () => {
  let t: TestApp;
  let client: HttpClient;
  beforeAll(async () => {
    t = await startTestApp();
    client = new HttpClient(t.url);
  });
  afterAll(async () => {
    await closeAllSockets();
    await t.stop();
  });

  it('the legitimate bootstrap query passes every limit', async () => {
    const { client: agent } = await agentSession(t.url, 'alice');
    const { body } = await agent.graphql(
      '{ agentWorkbench { chatting { key id name items } agent { agentId state } agentGroups { id name } setting { bid wsAddress extra } visitorAttributeConfig { attributes { key } } extensions { nav flags } } }',
    );
    expect(body.errors).toBeUndefined();
    expect(body.data.agentWorkbench.agent.agentId).toBeTruthy();
  });

  it('refuses a query deeper than the depth limit', async () => {
    const { body } = await client.graphql(deep(GRAPHQL_LIMITS.maxDepth + 2));
    expect(body.data).toBeUndefined();
    expect(body.errors?.[0]?.message).toMatch(/depth/i);
  });

  it('refuses more aliases than the limit', async () => {
    const allowed = await client.graphql(aliases(GRAPHQL_LIMITS.maxAliases));
    expect(allowed.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED'); // validated, then executed
    const { body } = await client.graphql(aliases(GRAPHQL_LIMITS.maxAliases + 1));
    expect(body.data).toBeUndefined();
    expect(body.errors?.[0]?.message).toMatch(/alias/i);
  });

  it('refuses a document with too many tokens', async () => {
    const query = `{ ${'__typename '.repeat(GRAPHQL_LIMITS.maxTokens)} }`;
    const { body } = await client.graphql(query);
    expect(body.errors?.[0]?.message).toMatch(/token/i);
  });

  it('refuses batched operations', async () => {
    const res = await client.request('/graphql', {
      method: 'POST',
      json: [{ query: '{ __typename }' }, { query: '{ __typename }' }],
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
  });

  it('refuses a mutation over GET', async () => {
    const query = encodeURIComponent('mutation { logout }');
    const res = await client.request(`/graphql?query=${query}`, {
      headers: { [CSRF_HEADER]: '1', accept: 'application/json' },
    });
    expect(res.status).toBe(405);
  });

  it('a GET without the CSRF header may run a query only (urql default); a cross-site page cannot read it', async () => {
    const query = encodeURIComponent('{ __typename }');
    const plain = await client.request(`/graphql?query=${query}`, { headers: { accept: 'application/json' } });
    expect(plain.status).toBe(200);
    expect(plain.headers.get('access-control-allow-origin')).toBeNull();
    const subscription = encodeURIComponent('subscription { channel(name: "global-demo") { id } }');
    const sub = await client.request(`/graphql?query=${subscription}`, { headers: { accept: 'application/json' } });
    expect(sub.status).toBe(403);
    expect((await sub.json()).errors?.[0]?.extensions?.code).toBe('CSRF_REFUSED');
  });

  it('refuses a cookie-authenticated mutation posted as a simple cross-site form', async () => {
    const { client: agent } = await agentSession(t.url, 'alice');
    const res = await agent.request('/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'query=mutation%20%7B%20logout%20%7D',
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect((await agent.json('/agent/data/get')).body.code).toBe(0); // still logged in
  });

  it('applies the same limits to operations over WebSocket', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token });
    await socket.acked;
    const errors = await new Promise<readonly unknown[]>((resolve) => {
      socket.client.subscribe(
        {
          query: `subscription { ${Array.from({ length: GRAPHQL_LIMITS.maxAliases + 1 }, (_, i) => `a${i}: channel(name: "agent-a_alice") { id }`).join(' ')} }`,
        },
        { next: () => {}, error: (e) => resolve(Array.isArray(e) ? e : [e]), complete: () => resolve([]) },
      );
    });
    expect(JSON.stringify(errors)).toMatch(/alias/i);
  });
});

describe('graphql: production switches of the gateway as buildApp wires it', () => {
  // The real gateway (buildApp: express, the Session layer, src/schema/yoga.ts) with the
  // production switches; the development one shows the same requests do answer when allowed.
  let production: TestApp;
  let development: TestApp;
  beforeAll(async () => {
    [production, development] = await Promise.all([
      startTestApp({ config: { env: 'production', demoSeed: false } }),
      startTestApp({ config: { env: 'development' } }),
    ]);
  }, 180_000); // two gateways started at once: slow on a loaded machine
  afterAll(async () => {
    await Promise.all([production?.stop(), development?.stop()]);
  });
  const post = async (t: TestApp, query: string) => (await new HttpClient(t.url).graphql(query)).body;

  it('introspection is off in production', async () => {
    expect(production.config.env).toBe('production');
    const body = await post(production, '{ __schema { types { name } } }');
    expect(body.data).toBeUndefined();
    expect(body.errors?.[0]?.message).toMatch(/introspection/i);
    const typeQuery = await post(production, '{ __type(name: "Agent") { name } }');
    expect(typeQuery.data?.__type).toBeFalsy();
    const dev = await post(development, '{ __schema { types { name } } }');
    expect(dev.data.__schema.types.length).toBeGreaterThan(10);
  });

  it('no "did you mean" suggestions in production', async () => {
    const body = await post(production, '{ agentWorkbenc { agent { agentId } } }');
    expect(body.errors?.[0]?.message).toMatch(/agentWorkbenc/);
    expect(JSON.stringify(body.errors)).not.toMatch(/did you mean/i);
    const dev = await post(development, '{ agentWorkbenc { agent { agentId } } }');
    expect(JSON.stringify(dev.errors)).toMatch(/did you mean/i);
  });
});
