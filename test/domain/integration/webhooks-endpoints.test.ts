import dns from 'node:dns';
import { syncBuiltinESMExports } from 'node:module';
import { and, eq, inArray } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import type { WebhooksConfig } from '../../../src/config.js';
import { auditLog, webhookDeliveries, webhookEndpoints } from '../../../src/db/schema.js';
import type { Deps } from '../../../src/deps.js';
import type { ApiKeyViewer } from '../../../src/resolvers/integration/api-keys/authenticate.js';
import type { MerchantManager } from '../../../src/resolvers/integration/api-keys/manager.js';
import { checkedAddresses, isPrivateAddress } from '../../../src/resolvers/integration/webhooks/addresses.js';
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  listWebhookEndpoints,
  MAX_ENDPOINTS,
  rotateWebhookSecret,
  setWebhookEndpointDisabled,
} from '../../../src/resolvers/integration/webhooks/endpoints.js';
import { deliveryRow } from '../../../src/resolvers/integration/webhooks/events.js';
import {
  listWebhookDeliveries,
  redeliverFailedWebhooks,
  redeliverWebhook,
  testWebhookEndpoint,
} from '../../../src/resolvers/integration/webhooks/log.js';
import {
  type Factories,
  meanwhileBeforeNextTransaction,
  refusalOf,
  type TestDeps,
  type TestMerchant,
  useTestDeps,
} from '../../support/deps.js';

/**
 * A merchant's webhook endpoints and their delivery log, value by value (docs/integration.md
 * "Webhooks", "Delivery log"): which URLs are accepted and each refusal's message, the limit, what
 * each change answers, writes and audits, who may make it, and what the log lists and requeues.
 * The clock is the deps' own, so every time answered is known exactly.
 */

let shared: TestDeps;
let f: Factories;
useTestDeps((made) => {
  ({ deps: shared, f } = made);
});

const BASE = Date.parse('2001-02-03T04:05:06.789Z');
let clock = BASE;

/** The shared deps on the test's clock, with these webhook settings (the shared config is left alone). */
function depsWith(webhooks: Partial<WebhooksConfig> = {}, env?: 'production'): Deps {
  const config = {
    ...shared.config,
    ...(env ? { env } : {}),
    webhooks: { ...shared.config.webhooks, allowPrivate: false, ...webhooks },
  };
  return { ...shared, config, now: () => clock };
}

/** A public address: accepted without DNS and without WEBHOOK_ALLOW_PRIVATE. */
const PUBLIC_URL = 'https://93.184.216.34/hooks';

const merchantsMade: string[] = [];

afterEach(async () => {
  clock = BASE;
  // Pending pings of 2001 would be due for any dispatcher or claim of a later file.
  const made = merchantsMade.splice(0);
  if (made.length === 0) return;
  await shared.db.delete(webhookDeliveries).where(inArray(webhookDeliveries.merchantId, made));
  await shared.db.delete(webhookEndpoints).where(inArray(webhookEndpoints.merchantId, made));
});

async function merchant() {
  const m = await f.merchant();
  merchantsMade.push(m.merchantId);
  return m;
}

async function admin() {
  const m = await merchant();
  return { m, admin: await f.agent(m, { level: 'admin' }) };
}

/** An API key of `m` as the domain sees an authenticated one. */
const apiKey = (m: TestMerchant, scopes: ApiKeyViewer['scopes']): ApiKeyViewer => ({
  kind: 'apiKey',
  keyId: `key_${m.merchantId}`,
  merchantId: m.merchantId,
  name: 'deploy bot',
  scopes,
  clientAddress: '203.0.113.9',
});

const auditOf = async (merchantId: string) =>
  (await shared.db.select().from(auditLog).where(eq(auditLog.merchantId, merchantId)).orderBy(auditLog.id)).map(
    (a) => ({
      actor: [a.actorKind, a.actorId, a.actorName, a.clientAddress],
      action: a.action,
      target: [a.targetType, a.targetId],
      before: a.before,
      after: a.after,
    }),
  );

/**
 * Runs `work` while node:dns answers `hosts` from this table (other names as usual): names that
 * resolve to public, or to public and private, addresses without a network. The ESM view of
 * node:dns follows the module object once synced.
 */
async function withDns<T>(hosts: Record<string, string[]>, work: () => Promise<T>): Promise<T> {
  const real = dns.lookup;
  const fake = (host: string, options: unknown, callback: (...args: unknown[]) => void) => {
    const list = hosts[host];
    if (!list) return (real as (...args: unknown[]) => void)(host, options, callback);
    callback(
      null,
      list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    );
  };
  (dns as { lookup: unknown }).lookup = fake;
  syncBuiltinESMExports();
  try {
    return await work();
  } finally {
    (dns as { lookup: unknown }).lookup = real;
    syncBuiltinESMExports();
  }
}

describe('Where webhooks may go', () => {
  it('each refused URL says why', async () => {
    const { admin: a } = await admin();
    const refusal = (url: string, deps = depsWith()) =>
      refusalOf(createWebhookEndpoint(deps, a, { url, events: ['message.created'] }));
    expect(await refusal('ftp://93.184.216.34/')).toBe('BAD_USER_INPUT: url: must start with https:// or http://');
    expect(await refusal('http://93.184.216.34/', depsWith({}, 'production'))).toBe(
      'BAD_USER_INPUT: url: must start with https://',
    );
    expect(await refusal('https://hook@93.184.216.34/')).toBe('BAD_USER_INPUT: url: must not carry credentials');
    expect(await refusal('https://:secret@93.184.216.34/')).toBe('BAD_USER_INPUT: url: must not carry credentials');
    for (const url of ['http://127.0.0.1:9/', 'https://[fd00::1]/', 'https://localhost/'])
      expect(await refusal(url), url).toBe('BAD_USER_INPUT: url: private and loopback addresses are not allowed');
    expect(await refusal('https://nowhere.invalid/', depsWith({ allowPrivate: true }))).toBe(
      'BAD_USER_INPUT: url: the host name does not resolve',
    );
    expect(await listWebhookEndpoints(depsWith(), a)).toEqual([]);
  });

  it('a public address is accepted, in production over https, its fragment dropped; a private one when allowed', async () => {
    const { admin: a } = await admin();
    const urlOf = async (url: string, deps: Deps) =>
      (await createWebhookEndpoint(deps, a, { url, events: ['message.created'] })).endpoint.url;
    expect(await urlOf('https://93.184.216.34/hooks?x=1#part', depsWith({}, 'production'))).toBe(
      'https://93.184.216.34/hooks?x=1',
    );
    expect(await urlOf('http://[2606:4700::1111]:8080/in', depsWith())).toBe('http://[2606:4700::1111]:8080/in');
    expect(await urlOf('http://127.0.0.1:9/x', depsWith({ allowPrivate: true }))).toBe('http://127.0.0.1:9/x');
  });

  it('a name is refused when any of its addresses is private', async () => {
    const { admin: a } = await admin();
    const hosts = { 'public.example': ['93.184.216.34'], 'mixed.example': ['93.184.216.34', '10.0.0.7'] };
    await withDns(hosts, async () => {
      expect(await checkedAddresses('public.example', false)).toEqual([{ address: '93.184.216.34', family: 4 }]);
      expect(
        (await createWebhookEndpoint(depsWith(), a, { url: 'https://public.example/h', events: ['message.created'] }))
          .endpoint.url,
      ).toBe('https://public.example/h');
      expect(
        await refusalOf(
          createWebhookEndpoint(depsWith(), a, { url: 'https://mixed.example/h', events: ['message.created'] }),
        ),
      ).toBe('BAD_USER_INPUT: url: private and loopback addresses are not allowed');
      expect(await checkedAddresses('mixed.example', true)).toHaveLength(2);
    });
  });

  it('isPrivateAddress: what is not an address, and the edges of the blocked ranges', () => {
    const verdicts = (list: string[]) => Object.fromEntries(list.map((a) => [a, isPrivateAddress(a)]));
    expect(verdicts(['example.com', '', '100.64.0.1', '100.128.0.1', '172.31.255.255', '172.32.0.1'])).toEqual({
      'example.com': true,
      '': true,
      '100.64.0.1': true,
      '100.128.0.1': false,
      '172.31.255.255': true,
      '172.32.0.1': false,
    });
    expect(verdicts(['::ffff:10.0.0.1', '::FFFF:8.8.4.4', '::', 'ff02::1', '64:ff9b::808:808', '2001:db8::1'])).toEqual(
      {
        '::ffff:10.0.0.1': true,
        '::FFFF:8.8.4.4': false,
        '::': true,
        'ff02::1': true,
        '64:ff9b::808:808': true,
        '2001:db8::1': false,
      },
    );
  });
});

describe('Endpoints', () => {
  it('creating answers the endpoint and its secret once, stores it, and audits it without the secret', async () => {
    const { m, admin: a } = await admin();
    const created = await createWebhookEndpoint(depsWith(), a, {
      url: `  ${PUBLIC_URL}  `,
      events: ['conversation.closed', 'message.created', 'conversation.closed'],
      description: '  CRM sync  ',
    });
    const id = created.endpoint.id;
    expect(id).toMatch(/^whep_/);
    expect(created.endpoint).toEqual({
      id,
      url: PUBLIC_URL,
      description: 'CRM sync',
      events: ['conversation.closed', 'message.created'],
      disabled: false,
      consecutiveFailures: 0,
      circuitOpenUntil: null,
      previousSecretUntil: null,
      createdAt: BASE,
    });
    const [row] = await shared.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, id));
    expect(row).toMatchObject({ merchantId: m.merchantId, secret: created.secret, previousSecret: null });
    expect(await auditOf(m.merchantId)).toEqual([
      {
        actor: ['agent', a.agentId, a.agent.nickname, null],
        action: 'webhook_endpoint.created',
        target: ['webhook_endpoint', id],
        before: null,
        after: {
          url: PUBLIC_URL,
          events: ['conversation.closed', 'message.created'],
          description: 'CRM sync',
          disabled: false,
        },
      },
    ]);
    // Without a description, an empty one.
    const plain = await createWebhookEndpoint(depsWith(), a, { url: PUBLIC_URL, events: ['message.created'] });
    expect(plain.endpoint.description).toBe('');
  });

  it('a merchant has at most 20: the 20th is made, the 21st refused; another merchant’s do not count', async () => {
    expect(MAX_ENDPOINTS).toBe(20);
    const { m, admin: a } = await admin();
    const other = await admin();
    const input = { url: PUBLIC_URL, events: ['message.created'] };
    await createWebhookEndpoint(depsWith(), other.admin, input);
    await shared.db.insert(webhookEndpoints).values(
      Array.from({ length: 19 }, (_, i) => ({
        id: `whep_${m.merchantId}_${i}`,
        merchantId: m.merchantId,
        url: PUBLIC_URL,
        events: ['message.created'],
        secret: 'whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB',
      })),
    );
    await createWebhookEndpoint(depsWith(), a, input);
    expect(await refusalOf(createWebhookEndpoint(depsWith(), a, input))).toBe(
      'BAD_USER_INPUT: A merchant has at most 20 webhook endpoints',
    );
    expect(await listWebhookEndpoints(depsWith(), a)).toHaveLength(20);
  });

  it('listing: oldest first, then by id', async () => {
    const { admin: a } = await admin();
    const input = { url: PUBLIC_URL, events: ['message.created'] };
    clock = BASE + 2;
    const late = await createWebhookEndpoint(depsWith(), a, input);
    clock = BASE + 1;
    const early = await createWebhookEndpoint(depsWith(), a, input);
    const alsoEarly = await createWebhookEndpoint(depsWith(), a, input);
    clock = BASE;
    const byId = [early, alsoEarly].map((c) => c.endpoint.id).sort();
    expect((await listWebhookEndpoints(depsWith(), a)).map((e) => e.id)).toEqual([...byId, late.endpoint.id]);
  });

  it('disabling keeps the circuit as it is; enabling closes it; each audited (enabling with the circuit it closed); another merchant’s is not found', async () => {
    const { m, admin: a } = await admin();
    const { endpoint } = await createWebhookEndpoint(depsWith(), a, { url: PUBLIC_URL, events: ['message.created'] });
    const openUntil = new Date(BASE + 60_000);
    await shared.db
      .update(webhookEndpoints)
      .set({ consecutiveFailures: 6, circuitOpenUntil: openUntil })
      .where(eq(webhookEndpoints.id, endpoint.id));
    const disabled = await setWebhookEndpointDisabled(depsWith(), a, { endpointId: endpoint.id, disabled: true });
    expect(disabled).toEqual({ ...endpoint, disabled: true, consecutiveFailures: 6, circuitOpenUntil: BASE + 60_000 });
    const enabled = await setWebhookEndpointDisabled(depsWith(), a, { endpointId: endpoint.id, disabled: false });
    expect(enabled).toEqual({ ...endpoint, disabled: false, consecutiveFailures: 0, circuitOpenUntil: null });
    expect((await auditOf(m.merchantId)).slice(1)).toEqual([
      {
        actor: ['agent', a.agentId, a.agent.nickname, null],
        action: 'webhook_endpoint.disabled',
        target: ['webhook_endpoint', endpoint.id],
        before: { disabled: false },
        after: { disabled: true },
      },
      {
        actor: ['agent', a.agentId, a.agent.nickname, null],
        action: 'webhook_endpoint.enabled',
        target: ['webhook_endpoint', endpoint.id],
        before: { disabled: true, consecutiveFailures: 6, circuitOpenUntil: BASE + 60_000 },
        after: { disabled: false, consecutiveFailures: 0, circuitOpenUntil: null },
      },
    ]);
    const other = await admin();
    expect(
      await refusalOf(setWebhookEndpointDisabled(depsWith(), other.admin, { endpointId: endpoint.id, disabled: true })),
    ).toBe('NOT_FOUND: No such webhook endpoint');
    expect((await listWebhookEndpoints(depsWith(), a))[0]?.disabled).toBe(false);
  });

  it('asking for what already holds writes and audits nothing; enabling an enabled endpoint with an open circuit closes it', async () => {
    const { m, admin: a } = await admin();
    const { endpoint } = await createWebhookEndpoint(depsWith(), a, { url: PUBLIC_URL, events: ['message.created'] });
    const set = (disabled: boolean) => setWebhookEndpointDisabled(depsWith(), a, { endpointId: endpoint.id, disabled });
    expect(await set(false)).toEqual(endpoint);
    await set(true);
    expect(await set(true)).toEqual({ ...endpoint, disabled: true });
    await set(false);
    await shared.db
      .update(webhookEndpoints)
      .set({ consecutiveFailures: 3, circuitOpenUntil: null })
      .where(eq(webhookEndpoints.id, endpoint.id));
    expect(await set(false)).toEqual(endpoint);
    const actions = (await auditOf(m.merchantId)).slice(1).map((row) => [row.action, row.before, row.after]);
    expect(actions).toEqual([
      ['webhook_endpoint.disabled', { disabled: false }, { disabled: true }],
      ['webhook_endpoint.enabled', { disabled: true }, { disabled: false }],
      [
        'webhook_endpoint.enabled',
        { disabled: false, consecutiveFailures: 3, circuitOpenUntil: null },
        { disabled: false, consecutiveFailures: 0, circuitOpenUntil: null },
      ],
    ]);
  });

  it('deleting takes the endpoint and its log, not another’s, and audits what it was', async () => {
    const { m, admin: a } = await admin();
    const input = { url: PUBLIC_URL, events: ['message.created'], description: 'old' };
    const gone = (await createWebhookEndpoint(depsWith(), a, input)).endpoint;
    const kept = (await createWebhookEndpoint(depsWith(), a, input)).endpoint;
    await testWebhookEndpoint(depsWith(), a, { endpointId: gone.id });
    const ping = await testWebhookEndpoint(depsWith(), a, { endpointId: kept.id });
    const other = await admin();
    expect(await refusalOf(deleteWebhookEndpoint(depsWith(), other.admin, { endpointId: gone.id }))).toBe(
      'NOT_FOUND: No such webhook endpoint',
    );
    expect(await deleteWebhookEndpoint(depsWith(), a, { endpointId: gone.id })).toBe(true);
    expect((await listWebhookEndpoints(depsWith(), a)).map((e) => e.id)).toEqual([kept.id]);
    const left = await shared.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.merchantId, m.merchantId));
    expect(left.map((d) => d.id)).toEqual([ping.id]);
    expect((await auditOf(m.merchantId)).at(-1)).toEqual({
      actor: ['agent', a.agentId, a.agent.nickname, null],
      action: 'webhook_endpoint.deleted',
      target: ['webhook_endpoint', gone.id],
      before: { url: PUBLIC_URL, events: ['message.created'], description: 'old', disabled: false },
      after: null,
    });
    expect(await refusalOf(deleteWebhookEndpoint(depsWith(), a, { endpointId: gone.id }))).toBe(
      'NOT_FOUND: No such webhook endpoint',
    );
  });

  it('rotating: a new secret, the previous one signing for the overlap, audited by when it stops', async () => {
    const { m, admin: a } = await admin();
    const created = await createWebhookEndpoint(depsWith(), a, { url: PUBLIC_URL, events: ['message.created'] });
    clock = BASE + 1000;
    const rotated = await rotateWebhookSecret(depsWith({ secretOverlapSeconds: 90 }), a, {
      endpointId: created.endpoint.id,
    });
    expect(rotated.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(rotated.secret).not.toBe(created.secret);
    expect(rotated.endpoint).toEqual({ ...created.endpoint, previousSecretUntil: BASE + 91_000 });
    const [row] = await shared.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, created.endpoint.id));
    expect(row).toMatchObject({ secret: rotated.secret, previousSecret: created.secret });
    expect((await auditOf(m.merchantId)).at(-1)).toEqual({
      actor: ['agent', a.agentId, a.agent.nickname, null],
      action: 'webhook_endpoint.secret_rotated',
      target: ['webhook_endpoint', created.endpoint.id],
      before: null,
      after: { previous_secret_until: new Date(BASE + 91_000).toISOString() },
    });
    const other = await admin();
    expect(await refusalOf(rotateWebhookSecret(depsWith(), other.admin, { endpointId: created.endpoint.id }))).toBe(
      'NOT_FOUND: No such webhook endpoint',
    );
  });

  it('a rotation that lost the race to another is refused, and the other’s secret stays', async () => {
    const { admin: a } = await admin();
    const { endpoint } = await createWebhookEndpoint(depsWith(), a, { url: PUBLIC_URL, events: ['message.created'] });
    let winner = '';
    const racing = meanwhileBeforeNextTransaction(depsWith(), async () => {
      winner = (await rotateWebhookSecret(depsWith(), a, { endpointId: endpoint.id })).secret;
    });
    expect(await refusalOf(rotateWebhookSecret(racing, a, { endpointId: endpoint.id }))).toBe(
      'BAD_USER_INPUT: The secret was rotated concurrently: retry',
    );
    const [row] = await shared.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, endpoint.id));
    expect(row?.secret).toBe(winner);
  });
});

describe('Who manages webhooks', () => {
  it('an API key with webhooks:manage does all an admin does, audited as the key', async () => {
    const m = await merchant();
    const key = apiKey(m, ['webhooks:manage']);
    const { endpoint } = await createWebhookEndpoint(depsWith(), key, { url: PUBLIC_URL, events: ['message.created'] });
    const id = endpoint.id;
    expect(await listWebhookEndpoints(depsWith(), key)).toEqual([endpoint]);
    const ping = await testWebhookEndpoint(depsWith(), key, { endpointId: id });
    expect((await listWebhookDeliveries(depsWith(), key, { endpointId: id })).map((d) => d.id)).toEqual([ping.id]);
    await shared.db.update(webhookDeliveries).set({ state: 'failed' }).where(eq(webhookDeliveries.id, ping.id));
    expect((await redeliverWebhook(depsWith(), key, { deliveryId: ping.id })).state).toBe('pending');
    expect(await redeliverFailedWebhooks(depsWith(), key, { endpointId: id, since: 0, until: BASE + 1 })).toBe(0);
    expect((await setWebhookEndpointDisabled(depsWith(), key, { endpointId: id, disabled: true })).disabled).toBe(true);
    expect((await rotateWebhookSecret(depsWith(), key, { endpointId: id })).endpoint.id).toBe(id);
    expect(await deleteWebhookEndpoint(depsWith(), key, { endpointId: id })).toBe(true);
    const audit = await auditOf(m.merchantId);
    expect(audit.map((x) => x.action)).toEqual([
      'webhook_endpoint.created',
      'webhook_endpoint.disabled',
      'webhook_endpoint.secret_rotated',
      'webhook_endpoint.deleted',
    ]);
    for (const x of audit) expect(x.actor).toEqual(['api_key', key.keyId, 'deploy bot', '203.0.113.9']);
  });

  it('a key without the scope, and an agent who is not an admin, are refused everything', async () => {
    const { m, admin: a } = await admin();
    const { endpoint } = await createWebhookEndpoint(depsWith(), a, { url: PUBLIC_URL, events: ['message.created'] });
    const ping = await testWebhookEndpoint(depsWith(), a, { endpointId: endpoint.id });
    const endpointId = endpoint.id;
    const calls = (v: MerchantManager) => [
      createWebhookEndpoint(depsWith(), v, { url: PUBLIC_URL, events: ['message.created'] }),
      listWebhookEndpoints(depsWith(), v),
      setWebhookEndpointDisabled(depsWith(), v, { endpointId, disabled: true }),
      rotateWebhookSecret(depsWith(), v, { endpointId }),
      deleteWebhookEndpoint(depsWith(), v, { endpointId }),
      listWebhookDeliveries(depsWith(), v, { endpointId }),
      redeliverWebhook(depsWith(), v, { deliveryId: ping.id }),
      redeliverFailedWebhooks(depsWith(), v, { endpointId, since: 0, until: 1 }),
      testWebhookEndpoint(depsWith(), v, { endpointId }),
    ];
    const refusals = async (v: MerchantManager) => Promise.all(calls(v).map((call) => refusalOf(call)));
    expect(new Set(await refusals(apiKey(m, ['conversations:read', 'events:publish'])))).toEqual(
      new Set(['INSUFFICIENT_SCOPE: This API key lacks the scope webhooks:manage']),
    );
    const agentRefusals = await refusals(await f.agent(m));
    expect(agentRefusals.every((r) => r.startsWith('FORBIDDEN: '))).toBe(true);
    expect(await listWebhookEndpoints(depsWith(), a)).toEqual([endpoint]);
  });
});

describe('The delivery log', () => {
  /** An endpoint of a new merchant with `n` deliveries, created a millisecond apart from BASE. */
  async function endpointWithLog(n: number) {
    const { m, admin: a } = await admin();
    const { endpoint } = await createWebhookEndpoint(depsWith(), a, { url: PUBLIC_URL, events: ['message.created'] });
    const rows = Array.from({ length: n }, (_, i) =>
      deliveryRow(endpoint.id, m.merchantId, 'message.created', `c${i}`, `{"n":${i}}`, BASE + i),
    );
    const made = n > 0 ? await shared.db.insert(webhookDeliveries).values(rows).returning() : [];
    return { m, admin: a, endpoint, made };
  }
  const setRow = (id: string, fields: Partial<typeof webhookDeliveries.$inferInsert>) =>
    shared.db.update(webhookDeliveries).set(fields).where(eq(webhookDeliveries.id, id));

  it('lists the newest first, 20 unless asked, each as its row says', async () => {
    const { admin: a, endpoint, made } = await endpointWithLog(21);
    const newest = made.map((d) => d.id).reverse();
    expect((await listWebhookDeliveries(depsWith(), a, { endpointId: endpoint.id })).map((d) => d.id)).toEqual(
      newest.slice(0, 20),
    );
    const last = made[20];
    if (!last) throw new Error('no row');
    await setRow(last.id, {
      state: 'failed',
      attempts: 3,
      lastStatus: 500,
      lastError: 'HTTP 500',
      lastLatencyMs: 12,
      lastAttemptAt: new Date(BASE + 500),
      finishedAt: new Date(BASE + 500),
    });
    const [failed, pending] = await listWebhookDeliveries(depsWith(), a, { endpointId: endpoint.id, first: 2 });
    expect(failed).toEqual({
      id: last.id,
      endpointId: endpoint.id,
      event: 'message.created',
      state: 'failed',
      attempts: 3,
      lastStatus: 500,
      lastError: 'HTTP 500',
      lastLatencyMs: 12,
      lastAttemptAt: BASE + 500,
      nextAttemptAt: null,
      createdAt: BASE + 20,
      body: '{"n":20}',
    });
    expect(pending).toMatchObject({
      id: made[19]?.id,
      state: 'pending',
      lastAttemptAt: null,
      nextAttemptAt: BASE + 19,
    });
    const other = await admin();
    expect(await refusalOf(listWebhookDeliveries(depsWith(), other.admin, { endpointId: endpoint.id }))).toBe(
      'NOT_FOUND: No such webhook endpoint',
    );
  });

  it('redelivering requeues a finished delivery from scratch; a pending one, or another merchant’s, is refused', async () => {
    const { admin: a, made } = await endpointWithLog(2);
    const [done, waiting] = made;
    if (!done || !waiting) throw new Error('no rows');
    await setRow(done.id, {
      state: 'delivered',
      attempts: 4,
      leasedUntil: new Date(BASE + 9),
      lastStatus: 200,
      finishedAt: new Date(BASE + 9),
    });
    clock = BASE + 5000;
    expect(await redeliverWebhook(depsWith(), a, { deliveryId: done.id })).toMatchObject({
      id: done.id,
      state: 'pending',
      attempts: 0,
      lastStatus: 200,
      nextAttemptAt: BASE + 5000,
    });
    const [row] = await shared.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, done.id));
    expect(row).toMatchObject({ leasedUntil: null, finishedAt: null, nextAttemptAt: new Date(BASE + 5000) });
    expect(await refusalOf(redeliverWebhook(depsWith(), a, { deliveryId: waiting.id }))).toBe(
      'BAD_USER_INPUT: This delivery is still pending',
    );
    expect(await refusalOf(redeliverWebhook(depsWith(), a, { deliveryId: 'msg_nothing' }))).toBe(
      'NOT_FOUND: No such webhook delivery',
    );
    await setRow(waiting.id, { state: 'failed' });
    const other = await admin();
    expect(await refusalOf(redeliverWebhook(depsWith(), other.admin, { deliveryId: waiting.id }))).toBe(
      'NOT_FOUND: No such webhook delivery',
    );
  });

  it('redelivering a range requeues the failed ones created from `since` up to, not at, `until`', async () => {
    const { admin: a, endpoint, made } = await endpointWithLog(5);
    const ids = made.map((d) => d.id);
    for (const id of ids) await setRow(id, { state: 'failed', finishedAt: new Date(BASE) });
    await setRow(ids[2] ?? '', { state: 'delivered' });
    const statesOf = async () =>
      (
        await shared.db
          .select({ id: webhookDeliveries.id, state: webhookDeliveries.state })
          .from(webhookDeliveries)
          .where(eq(webhookDeliveries.endpointId, endpoint.id))
          .orderBy(webhookDeliveries.seq)
      ).map((d) => d.state);
    const range = { endpointId: endpoint.id, since: BASE + 1, until: BASE + 4 };
    expect(await redeliverFailedWebhooks(depsWith(), a, range)).toBe(2);
    expect(await statesOf()).toEqual(['failed', 'pending', 'delivered', 'pending', 'failed']);
    expect(await redeliverFailedWebhooks(depsWith(), a, range)).toBe(0);
    expect(await refusalOf(redeliverFailedWebhooks(depsWith(), a, { ...range, until: range.since }))).toBe(
      'BAD_USER_INPUT: until since must be before until',
    );
    const other = await admin();
    expect(await refusalOf(redeliverFailedWebhooks(depsWith(), other.admin, range))).toBe(
      'NOT_FOUND: No such webhook endpoint',
    );
  });

  it('a test ping is queued to the endpoint alone, in its own order, even while it is disabled', async () => {
    const { m, admin: a, endpoint } = await endpointWithLog(0);
    await setWebhookEndpointDisabled(depsWith(), a, { endpointId: endpoint.id, disabled: true });
    const ping = await testWebhookEndpoint(depsWith(), a, { endpointId: endpoint.id });
    const body = `{"type":"webhook.test","version":1,"timestamp":"2001-02-03T04:05:06.789Z","data":{"endpoint_id":"${endpoint.id}"}}`;
    expect(ping).toEqual({
      id: expect.stringMatching(/^msg_/),
      endpointId: endpoint.id,
      event: 'webhook.test',
      state: 'pending',
      attempts: 0,
      lastStatus: null,
      lastError: null,
      lastLatencyMs: null,
      lastAttemptAt: null,
      nextAttemptAt: BASE,
      createdAt: BASE,
      body,
    });
    const [row] = await shared.db
      .select()
      .from(webhookDeliveries)
      .where(and(eq(webhookDeliveries.id, ping.id), eq(webhookDeliveries.merchantId, m.merchantId)));
    expect(row?.orderKey).toBe(`test:${endpoint.id}`);
    const other = await admin();
    expect(await refusalOf(testWebhookEndpoint(depsWith(), other.admin, { endpointId: endpoint.id }))).toBe(
      'NOT_FOUND: No such webhook endpoint',
    );
  });
});
