import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKeys } from '../../src/db/schema.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * API keys through the gateway (docs/integration.md "API keys"): the admin operations over
 * GraphQL and /agent/apikey/*, the one-identity rules of a request carrying a key, and no key in
 * any log line.
 */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.stop();
});

const CREATE = `mutation($name: String!, $scopes: [String!]!, $expiresAt: Float) {
  createApiKey(name: $name, scopes: $scopes, expiresAt: $expiresAt) { apiKey { id name scopes displayPrefix revokedAt } key }
}`;

describe('API keys — GraphQL and /agent/apikey/*', () => {
  it('ada creates a key (shown once), lists it by REST, revokes it by GraphQL; hashed at rest; never logged', async () => {
    const ada = await agentSession(t.url, 'ada');
    const created = await ada.client.graphql(CREATE, { name: 'CRM', scopes: ['conversations:read'] });
    expect(created.body.errors).toBeUndefined();
    const { apiKey, key } = created.body.data.createApiKey;
    expect(key).toMatch(/^prly_/);
    expect(apiKey).toMatchObject({ name: 'CRM', scopes: ['conversations:read'], revokedAt: null });

    const listed = await ada.client.json('/agent/apikey/list');
    expect(listed.body).toMatchObject({
      code: 0,
      data: [{ id: apiKey.id, name: 'CRM', display_prefix: apiKey.displayPrefix, revoked_at: null }],
    });
    expect(JSON.stringify(listed.body)).not.toContain(key.slice(5));

    const rest = await ada.client.json('/agent/apikey/create', {
      method: 'POST',
      form: { name: 'Bot', scopes: 'messages:write,events:publish' },
    });
    expect(rest.body).toMatchObject({ code: 0, data: { api_key: { scopes: ['messages:write', 'events:publish'] } } });

    const revoked = await ada.client.graphql('mutation($id: ID!) { revokeApiKey(id: $id) { id revokedAt } }', {
      id: apiKey.id,
    });
    expect(revoked.body.data.revokeApiKey.revokedAt).toBeGreaterThan(0);

    const [row] = await t.app.deps.db.select().from(apiKeys).where(eq(apiKeys.id, apiKey.id));
    expect(JSON.stringify(row)).not.toContain(key.slice(5));
    for (const k of [key, rest.body.data.key]) expect(t.rawLogs()).not.toContain(k.slice(5));
  });

  it('an agent who is not an admin is refused (1403 / FORBIDDEN); an unknown scope is named (1000)', async () => {
    const alice = await agentSession(t.url, 'alice');
    const list = await alice.client.json('/agent/apikey/list');
    expect([list.status, list.body.code]).toEqual([403, 1403]);
    const gql = await alice.client.graphql(CREATE, { name: 'x', scopes: ['events:publish'] });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const ada = await agentSession(t.url, 'ada');
    const bad = await ada.client.json('/agent/apikey/create', {
      method: 'POST',
      json: { name: 'x', scopes: ['everything'] },
    });
    expect(bad.body.code).toBe(1000);
    expect(bad.body.msg).toContain('unknown scope "everything"');
  });
});

describe('A request carrying a key', () => {
  it('is that key only: beside an agent Session (token header, token query or cookie) it is refused', async () => {
    const ada = await agentSession(t.url, 'ada');
    const { key } = (await ada.client.graphql(CREATE, { name: 'k', scopes: ['conversations:read'] })).body.data
      .createApiKey;
    const bearer = { authorization: `Bearer ${key}` };
    // With the token header, on REST and GraphQL.
    const rest = await new HttpClient(t.url).json('/agent/apikey/list', { headers: { ...bearer, token: ada.token } });
    expect([rest.status, rest.body.code]).toEqual([400, 1000]);
    expect(rest.body.msg).toContain('an API key');
    const gql = await new HttpClient(t.url).graphql('{ apiKeys { id } }', {}, { ...bearer, token: ada.token });
    expect(gql.status).toBe(400);
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    // With the Session cookie only (ada's client keeps it).
    const cookie = await ada.client.graphql('{ apiKeys { id } }', {}, bearer);
    expect(cookie.status).toBe(400);
    expect(cookie.body.errors?.[0]?.message).toContain('never both');
    // Alone, a key is no agent: the admin field answers UNAUTHENTICATED.
    const alone = await new HttpClient(t.url).graphql('{ apiKeys { id } }', {}, bearer);
    expect(alone.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it('is never a visitor token: the visitor endpoints refuse it (1401)', async () => {
    const ada = await agentSession(t.url, 'ada');
    const { key } = (await ada.client.graphql(CREATE, { name: 'k', scopes: ['conversations:read'] })).body.data
      .createApiKey;
    const res = await new HttpClient(t.url).json('/visitor/data/get', { headers: { authorization: `Bearer ${key}` } });
    expect([res.status, res.body.code]).toEqual([401, 1401]);
    expect(res.body.msg).toContain('not a visitor token');
    // A visitor token still works as one.
    const visitor = await visitorToken(t.url);
    const ok = await new HttpClient(t.url).json('/visitor/data/get', {
      headers: { authorization: `Bearer ${visitor.token}` },
    });
    expect(ok.body.code).toBe(0);
  });
});
