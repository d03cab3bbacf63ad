import { eq } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { WebhooksConfig } from '../../../src/config.js';
import { webhookDeliveries, webhookEndpoints } from '../../../src/db/schema.js';
import { closeConversation } from '../../../src/resolvers/conversations/closing.js';
import { rateConversation } from '../../../src/resolvers/conversations/rating.js';
import { isPrivateAddress } from '../../../src/resolvers/integration/webhooks/addresses.js';
import {
  claimDeliveries,
  classifyStatus,
  retryAfter,
  retryDelayMs,
} from '../../../src/resolvers/integration/webhooks/delivery.js';
import {
  createWebhookDispatcher,
  type WebhookDispatcher,
} from '../../../src/resolvers/integration/webhooks/dispatcher.js';
import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  listWebhookEndpoints,
  rotateWebhookSecret,
  setWebhookEndpointDisabled,
} from '../../../src/resolvers/integration/webhooks/endpoints.js';
import {
  listWebhookDeliveries,
  redeliverFailedWebhooks,
  redeliverWebhook,
  testWebhookEndpoint,
} from '../../../src/resolvers/integration/webhooks/log.js';
import { signWebhook } from '../../../src/resolvers/integration/webhooks/signing.js';
import { sendMessage } from '../../../src/resolvers/messages/send.js';
import { codeOf, eventually, factories, secondInstance, type TestDeps, testDeps } from '../../support/deps.js';
import { webhookReceiver } from '../../support/webhook-receiver.js';

/**
 * Webhooks (docs/integration.md): signed per Standard Webhooks, delivered from the outbox at
 * least once, in order per conversation and endpoint, retried on a schedule, never to a private
 * address unless allowed, and a slow receiver holds only its own endpoint.
 */

let deps: TestDeps;
let f: ReturnType<typeof factories>;
let saved: WebhooksConfig;
let dispatcher: WebhookDispatcher;
const receivers: Awaited<ReturnType<typeof webhookReceiver>>[] = [];

beforeAll(async () => {
  deps = await testDeps();
  f = factories(deps);
  saved = deps.config.webhooks;
  deps.config.webhooks = {
    ...saved,
    allowPrivate: true,
    retrySchedule: [0.05, 0.1, 0.1, 0.2, 0.2, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3],
    timeoutMs: 2000,
  };
  dispatcher = createWebhookDispatcher(deps, { pollMs: 25 });
  dispatcher.start();
});
afterAll(async () => {
  await dispatcher.stop();
  await Promise.all(receivers.map((r) => r.down()));
  deps.config.webhooks = saved;
  await f.cleanup();
});

async function receiver() {
  const r = await webhookReceiver();
  receivers.push(r);
  return r;
}

/** A merchant with an admin, an online agent, and an endpoint on `r` for `events`. */
async function merchantWithEndpoint(r: Awaited<ReturnType<typeof receiver>>, events = ['message.created']) {
  const m = await f.merchant();
  const admin = await f.agent(m, { level: 'admin' });
  const agent = await f.agent(m);
  await f.online(agent);
  const created = await createWebhookEndpoint(deps, admin, { url: r.url, events });
  r.useSecrets([created.secret]);
  return { m, admin, agent, endpoint: created.endpoint, secret: created.secret };
}

describe('Signatures (Standard Webhooks)', () => {
  it('the standardwebhooks package verifies our signature, and refuses it under another secret or body', () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const ts = Math.floor(Date.now() / 1000);
    const body = '{"type":"webhook.test","data":{}}';
    const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(ts), 'webhook-signature': '' };
    headers['webhook-signature'] = signWebhook([secret], 'msg_1', ts, body);
    expect(new Webhook(secret).verify(body, headers)).toEqual({ type: 'webhook.test', data: {} });
    expect(() => new Webhook('whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB').verify(body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(`${body} `, headers)).toThrow();
  });

  it('during a rotation both secrets sign, so either verifies', () => {
    const [a, b] = ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB'];
    const ts = Math.floor(Date.now() / 1000);
    const headers = { 'webhook-id': 'msg_2', 'webhook-timestamp': String(ts), 'webhook-signature': '' };
    headers['webhook-signature'] = signWebhook([b, a], 'msg_2', ts, '{}');
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(new Webhook(a).verify('{}', headers)).toEqual({});
    expect(new Webhook(b).verify('{}', headers)).toEqual({});
  });
});

describe('Retry rules', () => {
  it('2xx delivers; 4xx other than 408/409/425/429 is final; 5xx, those four and no answer are retried', () => {
    expect([200, 204].map(classifyStatus)).toEqual(['delivered', 'delivered']);
    expect([400, 401, 404, 410, 422].map(classifyStatus)).toEqual(Array(5).fill('final'));
    expect([408, 409, 425, 429, 500, 503, null].map(classifyStatus)).toEqual(Array(7).fill('retry'));
  });

  it('the schedule gives the n-th wait with ±10 % jitter, and none past its end; the default covers 24 h', () => {
    expect(retryDelayMs([5, 30], 1, () => 0)).toBe(4500);
    expect(retryDelayMs([5, 30], 2, () => 0.999999)).toBe(33000);
    expect(retryDelayMs([5, 30], 3)).toBeNull();
    const total = saved.retrySchedule.reduce((sum, s) => sum + s, 0);
    expect(total * 0.9).toBeGreaterThanOrEqual(24 * 3600);
  });

  it('Retry-After is read as seconds or as an HTTP date, capped at a day', () => {
    const now = Date.parse('2026-11-26T12:00:00Z');
    expect(retryAfter('7', now)).toBe(7000);
    expect(retryAfter('Thu, 26 Nov 2026 12:01:00 GMT', now)).toBe(60_000);
    expect(retryAfter('999999', now)).toBe(86_400_000);
    expect(retryAfter(undefined, now)).toBeNull();
    expect(retryAfter('soon', now)).toBeNull();
  });
});

describe('Endpoints', () => {
  it('only admins manage them; the secret is answered once, in the whsec_ form, and listing never shows it', async () => {
    const r = await receiver();
    const { m, admin, endpoint, secret } = await merchantWithEndpoint(r, ['message.created', 'conversation.closed']);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(endpoint).toMatchObject({ url: r.url, events: ['message.created', 'conversation.closed'], disabled: false });
    const listed = await listWebhookEndpoints(deps, admin);
    expect(listed).toEqual([endpoint]);
    expect(JSON.stringify(listed)).not.toContain(secret.slice(6));
    const agent = await f.agent(m);
    expect(await codeOf(listWebhookEndpoints(deps, agent))).toBe('FORBIDDEN');
    expect(await codeOf(createWebhookEndpoint(deps, agent, { url: r.url, events: ['message.created'] }))).toBe(
      'FORBIDDEN',
    );
    // Another merchant's admin sees none of it.
    const other = await f.agent(await f.merchant(), { level: 'admin' });
    expect(await listWebhookEndpoints(deps, other)).toEqual([]);
    expect(await codeOf(deleteWebhookEndpoint(deps, other, { endpointId: endpoint.id }))).toBe('NOT_FOUND');
  });

  it('private and loopback addresses are refused unless WEBHOOK_ALLOW_PRIVATE; production wants https', async () => {
    const admin = await f.agent(await f.merchant(), { level: 'admin' });
    const events = ['message.created'];
    deps.config.webhooks.allowPrivate = false;
    try {
      for (const url of ['http://127.0.0.1:9/x', 'http://localhost:9/x', 'http://10.1.2.3/x', 'http://[::1]/x'])
        expect(await codeOf(createWebhookEndpoint(deps, admin, { url, events })), url).toBe('BAD_USER_INPUT');
    } finally {
      deps.config.webhooks.allowPrivate = true;
    }
    const env = deps.config.env;
    deps.config.env = 'production';
    try {
      expect(await codeOf(createWebhookEndpoint(deps, admin, { url: 'http://127.0.0.1:9/x', events }))).toBe(
        'BAD_USER_INPUT',
      );
    } finally {
      deps.config.env = env;
    }
    expect(await codeOf(createWebhookEndpoint(deps, admin, { url: 'https://u:p@example.com/', events }))).toBe(
      'BAD_USER_INPUT',
    );
    expect(await codeOf(createWebhookEndpoint(deps, admin, { url: 'https://example.com/', events: ['typing'] }))).toBe(
      'BAD_USER_INPUT',
    );
  });

  it('isPrivateAddress: loopback, RFC 1918, link-local, ULA and mapped IPv4 are private; public ones are not', () => {
    for (const a of [
      '127.0.0.1',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254',
      '::1',
      'fd00::1',
      'fe80::1',
      '::ffff:127.0.0.1',
      '0.0.0.0',
    ])
      expect(isPrivateAddress(a), a).toBe(true);
    for (const a of ['93.184.216.34', '8.8.8.8', '2606:4700::1111', '::ffff:8.8.8.8'])
      expect(isPrivateAddress(a), a).toBe(false);
  });
});

describe('Delivery', () => {
  it('receiver down then up: every event delivered, verified, in order per conversation, duplicates only under one webhook-id', async () => {
    const r = await receiver();
    const { m, agent } = await merchantWithEndpoint(r);
    await r.down();
    const visitors = await Promise.all([f.conversation(m), f.conversation(m), f.conversation(m)]);
    for (let i = 0; i < 5; i++)
      await Promise.all(
        visitors.map((c) =>
          i % 2 === 0
            ? sendMessage(deps, c.visitor, { clientMsgId: `v${i}`, content: `visitor ${i}` })
            : sendMessage(deps, agent, { visitorId: c.visitor.visitorId, clientMsgId: `a${i}`, content: `agent ${i}` }),
        ),
      );
    // While it is down, attempts fail and are retried (and logged).
    await eventually(async () => {
      const rows = await deps.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.merchantId, m.merchantId));
      return rows.length > 0 && rows.some((d) => d.attempts >= 2 && d.lastError !== null);
    }, 'failed attempts while the receiver is down');
    await r.up();
    // 1 "joined" system message + 5 messages per conversation.
    await eventually(() => r.firsts().length === 18, 'all 18 events delivered');
    expect(r.received.every((x) => x.verified)).toBe(true);
    // A webhook-id names one event: its duplicates carry the same body.
    const bodyById = new Map<string, string>();
    for (const x of r.received) {
      expect(bodyById.get(x.id) ?? x.body).toBe(x.body);
      bodyById.set(x.id, x.body);
    }
    for (const c of visitors) {
      const seqs = r
        .firsts()
        .filter((x) => x.payload.data.message.conversation_id === c.conversationId)
        .map((x) => x.payload.data.message.seq);
      expect(seqs).toEqual([1, 2, 3, 4, 5, 6]);
    }
    const first = r.firsts()[0];
    expect(first?.payload).toMatchObject({ type: 'message.created', version: 1 });
    await eventually(async () => {
      const rows = await deps.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.merchantId, m.merchantId));
      return rows.length === 18 && rows.every((d) => d.state === 'delivered');
    }, 'every delivery logged as delivered');
  });

  it('a conversation’s life reaches the endpoint in order: created, its messages, assigned, closed, rated; and visitor.created', async () => {
    const r = await receiver();
    const m = await f.merchant({ switches: { session_invite_rating: 'on' } });
    const admin = await f.agent(m, { level: 'admin' });
    const agent = await f.agent(m);
    await f.online(agent);
    const all = [
      'conversation.created',
      'conversation.assigned',
      'conversation.closed',
      'conversation.rated',
      'message.created',
      'visitor.created',
    ];
    const { secret } = await createWebhookEndpoint(deps, admin, { url: r.url, events: all });
    r.useSecrets([secret]);
    const c = await f.conversation(m);
    await sendMessage(deps, c.visitor, { clientMsgId: 'k1', content: 'hello' });
    await closeConversation(deps, agent, { visitorId: c.visitor.visitorId });
    await rateConversation(deps, c.visitor, { score: 5, comment: 'thanks' });
    await eventually(() => r.firsts().some((x) => x.payload.type === 'conversation.rated'), 'the rating');
    const ofConversation = r
      .firsts()
      .filter(
        (x) =>
          x.payload.data.conversation_id === c.conversationId ||
          x.payload.data.message?.conversation_id === c.conversationId,
      );
    expect(ofConversation.map((x) => x.payload.type)).toEqual([
      'conversation.created',
      'message.created',
      'conversation.assigned',
      'message.created',
      'message.created',
      'conversation.closed',
      'message.created',
      'conversation.rated',
    ]);
    expect(ofConversation.at(-1)?.payload.data).toEqual({
      conversation_id: c.conversationId,
      visitor_id: c.visitor.visitorId,
      state: 'closed',
      score: 5,
      resolved: null,
      comment: 'thanks',
    });
    expect(ofConversation[2]?.payload.data.agent.agent_id).toBe(agent.agentId);
    await eventually(
      () => r.firsts().find((x) => x.payload.type === 'visitor.created'),
      'visitor.created (from the drain)',
    );
    const created = r.firsts().find((x) => x.payload.type === 'visitor.created');
    expect(created?.payload.data).toMatchObject({ visitor_id: c.visitor.visitorId, external_user_id: null });
    expect(r.received.every((x) => x.verified)).toBe(true);
  });

  it('a hanging receiver holds only its endpoint: another endpoint of the merchant gets every event at once', async () => {
    // The slow receiver's attempt would time out only after 10 s: the fast one must not wait for it.
    deps.config.webhooks.timeoutMs = 10_000;
    const slow = await receiver();
    const fast = await receiver();
    const { m, admin } = await merchantWithEndpoint(slow);
    slow.hang();
    const second = await createWebhookEndpoint(deps, admin, { url: fast.url, events: ['message.created'] });
    fast.useSecrets([second.secret]);
    const c = await f.conversation(m);
    const started = Date.now();
    for (let i = 0; i < 5; i++) await sendMessage(deps, c.visitor, { clientMsgId: `h${i}`, content: `${i}` });
    const sendMs = Date.now() - started;
    await eventually(() => fast.firsts().length === 6, 'the fast endpoint gets all 6');
    // Before the hanging attempt has even timed out.
    expect(Date.now() - started).toBeLessThan(deps.config.webhooks.timeoutMs);
    // Sends never wait for a receiver (their latency is bench row 10's): well under the attempt's timeout.
    expect(sendMs).toBeLessThan(deps.config.webhooks.timeoutMs);
    expect(fast.firsts().map((x) => x.payload.data.message.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    // The hanging one is still on its first event (order holds: the next waits for it).
    expect(new Set(slow.received.map((x) => x.payload.data.message.seq))).toEqual(new Set([1]));
    await slow.down();
    deps.config.webhooks.timeoutMs = 2000;
  });

  it('a final 4xx fails at once; a 429 with Retry-After waits that long; redelivery keeps the webhook-id', async () => {
    const r = await receiver();
    const { m, admin, endpoint } = await merchantWithEndpoint(r);
    r.answer((_x, res) => res.writeHead(410).end('gone'));
    const c = await f.conversation(m);
    await eventually(async () => {
      const [log] = await listWebhookDeliveries(deps, admin, { endpointId: endpoint.id });
      return log?.state === 'failed' && log;
    }, 'a failed delivery');
    const [failed] = await listWebhookDeliveries(deps, admin, { endpointId: endpoint.id });
    expect(failed).toMatchObject({ attempts: 1, lastStatus: 410, lastError: 'HTTP 410 gone' });
    expect(r.received).toHaveLength(1);

    let calls = 0;
    r.answer((_x, res) => {
      calls += 1;
      if (calls === 1) res.writeHead(429, { 'retry-after': '1' }).end();
      else res.writeHead(204).end();
    });
    const again = await redeliverWebhook(deps, admin, { deliveryId: failed?.id ?? '' });
    expect(again).toMatchObject({ id: failed?.id, state: 'pending', attempts: 0 });
    await eventually(() => r.received.length === 3, 'the 429 and its retry');
    const [first429, retried] = r.received.slice(1);
    expect(retried?.id).toBe(first429?.id);
    expect(retried?.id).toBe(failed?.id);
    expect(Number(retried?.headers['webhook-timestamp'])).toBeGreaterThanOrEqual(
      Number(first429?.headers['webhook-timestamp']) + 1,
    );
    await eventually(async () => {
      const [log] = await listWebhookDeliveries(deps, admin, { endpointId: endpoint.id });
      return log?.state === 'delivered';
    }, 'delivered after Retry-After');
    expect(c.conversationId).toBeTruthy();
  });

  it('a failed time range is redelivered; a still-pending delivery is not redelivered twice', async () => {
    const r = await receiver();
    const { m, admin, endpoint } = await merchantWithEndpoint(r);
    r.answer((_x, res) => res.writeHead(400).end());
    const since = Date.now() - 1000;
    await f.conversation(m);
    await f.conversation(m);
    await eventually(async () => {
      const log = await listWebhookDeliveries(deps, admin, { endpointId: endpoint.id });
      return log.length === 2 && log.every((d) => d.state === 'failed');
    }, 'two failed deliveries');
    r.answer((_x, res) => res.writeHead(200).end());
    expect(
      await redeliverFailedWebhooks(deps, admin, { endpointId: endpoint.id, since, until: Date.now() + 1000 }),
    ).toBe(2);
    await eventually(() => r.received.length === 4, 'both redelivered');
    expect(new Set(r.received.slice(2).map((x) => x.id))).toEqual(new Set(r.received.slice(0, 2).map((x) => x.id)));
  });

  it('an instance killed mid-delivery loses nothing: its lease runs out and another delivers it', async () => {
    const r = await receiver();
    const { admin, endpoint } = await merchantWithEndpoint(r);
    await dispatcher.stop();
    try {
      await testWebhookEndpoint(deps, admin, { endpointId: endpoint.id });
      // The "killed" instance claimed it and never answered. Its lease is twice the attempt's
      // timeout and a second: 1.2 s with a 100 ms timeout, not the 5 s of the file's 2 s (the
      // delivery after it keeps 2 s; nothing is sent under the 100 ms, which only sets the lease).
      deps.config.webhooks.timeoutMs = 100;
      const claimed = await claimDeliveries(deps, 100);
      expect(claimed.map((d) => d.endpointId)).toContain(endpoint.id);
    } finally {
      deps.config.webhooks.timeoutMs = 2000;
      dispatcher.start();
    }
    await eventually(() => r.received.length === 1, 'delivered after the lease', 30_000);
    expect(r.received[0]?.payload).toMatchObject({ type: 'webhook.test', data: { endpoint_id: endpoint.id } });
    expect(r.received[0]?.verified).toBe(true);
  }, 60_000);

  it('rotation: deliveries carry both signatures during the overlap, and each secret verifies', async () => {
    const r = await receiver();
    const { admin, endpoint, secret } = await merchantWithEndpoint(r);
    const rotated = await rotateWebhookSecret(deps, admin, { endpointId: endpoint.id });
    expect(rotated.secret).not.toBe(secret);
    expect(rotated.endpoint.previousSecretUntil).toBeGreaterThan(Date.now());
    r.useSecrets([secret]);
    await testWebhookEndpoint(deps, admin, { endpointId: endpoint.id });
    await eventually(() => r.received.length === 1, 'the ping');
    expect(r.received[0]?.verified).toBe(true);
    r.useSecrets([rotated.secret]);
    await testWebhookEndpoint(deps, admin, { endpointId: endpoint.id });
    await eventually(() => r.received.length === 2, 'the second ping');
    expect(r.received[1]?.verified).toBe(true);
    expect(String(r.received[1]?.headers['webhook-signature']).split(' ')).toHaveLength(2);
  });

  it('a disabled endpoint gets no new events; an address that turned private is refused at delivery (DNS rebinding)', async () => {
    const r = await receiver();
    const { m, admin, endpoint } = await merchantWithEndpoint(r);
    await setWebhookEndpointDisabled(deps, admin, { endpointId: endpoint.id, disabled: true });
    await f.conversation(m);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await listWebhookDeliveries(deps, admin, { endpointId: endpoint.id })).toEqual([]);
    await setWebhookEndpointDisabled(deps, admin, { endpointId: endpoint.id, disabled: false });
    deps.config.webhooks.allowPrivate = false;
    try {
      await testWebhookEndpoint(deps, admin, { endpointId: endpoint.id });
      await eventually(async () => {
        const [log] = await listWebhookDeliveries(deps, admin, { endpointId: endpoint.id });
        return log && log.attempts >= 1 && log.lastError?.includes('private');
      }, 'an attempt refused for its address');
      expect(r.received).toHaveLength(0);
    } finally {
      deps.config.webhooks.allowPrivate = true;
    }
  });
});

describe('Across instances', () => {
  it('two instances deliver one endpoint’s events: each once in order per conversation (PostgreSQL)', async () => {
    const other = await secondInstance();
    if (!other) return; // the embedded database is one process's
    other.config.webhooks = deps.config.webhooks;
    const second = createWebhookDispatcher(other, { pollMs: 10 });
    second.start();
    try {
      const r = await receiver();
      const { m, agent } = await merchantWithEndpoint(r);
      const cs = await Promise.all([f.conversation(m), f.conversation(m)]);
      for (let i = 0; i < 10; i++)
        await Promise.all(
          cs.map((c) =>
            sendMessage(deps, agent, { visitorId: c.visitor.visitorId, clientMsgId: `x${i}`, content: 'x' }),
          ),
        );
      await eventually(() => r.firsts().length === 22, 'all 22 events');
      for (const c of cs)
        expect(
          r
            .firsts()
            .filter((x) => x.payload.data.message.conversation_id === c.conversationId)
            .map((x) => x.payload.data.message.seq),
        ).toEqual(Array.from({ length: 11 }, (_, i) => i + 1));
      expect(r.received.length).toBe(22);
    } finally {
      await second.stop();
      await other.close();
    }
  });
});

afterEach(async () => {
  // Each test's endpoints are gone after it: a later test's dispatcher work stays its own.
  // Deliveries first, as deleteWebhookEndpoint does (the lock order of an attempt's outcome).
  await deps.db.delete(webhookDeliveries);
  await deps.db.delete(webhookEndpoints);
});
