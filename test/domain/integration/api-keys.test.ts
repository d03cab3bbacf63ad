import { and, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { apiKeys, auditLog } from '../../../src/db/schema.js';
import { DomainError } from '../../../src/errors.js';
import { listConversations, loadConversation } from '../../../src/resolvers/conversations/queries.js';
import {
  API_KEY_LAST_USED_WRITE_SECONDS,
  authenticateApiKey,
} from '../../../src/resolvers/integration/api-keys/authenticate.js';
import {
  createApiKey,
  hashApiKey,
  issueApiKey,
  listApiKeys,
  MAX_API_KEYS,
  revokeApiKey,
} from '../../../src/resolvers/integration/api-keys/keys.js';
import { publishMerchantEvent } from '../../../src/resolvers/integration/api-keys/publish.js';
import { requireScope } from '../../../src/resolvers/integration/api-keys/scopes.js';
import { listMessages } from '../../../src/resolvers/messages/history.js';
import { sendMessage } from '../../../src/resolvers/messages/send.js';
import { requireVisitor } from '../../../src/resolvers/viewer.js';
import { issueVisitorToken } from '../../../src/resolvers/visitor.js';
import { codeOf, type Factories, secondInstance, type TestDeps, useTestDeps } from '../../support/deps.js';

/**
 * API keys (docs/integration.md "API keys"): created by an admin and shown once, stored hashed,
 * scoped, refused once revoked or expired — at once, on every instance — and never a visitor token.
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => {
  ({ deps, f } = made);
});

async function adminOfNewMerchant() {
  const m = await f.merchant();
  return { m, admin: await f.agent(m, { level: 'admin' }) };
}

const messageOf = async (work: Promise<unknown>) => {
  try {
    await work;
  } catch (error) {
    if (error instanceof DomainError) return `${error.code}: ${error.message}`;
    throw error;
  }
  return 'no error';
};

describe('Creating, listing and revoking', () => {
  it('an admin creates a key: answered once with the prly_ prefix, hashed at rest, audited without the key', async () => {
    const { m, admin } = await adminOfNewMerchant();
    const { apiKey, key } = await createApiKey(deps, admin, {
      name: 'CRM',
      scopes: ['conversations:read', 'conversations:read', 'webhooks:manage'],
    });
    expect(key).toMatch(/^prly_[A-Za-z0-9_-]{43}$/);
    expect(apiKey).toMatchObject({
      name: 'CRM',
      scopes: ['conversations:read', 'webhooks:manage'],
      createdBy: admin.agentId,
      lastUsedAt: null,
      expiresAt: null,
      revokedAt: null,
    });
    expect(key.startsWith(apiKey.displayPrefix)).toBe(true);
    expect(apiKey.displayPrefix.length).toBeLessThan(16);

    const [row] = await deps.db.select().from(apiKeys).where(eq(apiKeys.id, apiKey.id));
    expect(row?.hash).toBe(hashApiKey(key));
    expect(JSON.stringify(row)).not.toContain(key.slice(5));

    const listed = await listApiKeys(deps, admin);
    expect(listed.map((k) => k.id)).toEqual([apiKey.id]);
    expect(JSON.stringify(listed)).not.toContain(key.slice(5));

    const audit = await deps.db.select().from(auditLog).where(eq(auditLog.merchantId, m.merchantId));
    expect(audit.map((a) => [a.action, a.targetId, a.actorId])).toEqual([
      ['api_key.created', apiKey.id, admin.agentId],
    ]);
    expect(JSON.stringify(audit)).not.toContain(key.slice(5));
    expect(JSON.stringify(audit)).not.toContain(hashApiKey(key));
  });

  it('only admins manage keys; an unknown scope, an empty list or a past expiry is a clear BAD_USER_INPUT', async () => {
    const { m, admin } = await adminOfNewMerchant();
    const agent = await f.agent(m);
    expect(await codeOf(createApiKey(deps, agent, { name: 'x', scopes: ['conversations:read'] }))).toBe('FORBIDDEN');
    expect(await codeOf(listApiKeys(deps, agent))).toBe('FORBIDDEN');
    expect(await messageOf(createApiKey(deps, admin, { name: 'x', scopes: ['conversations:write'] }))).toMatch(
      /^BAD_USER_INPUT: scopes\.0 unknown scope "conversations:write": must be one of conversations:read, messages:write, webhooks:manage, events:publish$/,
    );
    expect(await messageOf(createApiKey(deps, admin, { name: 'x', scopes: [] }))).toMatch(/^BAD_USER_INPUT: scopes/);
    expect(await messageOf(createApiKey(deps, admin, { name: ' ', scopes: ['events:publish'] }))).toMatch(
      /^BAD_USER_INPUT: name/,
    );
    expect(
      await messageOf(createApiKey(deps, admin, { name: 'x', scopes: ['events:publish'], expiresAt: deps.now() - 1 })),
    ).toMatch(/^BAD_USER_INPUT: expiresAt must be in the future/);
  });

  it('a revoked key is refused at once; revoking again answers it unchanged; another merchant’s key is NOT_FOUND', async () => {
    const a = await adminOfNewMerchant();
    const b = await adminOfNewMerchant();
    const { apiKey, key } = await createApiKey(deps, a.admin, { name: 'k', scopes: ['conversations:read'] });
    expect((await authenticateApiKey(deps, key)).keyId).toBe(apiKey.id);
    expect(await codeOf(revokeApiKey(deps, b.admin, { id: apiKey.id }))).toBe('NOT_FOUND');
    const revoked = await revokeApiKey(deps, a.admin, { id: apiKey.id });
    expect(revoked.revokedAt).toBeGreaterThan(0);
    expect(await messageOf(authenticateApiKey(deps, key))).toBe('API_KEY_INVALID: This API key was revoked');
    expect((await revokeApiKey(deps, a.admin, { id: apiKey.id })).revokedAt).toBe(revoked.revokedAt);
    const actions = await deps.db
      .select({ action: auditLog.action })
      .from(auditLog)
      .where(and(eq(auditLog.merchantId, a.m.merchantId), eq(auditLog.targetId, apiKey.id)));
    expect(actions.map((x) => x.action).sort()).toEqual(['api_key.created', 'api_key.revoked']);
  });

  it(`a merchant holds at most ${MAX_API_KEYS} live keys (LIMIT_REACHED); revoking one frees a place`, async () => {
    const { m, admin } = await adminOfNewMerchant();
    await deps.db.transaction(async (tx) => {
      for (let i = 0; i < MAX_API_KEYS; i++)
        await issueApiKey(tx, {
          merchantId: m.merchantId,
          name: `k${i}`,
          scopes: ['events:publish'],
          actor: { kind: 'system', id: 'parley', name: 'Parley' },
          now: deps.now(),
        });
    });
    expect(await codeOf(createApiKey(deps, admin, { name: 'one more', scopes: ['events:publish'] }))).toBe(
      'LIMIT_REACHED',
    );
    const [first] = await listApiKeys(deps, admin);
    await revokeApiKey(deps, admin, { id: first?.id as string });
    expect((await createApiKey(deps, admin, { name: 'one more', scopes: ['events:publish'] })).key).toMatch(/^prly_/);
  });
});

describe('Authenticating a key', () => {
  it('answers the key’s identity; scopes are checked by requireScope (INSUFFICIENT_SCOPE)', async () => {
    const { m, admin } = await adminOfNewMerchant();
    const { apiKey, key } = await createApiKey(deps, admin, { name: 'reader', scopes: ['conversations:read'] });
    const viewer = await authenticateApiKey(deps, key);
    expect(viewer).toEqual({
      kind: 'apiKey',
      keyId: apiKey.id,
      merchantId: m.merchantId,
      name: 'reader',
      scopes: ['conversations:read'],
      clientAddress: null,
    });
    expect(requireScope(viewer, 'conversations:read')).toBe(viewer);
    expect(() => requireScope(viewer, 'events:publish')).toThrow('This API key lacks the scope events:publish');
  });

  it('no key, a visitor token, an unknown key, an expired key: API_KEY_INVALID; a key is never a visitor token', async () => {
    const { m, admin } = await adminOfNewMerchant();
    expect(await messageOf(authenticateApiKey(deps, undefined))).toMatch(/^API_KEY_INVALID: API key missing/);
    const visitor = await issueVisitorToken(deps, { appkey: m.appkey, nickname: 'v' }, `test-${m.bid}`);
    expect(await messageOf(authenticateApiKey(deps, visitor.token))).toMatch(
      /^API_KEY_INVALID: Not an API key \(prly_…\): a visitor token is not accepted here/,
    );
    expect(await messageOf(authenticateApiKey(deps, `prly_${'A'.repeat(43)}`))).toBe(
      'API_KEY_INVALID: Unknown API key',
    );
    const { key } = await createApiKey(deps, admin, {
      name: 'short-lived',
      scopes: ['events:publish'],
      expiresAt: deps.now() + 60_000,
    });
    expect((await authenticateApiKey(deps, key)).name).toBe('short-lived');
    await deps.db
      .update(apiKeys)
      .set({ expiresAt: new Date(deps.now() - 1) })
      .where(eq(apiKeys.hash, hashApiKey(key)));
    expect(await messageOf(authenticateApiKey(deps, key))).toBe('API_KEY_INVALID: This API key expired');
    expect(await messageOf(requireVisitor(deps, key))).toMatch(
      /^VISITOR_UNAUTHENTICATED: An API key \(prly_…\) is not a visitor token/,
    );
  });

  it(`writes last_used_at at most once per ${API_KEY_LAST_USED_WRITE_SECONDS} s`, async () => {
    const { admin } = await adminOfNewMerchant();
    const { apiKey, key } = await createApiKey(deps, admin, { name: 'k', scopes: ['events:publish'] });
    const lastUsed = async () =>
      (await deps.db.select().from(apiKeys).where(eq(apiKeys.id, apiKey.id)))[0]?.lastUsedAt?.getTime() ?? null;
    await authenticateApiKey(deps, key);
    const first = await lastUsed();
    expect(first).not.toBeNull();
    // Within the minute: not written again.
    await deps.db
      .update(apiKeys)
      .set({ lastUsedAt: new Date(deps.now() - 1000) })
      .where(eq(apiKeys.id, apiKey.id));
    const kept = await lastUsed();
    await authenticateApiKey(deps, key);
    expect(await lastUsed()).toBe(kept);
    // After it: written.
    const old = deps.now() - (API_KEY_LAST_USED_WRITE_SECONDS + 1) * 1000;
    await deps.db
      .update(apiKeys)
      .set({ lastUsedAt: new Date(old) })
      .where(eq(apiKeys.id, apiKey.id));
    await authenticateApiKey(deps, key);
    expect(await lastUsed()).toBeGreaterThan(old + 1000);
  });

  it('counts each request against the key’s budget (RATE_LIMITED beyond API_KEY_REQUESTS_PER_MINUTE)', async () => {
    const { admin } = await adminOfNewMerchant();
    const { key } = await createApiKey(deps, admin, { name: 'k', scopes: ['events:publish'] });
    const { key: other } = await createApiKey(deps, admin, { name: 'other', scopes: ['events:publish'] });
    const saved = deps.config.apiKeyRequestsPerMinute;
    deps.config.apiKeyRequestsPerMinute = 3;
    try {
      for (let i = 0; i < 3; i++) await authenticateApiKey(deps, key);
      expect(await codeOf(authenticateApiKey(deps, key))).toBe('RATE_LIMITED');
      // Another key of the same merchant has its own budget.
      expect((await authenticateApiKey(deps, other)).name).toBe('other');
    } finally {
      deps.config.apiKeyRequestsPerMinute = saved;
    }
  });

  it('a key revoked on one instance is refused at once on another (PostgreSQL)', async () => {
    const other = await secondInstance();
    if (!other) return; // the embedded database is one process's
    try {
      const { admin } = await adminOfNewMerchant();
      const { apiKey, key } = await createApiKey(deps, admin, { name: 'k', scopes: ['conversations:read'] });
      expect((await authenticateApiKey(other, key)).keyId).toBe(apiKey.id);
      await revokeApiKey(deps, admin, { id: apiKey.id });
      expect(await codeOf(authenticateApiKey(other, key))).toBe('API_KEY_INVALID');
    } finally {
      await other.close();
    }
  });
});

describe('What a key reads and publishes (the domain functions the adapters share)', () => {
  it('conversations:read lists its merchant’s conversations and a visitor’s messages, never another merchant’s', async () => {
    const a = await adminOfNewMerchant();
    const b = await adminOfNewMerchant();
    const agent = await f.agent(a.m);
    await f.online(agent);
    const c = await f.conversation(a.m);
    await sendMessage(deps, c.visitor, { clientMsgId: 'm1', content: 'hello' });
    const { key } = await createApiKey(deps, a.admin, { name: 'reader', scopes: ['conversations:read'] });
    const reader = await authenticateApiKey(deps, key);
    const page = await listConversations(deps, reader);
    expect(page.nodes.map((n) => n.visitorId)).toEqual([c.visitor.visitorId]);
    expect((await listConversations(deps, reader, { scope: 'queue' })).nodes).toEqual([]);
    expect(await codeOf(listConversations(deps, reader, { scope: 'mine' }))).toBe('BAD_USER_INPUT');
    const history = await listMessages(deps, reader, { visitorId: c.visitor.visitorId });
    expect(history.messages.map((m) => m.content)).toContain('hello');
    expect((await loadConversation(deps, reader, { visitorId: c.visitor.visitorId }))?.conversationId).toBe(
      c.conversationId,
    );
    expect(await codeOf(listMessages(deps, reader, {}))).toBe('BAD_USER_INPUT');

    const { key: otherKey } = await createApiKey(deps, b.admin, { name: 'other', scopes: ['conversations:read'] });
    const other = await authenticateApiKey(deps, otherKey);
    expect((await listConversations(deps, other)).nodes).toEqual([]);
    expect(await codeOf(listMessages(deps, other, { visitorId: c.visitor.visitorId }))).toBe('NOT_FOUND');
    expect(await codeOf(loadConversation(deps, other, { visitorId: c.visitor.visitorId }))).toBe('NOT_FOUND');

    const { key: publisherKey } = await createApiKey(deps, a.admin, { name: 'p', scopes: ['events:publish'] });
    const publisher = await authenticateApiKey(deps, publisherKey);
    expect(await codeOf(listConversations(deps, publisher))).toBe('INSUFFICIENT_SCOPE');
    expect(await codeOf(listMessages(deps, publisher, { visitorId: c.visitor.visitorId }))).toBe('INSUFFICIENT_SCOPE');
  });

  it('events:publish reaches the merchant’s global, agent and visitor channels only', async () => {
    const a = await adminOfNewMerchant();
    const b = await adminOfNewMerchant();
    const visitor = await f.visitor(a.m);
    const { key } = await createApiKey(deps, a.admin, { name: 'p', scopes: ['events:publish'] });
    const publisher = await authenticateApiKey(deps, key);
    for (const channel of [`global-${a.m.bid}`, `agent-${a.admin.agentId}`, visitor.channel])
      expect((await publishMerchantEvent(deps, publisher, { channel, event: 'crm.updated', data: 1 })).id).toMatch(
        /^\d+-\d+$/,
      );
    for (const channel of [`global-${b.m.bid}`, `agent-${b.admin.agentId}`, 'visitor-nope'])
      expect(await codeOf(publishMerchantEvent(deps, publisher, { channel, event: 'crm.updated', data: 1 }))).toBe(
        'FORBIDDEN',
      );
    expect(
      await codeOf(
        publishMerchantEvent(deps, publisher, { channel: `global-${a.m.bid}`, event: 'message.created', data: 1 }),
      ),
    ).toBe('BAD_USER_INPUT');
    const { key: readerKey } = await createApiKey(deps, a.admin, { name: 'r', scopes: ['conversations:read'] });
    expect(
      await codeOf(
        publishMerchantEvent(deps, await authenticateApiKey(deps, readerKey), {
          channel: `global-${a.m.bid}`,
          event: 'crm.updated',
          data: 1,
        }),
      ),
    ).toBe('INSUFFICIENT_SCOPE');
  });
});
