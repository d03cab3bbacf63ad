import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CSRF_HEADERS } from '../../src/schema/security.js';
import { agentSession, type HttpClient } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

// Issue 14: common clients work with their defaults, while a cross-site form post or simple
// request still cannot run an operation (docs/graphql.md "Cross-site requests").
let t: TestApp;
let agent: HttpClient;
beforeAll(async () => {
  t = await startTestApp();
  ({ client: agent } = await agentSession(t.url, 'alice'));
});
afterAll(() => t?.stop());

const WHO = '{ currentAgent { agentId } }';
const getQuery = (query: string) => `/graphql?query=${encodeURIComponent(query)}`;

async function errorCode(res: Response) {
  const body = (await res.json()) as { errors?: { extensions?: { code?: string } }[] };
  return body.errors?.[0]?.extensions?.code;
}

describe('GraphQL over HTTP: what a cross-site request can and cannot do', () => {
  it("urql's default GET of a query (no Content-Type, no extra header) runs", async () => {
    const res = await agent.request(getQuery(WHO), {
      headers: { accept: 'application/graphql-response+json, application/graphql+json, application/json' },
    });
    expect(res.status).toBe(200);
    expect((await res.json()).data.currentAgent.agentId).toBe('a_alice');
  });

  it.each(CSRF_HEADERS)('the %s header lets a GET of a query and a form-typed POST through', async (header) => {
    const res = await agent.request(getQuery(WHO), { headers: { [header]: 'true', accept: 'application/json' } });
    expect(res.status).toBe(200);
    const post = await agent.request('/graphql', {
      method: 'POST',
      headers: { [header]: 'true', 'content-type': 'text/plain' },
      body: JSON.stringify({ query: WHO }),
    });
    expect(post.status).not.toBe(403); // not refused as CSRF (yoga reads no text/plain body: 415)
  });

  it('a cross-site form post of a mutation is refused with CSRF_REFUSED and does nothing', async () => {
    for (const type of ['application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'text/plain']) {
      const body =
        type === 'text/plain'
          ? JSON.stringify({ query: 'mutation { logout }' })
          : 'query=mutation%20%7B%20logout%20%7D';
      const res = await agent.request('/graphql', { method: 'POST', headers: { 'content-type': type }, body });
      expect(res.status, type).toBe(403);
      expect(await errorCode(res), type).toBe('CSRF_REFUSED');
    }
    const still = await agent.graphql(WHO);
    expect(still.body.data?.currentAgent.agentId).toBe('a_alice');
  });

  it('a POST without a Content-Type is refused with CSRF_REFUSED', async () => {
    const res = await agent.request('/graphql', { method: 'POST', body: new Blob([JSON.stringify({ query: WHO })]) });
    expect(res.status).toBe(403);
    expect(await errorCode(res)).toBe('CSRF_REFUSED');
  });

  it('a simple GET cannot run a mutation or a subscription', async () => {
    const mutation = await agent.request(getQuery('mutation { logout }'), { headers: { accept: 'application/json' } });
    expect([403, 405]).toContain(mutation.status);
    const named = await agent.request(`${getQuery('query Q { __typename } mutation M { logout }')}&operationName=M`);
    expect([403, 405]).toContain(named.status);
    // Twice: a document served from the parse cache is checked all the same.
    for (const _ of [1, 2]) {
      const subscription = await agent.request(getQuery('subscription { channel(name: "global-demo") { id } }'), {
        headers: { accept: 'text/event-stream' },
      });
      expect(subscription.status).toBe(403);
      expect(await subscription.text()).toContain('"code":"CSRF_REFUSED"'); // as a server-sent event
    }
    const still = await agent.graphql(WHO);
    expect(still.body.data?.currentAgent.agentId).toBe('a_alice');
  });

  it('JSON (which a browser preflights cross-site) runs without any header', async () => {
    const { status, body } = await agent.graphql(WHO);
    expect(status).toBe(200);
    expect(body.data?.currentAgent.agentId).toBe('a_alice');
  });
});
