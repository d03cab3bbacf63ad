import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditLog, merchants } from '../../src/db/schema.js';
import { issueApiKey } from '../../src/resolvers/integration/api-keys/keys.js';
import type { ApiKeyScope } from '../../src/resolvers/integration/api-keys/scopes.js';
import { API_KEYS_OVER_HTTP_ONLY } from '../../src/subscriptions/ws-identity.js';
import { agentSession, HttpClient } from '../support/clients.js';
import { realServices } from '../support/required.js';
import { freshStores, startTestApp, type TestApp, type TestStores, withClockAhead } from '../support/test-app.js';
import { connectSocket } from '../support/ws.js';

/**
 * The server-to-server surface of API keys (docs/integration.md "Server-to-server"): create →
 * use → scope refusal → revoke (refused at once, on a second instance with PostgreSQL and
 * Redis) → expiry; tenant isolation; webhooks managed and events published by a key; no key in
 * any log line.
 */

let stores: TestStores;
let t: TestApp;
/** A second instance on the same PostgreSQL and Redis (undefined on the embedded stores). */
let b: TestApp | undefined;
beforeAll(async () => {
  stores = await freshStores();
  t = await startTestApp({ stores, env: { WEBHOOK_ALLOW_PRIVATE: 'on' } });
  if (realServices.postgres && realServices.redis) b = await startTestApp({ stores });
});
afterAll(async () => {
  await b?.stop();
  await t?.stop();
  await stores?.drop();
});

const keys: string[] = [];
/** A key of the demo merchant made by ada through REST. */
async function demoKey(scopes: ApiKeyScope[], extra: Record<string, unknown> = {}) {
  const ada = await agentSession(t.url, 'ada');
  const { body } = await ada.client.json('/agent/apikey/create', {
    method: 'POST',
    json: { name: `k-${keys.length}`, scopes, ...extra },
  });
  expect(body.code).toBe(0);
  keys.push(body.data.key);
  return { key: body.data.key as string, id: body.data.api_key.id as string, ada };
}

/** A key of another merchant (acme has no admin: issued in the domain, as createBot would). */
async function acmeKey(scopes: ApiKeyScope[]) {
  const [acme] = await t.app.deps.db.select().from(merchants).where(eq(merchants.bid, 'acme'));
  const { key } = await issueApiKey(t.app.deps.db, {
    merchantId: acme?.id as string,
    name: 'acme server',
    scopes,
    actor: { kind: 'operator', id: 'cli', name: 'operator' },
    now: Date.now(),
  });
  keys.push(key);
  return key;
}

const as = (key: string) => ({ authorization: `Bearer ${key}` });
const api = (base: string, key: string, path: string, init: Parameters<HttpClient['json']>[1] = {}) =>
  new HttpClient(base).json(path, { ...init, headers: { ...as(key), ...(init.headers as object) } });

describe('A key with conversations:read', () => {
  it('reads the merchant’s conversations and messages over REST and GraphQL; other scopes are refused (1412)', async () => {
    const { key } = await demoKey(['conversations:read']);
    const list = await api(t.url, key, '/api/conversation/list');
    expect(list.body.code).toBe(0);
    expect(list.body.data.list.map((c: { visitor_id: string }) => c.visitor_id).sort()).toEqual([
      'v_demo_lily',
      'v_demo_wang',
    ]);
    const one = await api(t.url, key, '/api/conversation/get?visitor_id=v_demo_lily');
    expect(one.body.data).toMatchObject({ visitor_id: 'v_demo_lily', state: 'active' });
    const history = await api(t.url, key, '/api/message/list?visitor_id=v_demo_lily&limit=50');
    expect(history.body.code).toBe(0);
    expect(history.body.data.messages.length).toBeGreaterThan(0);
    expect(history.body.data.messages.every((m: { visitor_id: string }) => m.visitor_id === 'v_demo_lily')).toBe(true);

    const gql = await new HttpClient(t.url).graphql(
      `{ conversations { nodes { visitorId labels { id } } }
         messages(visitorId: "v_demo_lily", first: 5) { messages { seq visitorId } } }`,
      {},
      as(key),
    );
    expect(gql.body.errors).toBeUndefined();
    expect(gql.body.data.conversations.nodes).toHaveLength(2);
    expect(gql.body.data.messages.messages.length).toBeGreaterThan(0);

    // Scope refusals: REST 403 / 1412, GraphQL INSUFFICIENT_SCOPE; the message names the scope.
    const publish = await api(t.url, key, '/api/events/publish', {
      method: 'POST',
      json: { channel: 'global-demo', event: 'order.shipped', data: {} },
    });
    expect([publish.status, publish.body.code]).toEqual([403, 1412]);
    expect(publish.body.msg).toBe('This API key lacks the scope events:publish');
    const hooks = await api(t.url, key, '/agent/webhook/list');
    expect([hooks.status, hooks.body.code]).toEqual([403, 1412]);
    const gqlHooks = await new HttpClient(t.url).graphql('{ webhookEndpoints { id } }', {}, as(key));
    expect(gqlHooks.body.errors?.[0]?.extensions?.code).toBe('INSUFFICIENT_SCOPE');
    // A key has no `mine`, and is no agent for the agents' own endpoints.
    expect((await api(t.url, key, '/api/conversation/list?scope=mine')).body.code).toBe(1000);
    expect((await api(t.url, key, '/agent/chat/list')).body.code).toBe(-1);
  });

  it('tenant isolation: another merchant’s key reads only its own (a demo visitor is 1404)', async () => {
    const key = await acmeKey(['conversations:read']);
    const list = await api(t.url, key, '/api/conversation/list');
    expect(list.body).toMatchObject({ code: 0, data: { list: [] } });
    const history = await api(t.url, key, '/api/message/list?visitor_id=v_demo_lily');
    expect([history.status, history.body.code]).toEqual([404, 1404]);
    const one = await api(t.url, key, '/api/conversation/get?visitor_id=v_demo_lily');
    expect(one.body.code).toBe(1404);
    const gql = await new HttpClient(t.url).graphql(
      '{ messages(visitorId: "v_demo_lily") { messages { seq } } }',
      {},
      as(key),
    );
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });
});

describe('A key with webhooks:manage or events:publish', () => {
  it('manages the webhook endpoints (audited as the key) but reads no conversation', async () => {
    const { key, id } = await demoKey(['webhooks:manage']);
    const created = await api(t.url, key, '/agent/webhook/create', {
      method: 'POST',
      json: { url: 'http://127.0.0.1:9/hook', events: ['message.created'] },
    });
    expect(created.body.code).toBe(0);
    const endpointId = created.body.data.endpoint.id;
    expect((await api(t.url, key, '/agent/webhook/list')).body.data.map((e: { id: string }) => e.id)).toContain(
      endpointId,
    );
    const gql = await new HttpClient(t.url).graphql(
      'mutation($id: ID!) { deleteWebhookEndpoint(endpointId: $id) }',
      { id: endpointId },
      as(key),
    );
    expect(gql.body.data).toEqual({ deleteWebhookEndpoint: true });
    const audit = await t.app.deps.db
      .select()
      .from(auditLog)
      .where(and(eq(auditLog.targetType, 'webhook_endpoint'), eq(auditLog.targetId, endpointId)));
    expect(audit.map((a) => [a.action, a.actorKind, a.actorId]).sort()).toEqual([
      ['webhook_endpoint.created', 'api_key', id],
      ['webhook_endpoint.deleted', 'api_key', id],
    ]);
    expect((await api(t.url, key, '/api/conversation/list')).body.code).toBe(1412);
  });

  it('publishes on its merchant’s channels only; reserved names stay reserved', async () => {
    const { key } = await demoKey(['events:publish']);
    const ok = await api(t.url, key, '/api/events/publish', {
      method: 'POST',
      json: { channel: 'global-demo', event: 'order.shipped', data: { order_id: 'o_1' } },
    });
    expect([ok.status, ok.body.code]).toEqual([202, 0]);
    const replay = [];
    for await (const e of t.app.deps.bus.subscribe('global-demo', { since: '0-0', replayOnly: true })) replay.push(e);
    expect(replay.some((e) => e.id === ok.body.data.id && e.event === 'order.shipped')).toBe(true);
    const gql = await new HttpClient(t.url).graphql(
      'mutation { publishEvent(channel: "agent-a_alice", event: "crm.note", data: {n: 1}) }',
      {},
      as(key),
    );
    expect(gql.body.errors).toBeUndefined();
    for (const channel of ['global-acme', 'agent-a_bob', 'anything-else']) {
      const other = await api(t.url, key, '/api/events/publish', {
        method: 'POST',
        json: { channel, event: 'order.shipped', data: {} },
      });
      expect([other.status, other.body.code]).toEqual([403, 1403]);
    }
    const reserved = await api(t.url, key, '/api/events/publish', {
      method: 'POST',
      json: { channel: 'global-demo', event: 'session.ended', data: {} },
    });
    expect(reserved.body.code).toBe(1000);
  });
});

describe('Revocation, expiry, budgets, sockets and logs', () => {
  it('a revoked key is refused at once, on this instance and on another one (PostgreSQL + Redis)', async () => {
    const { key, id, ada } = await demoKey(['conversations:read']);
    expect((await api(t.url, key, '/api/conversation/list')).body.code).toBe(0);
    if (b) expect((await api(b.url, key, '/api/conversation/list')).body.code).toBe(0);
    const revoked = await ada.client.json('/agent/apikey/revoke', { method: 'POST', json: { id } });
    expect(revoked.body.data.revoked_at).toBeGreaterThan(0);
    for (const app of b ? [t, b] : [t]) {
      const refused = await api(app.url, key, '/api/conversation/list');
      expect([refused.status, refused.body.code, refused.body.msg]).toEqual([401, 1411, 'This API key was revoked']);
      const gql = await new HttpClient(app.url).graphql('{ conversations { nodes { visitorId } } }', {}, as(key));
      expect(gql.body.errors?.[0]).toMatchObject({
        message: 'This API key was revoked',
        extensions: { code: 'UNAUTHENTICATED' },
      });
    }
  });

  it('an expired key is refused (1411); a visitor token is no key (1411)', async () => {
    const { key } = await demoKey(['conversations:read'], { expires_at: Date.now() + 60_000 });
    expect((await api(t.url, key, '/api/conversation/list')).body.code).toBe(0);
    const late = await withClockAhead(t, 61_000, () => api(t.url, key, '/api/conversation/list'));
    expect([late.body.code, late.body.msg]).toEqual([1411, 'This API key expired']);
    const visitor = await new HttpClient(t.url).json('/visitor/token', {
      method: 'POST',
      json: { appkey: 'demo-appkey' },
    });
    const asVisitor = await api(t.url, visitor.body.data.token, '/api/conversation/list');
    expect([asVisitor.status, asVisitor.body.code]).toEqual([401, 1411]);
  });

  it('a key over API_KEY_REQUESTS_PER_MINUTE is rate-limited (1429, Retry-After)', async () => {
    const { key } = await demoKey(['conversations:read']);
    const saved = t.app.deps.config.apiKeyRequestsPerMinute;
    t.app.deps.config.apiKeyRequestsPerMinute = 2;
    try {
      for (let i = 0; i < 2; i++) expect((await api(t.url, key, '/api/conversation/list')).body.code).toBe(0);
      const limited = await api(t.url, key, '/api/conversation/list');
      expect([limited.status, limited.body.code]).toEqual([429, 1429]);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      t.app.deps.config.apiKeyRequestsPerMinute = saved;
    }
  });

  it('a socket presenting a key is closed with 4403 (keys are HTTP only)', async () => {
    const { key } = await demoKey(['conversations:read']);
    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', authorization: `Bearer ${key}` });
    expect(await socket.closed).toEqual({ code: 4403, reason: API_KEYS_OVER_HTTP_ONLY });
  });

  it('no key reaches a log line, even one sent in a query string', async () => {
    const { key } = await demoKey(['conversations:read']);
    await new HttpClient(t.url).json(`/api/conversation/list?key=${key}`, { headers: as(key) });
    await new HttpClient(t.url).json(`/api/conversation/list?x=${key}`);
    const raw = t.rawLogs() + (b?.rawLogs() ?? '');
    // The access log has the requests, their query strings redacted.
    expect(raw).toContain('/api/conversation/list?key=[redacted]');
    for (const k of keys) expect(raw).not.toContain(k.slice(5));
  });
});
