import { and, asc, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { apiKeys, auditLog } from '../../../src/db/schema.js';
import type { Deps } from '../../../src/deps.js';
import { SYSTEM_ACTOR } from '../../../src/resolvers/desk/audit.js';
import { authenticateApiKey } from '../../../src/resolvers/integration/api-keys/authenticate.js';
import {
  createApiKey,
  hashApiKey,
  issueApiKey,
  listApiKeys,
  MAX_API_KEYS,
  revokeApiKey,
} from '../../../src/resolvers/integration/api-keys/keys.js';
import { auditedManager, requireManager } from '../../../src/resolvers/integration/api-keys/manager.js';
import { publishMerchantEvent } from '../../../src/resolvers/integration/api-keys/publish.js';
import type { RateLimiterFactory } from '../../../src/stores/rate-limits.js';
import { type Factories, refusalOf, type TestDeps, useTestDeps } from '../../support/deps.js';

/**
 * API keys at their edges, by value: the views and audit rows whole, each refusal's code and
 * message, the expiry and `last_used_at` bounds at the exact millisecond (on a fixed clock), the
 * key's request budget, and the manager checks the webhook management shares.
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => {
  ({ deps, f } = made);
});

/** The run's deps on a clock standing at `at`. */
const at = (now: number): Deps => ({ ...deps, now: () => now });

async function adminOfNewMerchant() {
  const m = await f.merchant();
  const admin = await f.agent(m, { level: 'admin', nickname: 'Ada' });
  return { m, admin };
}

const keyRow = async (id: string) => (await deps.db.select().from(apiKeys).where(eq(apiKeys.id, id)))[0];

/** The key's audit rows, oldest first, as the log keeps them. */
const auditOf = (merchantId: string, keyId: string) =>
  deps.db
    .select({
      actorKind: auditLog.actorKind,
      actorId: auditLog.actorId,
      actorName: auditLog.actorName,
      action: auditLog.action,
      targetType: auditLog.targetType,
      targetId: auditLog.targetId,
      before: auditLog.before,
      after: auditLog.after,
      clientAddress: auditLog.clientAddress,
    })
    .from(auditLog)
    .where(and(eq(auditLog.merchantId, merchantId), eq(auditLog.targetId, keyId)))
    .orderBy(asc(auditLog.id));

describe('A key’s view, rows and audit, by value', () => {
  it('creation answers the whole view; the row keeps the SHA-256 hex of the key; the audit row names the admin and address', async () => {
    const { m, admin } = await adminOfNewMerchant();
    const t = Date.now();
    const expiresAt = t + 3_600_000;
    const { apiKey, key } = await createApiKey(
      at(t),
      { ...admin, clientAddress: '198.51.100.7' },
      { name: 'CRM', scopes: ['webhooks:manage', 'conversations:read'], expiresAt },
    );
    expect(apiKey).toEqual({
      id: expect.stringMatching(/^key_[0-9a-f]+$/),
      name: 'CRM',
      scopes: ['webhooks:manage', 'conversations:read'],
      displayPrefix: key.slice(0, 11),
      createdBy: admin.agentId,
      createdAt: t,
      lastUsedAt: null,
      expiresAt,
      revokedAt: null,
    });
    expect(apiKey.displayPrefix).toMatch(/^prly_.{6}$/);
    const row = await keyRow(apiKey.id);
    expect(row?.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(row?.expiresAt?.getTime()).toBe(expiresAt);
    expect(await auditOf(m.merchantId, apiKey.id)).toEqual([
      {
        actorKind: 'agent',
        actorId: admin.agentId,
        actorName: 'Ada',
        action: 'api_key.created',
        targetType: 'api_key',
        targetId: apiKey.id,
        before: null,
        after: {
          name: 'CRM',
          scopes: ['webhooks:manage', 'conversations:read'],
          display_prefix: apiKey.displayPrefix,
          expires_at: new Date(expiresAt).toISOString(),
          revoked_at: null,
        },
        clientAddress: '198.51.100.7',
      },
    ]);
  });

  it('hashApiKey is the SHA-256 of the whole key, in hex', () => {
    expect(hashApiKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('issueApiKey without a creator, expiry or address stores nulls, and the audit row names the given actor', async () => {
    const { m } = await adminOfNewMerchant();
    const t = Date.now();
    const { apiKey } = await issueApiKey(deps.db, {
      merchantId: m.merchantId,
      name: 'system key',
      scopes: ['events:publish'],
      actor: SYSTEM_ACTOR,
      now: t,
    });
    expect(apiKey).toMatchObject({ createdBy: null, createdAt: t, expiresAt: null, lastUsedAt: null, revokedAt: null });
    expect(await auditOf(m.merchantId, apiKey.id)).toEqual([
      expect.objectContaining({
        actorKind: 'system',
        actorId: 'parley',
        actorName: 'Parley',
        action: 'api_key.created',
        clientAddress: null,
      }),
    ]);
  });

  it('the list shows last use, expiry and revocation as unix ms, newest key first', async () => {
    const { admin } = await adminOfNewMerchant();
    const t = Date.now();
    const first = await createApiKey(at(t), admin, { name: 'first', scopes: ['events:publish'], expiresAt: t + 5000 });
    const second = await createApiKey(at(t + 1), admin, { name: 'second', scopes: ['events:publish'] });
    await authenticateApiKey(at(t + 1000), first.key);
    await revokeApiKey(at(t + 2000), admin, { id: second.apiKey.id });
    expect(await listApiKeys(deps, admin)).toEqual([
      { ...second.apiKey, revokedAt: t + 2000 },
      { ...first.apiKey, lastUsedAt: t + 1000, expiresAt: t + 5000 },
    ]);
  });

  it('revoking answers the revoked view and audits before → after; revoking again changes nothing and audits nothing', async () => {
    const { m, admin } = await adminOfNewMerchant();
    const t = Date.now();
    const { apiKey } = await createApiKey(at(t), admin, { name: 'k', scopes: ['conversations:read'] });
    const revoked = await revokeApiKey(at(t + 2000), { ...admin, clientAddress: '203.0.113.4' }, { id: apiKey.id });
    expect(revoked).toEqual({ ...apiKey, revokedAt: t + 2000 });
    // Later, on another clock: the first revocation stands.
    expect(await revokeApiKey(at(t + 9000), admin, { id: apiKey.id })).toEqual(revoked);
    expect((await keyRow(apiKey.id))?.revokedAt?.getTime()).toBe(t + 2000);
    const recorded = {
      name: 'k',
      scopes: ['conversations:read'],
      display_prefix: apiKey.displayPrefix,
      expires_at: null,
    };
    expect((await auditOf(m.merchantId, apiKey.id)).slice(1)).toEqual([
      {
        actorKind: 'agent',
        actorId: admin.agentId,
        actorName: 'Ada',
        action: 'api_key.revoked',
        targetType: 'api_key',
        targetId: apiKey.id,
        before: { ...recorded, revoked_at: null },
        after: { ...recorded, revoked_at: new Date(t + 2000).toISOString() },
        clientAddress: '203.0.113.4',
      },
    ]);
  });
});

describe('Refusals of the key management, code and message', () => {
  it('an expiry must lie after now: now itself is refused, one millisecond later is kept', async () => {
    const { admin } = await adminOfNewMerchant();
    const t = Date.now();
    expect(await refusalOf(createApiKey(at(t), admin, { name: 'k', scopes: ['events:publish'], expiresAt: t }))).toBe(
      'BAD_USER_INPUT: expiresAt must be in the future',
    );
    const { apiKey } = await createApiKey(at(t), admin, { name: 'k', scopes: ['events:publish'], expiresAt: t + 1 });
    expect(apiKey.expiresAt).toBe(t + 1);
  });

  it(`one live key past ${MAX_API_KEYS} is LIMIT_REACHED with its message`, async () => {
    const { m, admin } = await adminOfNewMerchant();
    // The budget counts rows: written in one statement, they cost a fiftieth of fifty issues.
    await deps.db.insert(apiKeys).values(
      Array.from({ length: MAX_API_KEYS }, (_, i) => ({
        id: `key_${m.merchantId}_${i}`,
        merchantId: m.merchantId,
        name: `k${i}`,
        scopes: ['events:publish'],
        hash: hashApiKey(`${m.merchantId}-${i}`),
        displayPrefix: 'prly_xxxxxx',
      })),
    );
    expect(await refusalOf(createApiKey(deps, admin, { name: 'one more', scopes: ['events:publish'] }))).toBe(
      `LIMIT_REACHED: A merchant has at most ${MAX_API_KEYS} API keys: revoke one first`,
    );
  });

  it('revoking an unknown key, or another merchant’s, is NOT_FOUND with its message', async () => {
    const a = await adminOfNewMerchant();
    const b = await adminOfNewMerchant();
    const { apiKey } = await createApiKey(deps, a.admin, { name: 'k', scopes: ['events:publish'] });
    expect(await refusalOf(revokeApiKey(deps, b.admin, { id: apiKey.id }))).toBe('NOT_FOUND: No such API key');
    expect(await refusalOf(revokeApiKey(deps, a.admin, { id: 'key_nope' }))).toBe('NOT_FOUND: No such API key');
    expect((await keyRow(apiKey.id))?.revokedAt).toBeNull();
  });
});

describe('Authenticating at the bounds', () => {
  it('answers the client address it is given', async () => {
    const { m, admin } = await adminOfNewMerchant();
    const { apiKey, key } = await createApiKey(deps, admin, { name: 'srv', scopes: ['events:publish'] });
    expect(await authenticateApiKey(deps, key, '203.0.113.9')).toEqual({
      kind: 'apiKey',
      keyId: apiKey.id,
      merchantId: m.merchantId,
      name: 'srv',
      scopes: ['events:publish'],
      clientAddress: '203.0.113.9',
    });
  });

  it('an empty bearer is a missing key', async () => {
    expect(await refusalOf(authenticateApiKey(deps, ''))).toBe(
      'API_KEY_INVALID: API key missing: send Authorization: Bearer prly_…',
    );
  });

  it('a key is valid until the millisecond before its expiry, and expired at it', async () => {
    const { admin } = await adminOfNewMerchant();
    const t = Date.now();
    const expiresAt = t + 60_000;
    const { key } = await createApiKey(at(t), admin, { name: 'k', scopes: ['events:publish'], expiresAt });
    expect((await authenticateApiKey(at(expiresAt - 1), key)).name).toBe('k');
    expect(await refusalOf(authenticateApiKey(at(expiresAt), key))).toBe('API_KEY_INVALID: This API key expired');
  });

  it('last_used_at is written again exactly 60 s after the last write, not 1 ms sooner', async () => {
    const { admin } = await adminOfNewMerchant();
    const t = Date.now();
    const { apiKey, key } = await createApiKey(at(t), admin, { name: 'k', scopes: ['events:publish'] });
    const lastUsed = async () => (await keyRow(apiKey.id))?.lastUsedAt?.getTime();
    await authenticateApiKey(at(t), key);
    expect(await lastUsed()).toBe(t);
    await authenticateApiKey(at(t + 59_999), key);
    expect(await lastUsed()).toBe(t);
    await authenticateApiKey(at(t + 60_000), key);
    expect(await lastUsed()).toBe(t + 60_000);
  });

  it('counts one request per call on the key’s own limiter, and words the refusal with the wait', async () => {
    const { admin } = await adminOfNewMerchant();
    const { apiKey, key } = await createApiKey(deps, admin, { name: 'k', scopes: ['events:publish'] });
    const asked: { limit: unknown; subject: string }[] = [];
    const recording = ((limit) => {
      const limiter = deps.rateLimiter(limit);
      return {
        ...limiter,
        consume: (subject: string, message: (wait: number) => string, points?: number) => {
          asked.push({ limit, subject });
          return limiter.consume(subject, message, points);
        },
      };
    }) as RateLimiterFactory;
    const saved = deps.config.apiKeyRequestsPerMinute;
    deps.config.apiKeyRequestsPerMinute = 2;
    try {
      const counted = { ...deps, rateLimiter: recording };
      await authenticateApiKey(counted, key);
      await authenticateApiKey(counted, key);
      expect(await refusalOf(authenticateApiKey(counted, key))).toMatch(
        /^RATE_LIMITED: Too many requests with this API key: retry in \d+ s$/,
      );
    } finally {
      deps.config.apiKeyRequestsPerMinute = saved;
    }
    expect(asked).toEqual(
      Array.from({ length: 3 }, () => ({
        limit: { name: 'api_key', points: 2, durationSeconds: 60 },
        subject: apiKey.id,
      })),
    );
  });
});

describe('Managers: an admin agent, or a key with the scope', () => {
  it('requireManager answers the viewer it lets through, and refuses a plain agent or a key without the scope', async () => {
    const { m, admin } = await adminOfNewMerchant();
    const agent = await f.agent(m);
    const { key } = await createApiKey(deps, admin, { name: 'hooks', scopes: ['webhooks:manage'] });
    const { key: readerKey } = await createApiKey(deps, admin, { name: 'reader', scopes: ['conversations:read'] });
    const manager = await authenticateApiKey(deps, key);
    const reader = await authenticateApiKey(deps, readerKey);
    expect(requireManager(admin, 'webhooks:manage')).toBe(admin);
    expect(requireManager(manager, 'webhooks:manage')).toBe(manager);
    expect(await refusalOf(() => requireManager(reader, 'webhooks:manage'))).toBe(
      'INSUFFICIENT_SCOPE: This API key lacks the scope webhooks:manage',
    );
    expect(await refusalOf(() => requireManager(agent, 'webhooks:manage'))).toMatch(/^FORBIDDEN: /);
  });

  it('auditedManager names the agent, or the key (`api_key`, its id and name) with its address or null', async () => {
    const { m, admin } = await adminOfNewMerchant();
    const { apiKey, key } = await createApiKey(deps, admin, { name: 'hooks', scopes: ['webhooks:manage'] });
    expect(auditedManager({ ...admin, clientAddress: '192.0.2.1' })).toEqual({
      merchantId: m.merchantId,
      actor: { kind: 'agent', id: admin.agentId, name: 'Ada' },
      clientAddress: '192.0.2.1',
    });
    const keyActor = { kind: 'api_key', id: apiKey.id, name: 'hooks' };
    expect(auditedManager(await authenticateApiKey(deps, key, '192.0.2.2'))).toEqual({
      merchantId: m.merchantId,
      actor: keyActor,
      clientAddress: '192.0.2.2',
    });
    const { clientAddress: _, ...withoutAddress } = await authenticateApiKey(deps, key);
    expect(auditedManager(withoutAddress)).toEqual({ merchantId: m.merchantId, actor: keyActor, clientAddress: null });
  });
});

describe('Publishing through a key', () => {
  it('a channel not the merchant’s is FORBIDDEN with its message, another merchant’s visitor channel too', async () => {
    const a = await adminOfNewMerchant();
    const b = await adminOfNewMerchant();
    const strangerVisitor = await f.visitor(b.m);
    const { key } = await createApiKey(deps, a.admin, { name: 'p', scopes: ['events:publish'] });
    const publisher = await authenticateApiKey(deps, key);
    for (const channel of [strangerVisitor.channel, `agent-${a.m.bid}`, `global-${a.m.bid}x`])
      expect(await refusalOf(publishMerchantEvent(deps, publisher, { channel, event: 'crm.updated', data: 1 }))).toBe(
        'FORBIDDEN: channel is not one of this merchant’s channels',
      );
  });
});
