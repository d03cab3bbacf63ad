import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TWO_IDENTITIES } from '../../src/http/request.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { closeAllSockets, connectSocket } from '../support/ws.js';

/**
 * Spec: "The two identities cannot be exchanged." A request naming both — a visitor bearer and
 * an agent `token` — is refused on REST, GraphQL and WebSocket alike, never answered as either.
 */
let t: TestApp;
let agent: Awaited<ReturnType<typeof agentSession>>;
let visitor: Awaited<ReturnType<typeof visitorToken>>;
beforeAll(async () => {
  t = await startTestApp();
  agent = await agentSession(t.url, 'alice');
  visitor = await visitorToken(t.url);
});
afterAll(async () => {
  await closeAllSockets();
  await t.stop();
});

const both = () => ({ authorization: `Bearer ${visitor.token}`, token: agent.token });

describe('a request carrying both identities is refused everywhere', () => {
  it.each(['/agent/data/get', '/visitor/data/get'])('REST %s: HTTP 400, code 1000, naming the rule', async (path) => {
    const { status, body } = await new HttpClient(t.url).json(path, { headers: both() });
    expect({ status, code: body.code, msg: body.msg }).toEqual({ status: 400, code: 1000, msg: TWO_IDENTITIES });
  });

  it('REST with the agent token in the query beside a bearer: refused too', async () => {
    const { status, body } = await new HttpClient(t.url).json(`/agent/data/get?token=${agent.token}`, {
      headers: { authorization: `Bearer ${visitor.token}` },
    });
    expect({ status, code: body.code }).toEqual({ status: 400, code: 1000 });
  });

  it('GraphQL: HTTP 400 with BAD_USER_INPUT, for an agent field and a visitor field alike', async () => {
    for (const query of ['{ agentWorkbench { agent { agentId } } }', '{ visitorBootstrap { visitor { uid } } }']) {
      const { status, body } = await new HttpClient(t.url).graphql(query, undefined, both());
      expect(status).toBe(400);
      expect(body.data).toBeUndefined();
      expect(body.errors?.[0]).toMatchObject({ message: TWO_IDENTITIES, extensions: { code: 'BAD_USER_INPUT' } });
    }
  });

  it('WebSocket: a connection_init with both closes 4403 with the rule as its reason', async () => {
    const socket = connectSocket(t.wsUrl, {
      appkey: 'demo-appkey',
      authorization: `Bearer ${visitor.token}`,
      token: agent.token,
    });
    expect(await socket.closed).toEqual({ code: 4403, reason: TWO_IDENTITIES });
  });

  it('each identity alone still works, and a Session cookie beside a bearer is the visitor (the cookie is ambient, not a claim)', async () => {
    expect((await agent.client.json('/agent/data/get')).body.code).toBe(0);
    const asVisitor = await agent.client.json('/visitor/data/get', {
      headers: { authorization: `Bearer ${visitor.token}` },
    });
    expect(asVisitor.body.code).toBe(0);
    expect(asVisitor.body.data.visitor.uid).toBe(visitor.uid);
  });
});
