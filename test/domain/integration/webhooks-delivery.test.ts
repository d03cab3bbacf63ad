import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { eq, inArray } from 'drizzle-orm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { WebhooksConfig } from '../../../src/config.js';
import { type WebhookEndpoint, webhookDeliveries, webhookEndpoints } from '../../../src/db/schema.js';
import type { Deps } from '../../../src/deps.js';
import { checkedLookup } from '../../../src/resolvers/integration/webhooks/addresses.js';
import {
  attemptDelivery,
  type ClaimedDelivery,
  claimDeliveries,
  classifyStatus,
  recordAttempt,
  retryAfter,
  retryDelayMs,
} from '../../../src/resolvers/integration/webhooks/delivery.js';
import { createWebhookDispatcher } from '../../../src/resolvers/integration/webhooks/dispatcher.js';
import {
  createDeliveries,
  deliveryRow,
  isWebhookOutboxRow,
  webhookBody,
  webhookOutboxRow,
} from '../../../src/resolvers/integration/webhooks/events.js';
import { testWebhookEndpoint } from '../../../src/resolvers/integration/webhooks/log.js';
import { signWebhook, webhookHeaders } from '../../../src/resolvers/integration/webhooks/signing.js';
import { eventually, type Factories, type TestDeps, useTestDeps } from '../../support/deps.js';
import { webhookReceiver } from '../../support/webhook-receiver.js';

/**
 * Webhook delivery, value by value (the delivery rules of docs/integration.md "Webhooks"): what a
 * claim takes and leases, what an attempt sends and answers, what its outcome writes to the
 * delivery and its endpoint's circuit, and what the dispatcher wakes for. The clock is the
 * deps' own, set in 2001: other files' deliveries (stamped now) are never due here, and every
 * time a row holds is known exactly.
 */

let shared: TestDeps;
let f: Factories;
useTestDeps((made) => {
  ({ deps: shared, f } = made);
});

const BASE = Date.parse('2001-02-03T04:05:06.789Z');
let clock = BASE;

/** The shared deps on the test's clock, with these webhook settings (the shared config is left alone). */
function depsWith(webhooks: Partial<WebhooksConfig> = {}, now: () => number = () => clock): Deps {
  const config = { ...shared.config, webhooks: { ...shared.config.webhooks, allowPrivate: true, ...webhooks } };
  return { ...shared, config, now };
}

const merchantsMade: string[] = [];
const receivers: Awaited<ReturnType<typeof webhookReceiver>>[] = [];

afterEach(async () => {
  clock = BASE;
  vi.restoreAllMocks();
  await Promise.all(receivers.splice(0).map((r) => r.down()));
  // A test's deliveries never stay due for the next one's claims.
  const made = merchantsMade.splice(0);
  if (made.length === 0) return;
  await shared.db.delete(webhookDeliveries).where(inArray(webhookDeliveries.merchantId, made));
  await shared.db.delete(webhookEndpoints).where(inArray(webhookEndpoints.merchantId, made));
});

async function receiver() {
  const r = await webhookReceiver();
  receivers.push(r);
  return r;
}

/** An endpoint row of a new merchant (set-up only: its creation rules are the endpoints file's). */
async function endpoint(fields: Partial<typeof webhookEndpoints.$inferInsert> = {}): Promise<WebhookEndpoint> {
  const merchantId = fields.merchantId ?? (await f.merchant()).merchantId;
  merchantsMade.push(merchantId);
  const [row] = await shared.db
    .insert(webhookEndpoints)
    .values({
      id: `whep_${randomBytes(6).toString('hex')}`,
      merchantId,
      url: 'http://127.0.0.1:9/hooks',
      events: ['message.created'],
      secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      createdAt: new Date(clock),
      ...fields,
    })
    .returning();
  if (!row) throw new Error('no endpoint');
  return row;
}

/** Pending deliveries of `e`, one per order key, due at the clock, oldest first. */
async function queue(e: WebhookEndpoint, keys: string[]) {
  const rows = keys.map((key) => deliveryRow(e.id, e.merchantId, 'message.created', key, `{"key":"${key}"}`, clock));
  return shared.db.insert(webhookDeliveries).values(rows).returning();
}

const deliveryOf = async (seq: number) =>
  (await shared.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.seq, seq)))[0];
const endpointOf = async (id: string) =>
  (await shared.db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, id)))[0];

/** A claimed delivery to `url`, as `claimDeliveries` answers it (for attempts that need no row). */
const claimedTo = (url: string, fields: Partial<ClaimedDelivery> = {}): ClaimedDelivery => ({
  seq: 1,
  id: 'msg_attempt',
  endpointId: 'whep_attempt',
  url,
  body: '{"type":"webhook.test"}',
  attempts: 1,
  secrets: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
  ...fields,
});

describe('Signing', () => {
  it('signs `{id}.{seconds}.{body}` with each secret’s bytes, `whsec_` or not, joined by a space', async () => {
    const { createHmac } = await import('node:crypto');
    const key = Buffer.from('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'base64');
    const expected = `v1,${createHmac('sha256', key).update('msg_1.981173106.{}').digest('base64')}`;
    expect(signWebhook(['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_1', 981173106, '{}')).toBe(expected);
    expect(signWebhook(['MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], 'msg_1', 981173106, '{}')).toBe(expected);
    const other = signWebhook(['whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB'], 'msg_1', 981173106, '{}');
    expect(
      signWebhook(
        ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB'],
        'msg_1',
        981173106,
        '{}',
      ),
    ).toBe(`${expected} ${other}`);
  });

  it('the headers carry the id, the whole seconds of now and the signature of those', () => {
    const secrets = ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'];
    expect(webhookHeaders(secrets, 'msg_2', 981173106_999, '{"a":1}')).toEqual({
      'webhook-id': 'msg_2',
      'webhook-timestamp': '981173106',
      'webhook-signature': signWebhook(secrets, 'msg_2', 981173106, '{"a":1}'),
    });
  });
});

describe('Retry rules at their bounds', () => {
  it('only 200–299 delivers; 400–499 but 408/409/425/429 is final; 1xx, 3xx, 5xx and no answer retry', () => {
    const verdicts = [199, 200, 299, 300, 399, 400, 408, 409, 425, 429, 499, 500, null].map(classifyStatus);
    expect(verdicts).toEqual([
      'retry',
      'delivered',
      'delivered',
      'retry',
      'retry',
      'final',
      'retry',
      'retry',
      'retry',
      'retry',
      'final',
      'retry',
      'retry',
    ]);
  });

  it('Retry-After: zero waits nothing, a fraction of a second counts, the past or a negative asks nothing, a day at most', () => {
    const now = Date.parse('2026-11-26T12:00:00Z');
    expect(retryAfter('0', now)).toBe(0);
    expect(retryAfter('1.5', now)).toBe(1500);
    expect(retryAfter('86400', now)).toBe(86_400_000);
    expect(retryAfter('86401', now)).toBe(86_400_000);
    expect(retryAfter('-1', now)).toBeNull();
    expect(retryAfter('', now)).toBeNull();
    expect(retryAfter('Thu, 26 Nov 2026 11:59:59 GMT', now)).toBeNull();
    expect(retryAfter('Thu, 26 Nov 2026 12:00:00 GMT', now)).toBe(0);
  });

  it('the n-th retry waits the n-th value, jittered around it; none before the first or past the last', () => {
    expect(retryDelayMs([5, 30], 1, () => 0.5)).toBe(5000);
    expect(retryDelayMs([5, 30], 2, () => 0.25)).toBe(28_500);
    expect(retryDelayMs([0.0123], 1, () => 0.5)).toBe(12);
    expect(retryDelayMs([5, 30], 0, () => 0.5)).toBeNull();
  });
});

describe('Claiming due deliveries', () => {
  it('takes a due delivery, counts the attempt, leases it for twice the timeout and a second, signed with the secret', async () => {
    const own = depsWith({ timeoutMs: 1500 });
    const e = await endpoint();
    const [row] = await queue(e, ['k1']);
    if (!row) throw new Error('no row');
    const claimed = await claimDeliveries(own, 10);
    expect(claimed).toEqual([
      {
        seq: row.seq,
        id: row.id,
        endpointId: e.id,
        url: e.url,
        body: '{"key":"k1"}',
        attempts: 1,
        secrets: [e.secret],
      },
    ]);
    expect(await deliveryOf(row.seq)).toMatchObject({
      attempts: 1,
      state: 'pending',
      leasedUntil: new Date(BASE + 4000),
      nextAttemptAt: new Date(BASE + 4000),
    });
    // Leased: not taken again while the lease runs.
    expect(await claimDeliveries(own, 10)).toEqual([]);
  });

  it('takes no more than the limit, oldest first', async () => {
    const own = depsWith({ concurrency: 4 });
    const e = await endpoint();
    const rows = await queue(e, ['a', 'b', 'c']);
    expect((await claimDeliveries(own, 1)).map((d) => d.seq)).toEqual([rows[0]?.seq]);
    expect((await claimDeliveries(own, 2)).map((d) => d.seq)).toEqual([rows[1]?.seq, rows[2]?.seq]);
  });

  it('an endpoint gets its concurrency less what is in flight; after 5 failures in a row, one probe', async () => {
    const own = depsWith({ concurrency: 3 });
    const healthy = await endpoint();
    const failing = await endpoint({ consecutiveFailures: 4 });
    const probing = await endpoint({ consecutiveFailures: 5 });
    for (const e of [healthy, failing, probing]) await queue(e, ['a', 'b', 'c', 'd']);
    const perEndpoint = (claimed: ClaimedDelivery[]) =>
      [healthy, failing, probing].map((e) => claimed.filter((d) => d.endpointId === e.id).length);
    expect(perEndpoint(await claimDeliveries(own, 1))).toEqual([1, 0, 0]);
    // 1 of the healthy endpoint's 3 slots is taken: 2 more; 4 failures still get all 3; 5 get 1.
    expect(perEndpoint(await claimDeliveries(own, 100))).toEqual([2, 3, 1]);
    expect(perEndpoint(await claimDeliveries(own, 100))).toEqual([0, 0, 0]);
  });

  it('signs with the previous secret too until its overlap ends, not at its end', async () => {
    const own = depsWith({ concurrency: 4, timeoutMs: 100 });
    const until = BASE + 60_000;
    const e = await endpoint({
      previousSecret: 'whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB',
      previousSecretUntil: new Date(until),
    });
    await queue(e, ['a', 'b']);
    clock = until - 1;
    expect((await claimDeliveries(own, 1)).map((d) => d.secrets)).toEqual([
      [e.secret, 'whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB'],
    ]);
    clock = until;
    expect((await claimDeliveries(own, 1)).map((d) => d.secrets)).toEqual([[e.secret]]);
  });
});

describe('An attempt', () => {
  it('POSTs the body as JSON with Parley’s user-agent and the headers signed at the clock', async () => {
    const r = await receiver();
    const methods: string[] = [];
    r.answer((_x, res) => {
      methods.push(String(res.req.method));
      res.writeHead(204).end();
    });
    const d = claimedTo(r.url);
    const outcome = await attemptDelivery(depsWith({ timeoutMs: 10_000 }), d);
    expect(outcome).toEqual({ status: 204, error: null, retryAfterMs: null, latencyMs: expect.any(Number) });
    // It answered, so within the timeout (the timer would have cut it).
    expect(outcome.latencyMs).toBeGreaterThanOrEqual(0);
    expect(outcome.latencyMs).toBeLessThanOrEqual(10_000);
    expect(methods).toEqual(['POST']);
    const [got] = r.received;
    expect(got?.body).toBe(d.body);
    expect(got?.headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': 'Parley-Webhooks/1',
      ...webhookHeaders(d.secrets, d.id, BASE, d.body),
    });
    expect(got?.headers['webhook-timestamp']).toBe('981173106');
  });

  it('a non-2xx answer: its status, `HTTP <status> <body>` cut to 200 characters, and its Retry-After', async () => {
    const r = await receiver();
    const own = depsWith();
    r.answer((_x, res) => res.writeHead(503, { 'retry-after': '7' }).end('x'.repeat(1000)));
    expect(await attemptDelivery(own, claimedTo(r.url))).toMatchObject({
      status: 503,
      error: `HTTP 503 ${'x'.repeat(200)}`,
      retryAfterMs: 7000,
    });
    r.answer((_x, res) => res.writeHead(300).end());
    expect(await attemptDelivery(own, claimedTo(r.url))).toMatchObject({
      status: 300,
      error: 'HTTP 300',
      retryAfterMs: null,
    });
    r.answer((_x, res) => res.writeHead(299).end('fine'));
    expect(await attemptDelivery(own, claimedTo(r.url))).toMatchObject({ status: 299, error: null });
    r.answer((_x, res) => res.writeHead(200).end());
    expect(await attemptDelivery(own, claimedTo(r.url))).toMatchObject({ status: 200, error: null });
  });

  it('an unparsable URL or a private address is refused without a request; a name goes through the checked lookup', async () => {
    const r = await receiver();
    const port = new URL(r.url).port;
    const strict = depsWith({ allowPrivate: false });
    const refused = (error: string) => ({ status: null, error, retryAfterMs: null, latencyMs: expect.any(Number) });
    expect(await attemptDelivery(strict, claimedTo('not a url'))).toEqual(refused('invalid url'));
    expect(await attemptDelivery(strict, claimedTo(r.url))).toEqual(
      refused('127.0.0.1 resolves to a private or loopback address'),
    );
    expect(await attemptDelivery(strict, claimedTo(`http://[::1]:${port}/hooks`))).toEqual(
      refused('::1 resolves to a private or loopback address'),
    );
    expect(await attemptDelivery(strict, claimedTo(`http://localhost:${port}/hooks`))).toEqual(
      refused('localhost resolves to a private or loopback address'),
    );
    expect(r.received).toEqual([]);
    // Allowed, the name is looked up and the attempt sent.
    expect(await attemptDelivery(depsWith(), claimedTo(`http://localhost:${port}/hooks`))).toMatchObject({
      status: 200,
      error: null,
    });
    expect(r.received).toHaveLength(1);
  });

  it('no answer: the connection’s error, or the timeout’s', async () => {
    const r = await receiver();
    const port = new URL(r.url).port;
    await r.down();
    expect(await attemptDelivery(depsWith(), claimedTo(r.url))).toMatchObject({
      status: null,
      error: `connect ECONNREFUSED 127.0.0.1:${port}`,
      retryAfterMs: null,
    });
    await r.up();
    r.hang();
    expect(await attemptDelivery(depsWith({ timeoutMs: 100 }), claimedTo(r.url))).toMatchObject({
      status: null,
      error: 'no answer within 100 ms',
    });
    // A name that does not resolve: the resolver's own error, naming it.
    const unresolved = await attemptDelivery(depsWith(), claimedTo('http://nowhere.invalid/hooks'));
    expect(unresolved).toMatchObject({ status: null, error: expect.stringContaining('nowhere.invalid') });
  });

  it('the checked lookup answers one address or all, and refuses a private one unless allowed', async () => {
    const lookup = (allow: boolean, host: string, options: { all?: boolean }) =>
      new Promise<unknown[]>((resolve) => checkedLookup(allow)(host, options, (...args) => resolve(args)));
    expect(await lookup(true, '127.0.0.1', {})).toEqual([null, '127.0.0.1', 4]);
    expect(await lookup(true, '[::1]', { all: false })).toEqual([null, '::1', 6]);
    expect(await lookup(true, '127.0.0.1', { all: true })).toEqual([null, [{ address: '127.0.0.1', family: 4 }]]);
    const [error, address] = await lookup(false, '127.0.0.1', { all: true });
    expect(address).toBe('');
    expect(error).toMatchObject({
      name: 'PrivateAddressError',
      message: '127.0.0.1 resolves to a private or loopback address',
    });
  });
});

describe('Recording an outcome', () => {
  /** A claimed delivery of `e` (attempt `attempts`), its row as the claim left it. */
  async function claimedOf(e: WebhookEndpoint, attempts = 1) {
    const [row] = await queue(e, ['k']);
    if (!row) throw new Error('no row');
    await shared.db
      .update(webhookDeliveries)
      .set({ attempts, leasedUntil: new Date(BASE + 5000), nextAttemptAt: new Date(BASE + 5000) })
      .where(eq(webhookDeliveries.seq, row.seq));
    return claimedTo(e.url, { seq: row.seq, id: row.id, endpointId: e.id, attempts });
  }
  const outcome = (status: number | null, retryAfterMs: number | null = null) => ({
    status,
    latencyMs: 42,
    error: status === 200 ? null : 'boom',
    retryAfterMs,
  });
  const circuitOf = async (e: WebhookEndpoint) => {
    const row = await endpointOf(e.id);
    return { failures: row?.consecutiveFailures, openUntil: row?.circuitOpenUntil?.getTime() ?? null };
  };

  it('delivered: finished now, lease gone, the attempt logged; the endpoint’s failures and circuit reset', async () => {
    const e = await endpoint({ consecutiveFailures: 3, circuitOpenUntil: new Date(BASE - 1) });
    const d = await claimedOf(e);
    clock = BASE + 250;
    await recordAttempt(depsWith(), d, outcome(200));
    expect(await deliveryOf(d.seq)).toMatchObject({
      state: 'delivered',
      attempts: 1,
      leasedUntil: null,
      nextAttemptAt: new Date(BASE + 250),
      lastStatus: 200,
      lastError: null,
      lastLatencyMs: 42,
      lastAttemptAt: new Date(BASE + 250),
      finishedAt: new Date(BASE + 250),
    });
    expect(await circuitOf(e)).toEqual({ failures: 0, openUntil: null });
  });

  it('a final 4xx fails at once, and counts as the endpoint alive', async () => {
    const e = await endpoint({ consecutiveFailures: 4 });
    const d = await claimedOf(e);
    await recordAttempt(depsWith({ retrySchedule: [5, 30] }), d, outcome(410, 9000));
    expect(await deliveryOf(d.seq)).toMatchObject({
      state: 'failed',
      leasedUntil: null,
      nextAttemptAt: new Date(BASE + 9000),
      lastStatus: 410,
      lastError: 'boom',
      finishedAt: new Date(BASE),
    });
    expect(await circuitOf(e)).toEqual({ failures: 0, openUntil: null });
  });

  it('a retry waits the schedule’s wait for that attempt, or a longer Retry-After; a failure counts', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const own = depsWith({ retrySchedule: [5, 30, 120] });
    const e = await endpoint({ consecutiveFailures: 2 });
    const second = await claimedOf(e, 2);
    await recordAttempt(own, second, outcome(500, 1000));
    expect(await deliveryOf(second.seq)).toMatchObject({
      state: 'pending',
      attempts: 2,
      leasedUntil: null,
      nextAttemptAt: new Date(BASE + 30_000),
      lastStatus: 500,
      lastError: 'boom',
      lastAttemptAt: new Date(BASE),
      finishedAt: null,
    });
    expect(await circuitOf(e)).toEqual({ failures: 3, openUntil: null });
    const asked = await claimedOf(await endpoint(), 1);
    await recordAttempt(own, asked, outcome(429, 60_000));
    expect(await deliveryOf(asked.seq)).toMatchObject({ state: 'pending', nextAttemptAt: new Date(BASE + 60_000) });
  });

  it('past the schedule’s last wait the delivery fails', async () => {
    const e = await endpoint();
    const last = await claimedOf(e, 3);
    await recordAttempt(depsWith({ retrySchedule: [5, 30] }), last, outcome(null));
    expect(await deliveryOf(last.seq)).toMatchObject({
      state: 'failed',
      lastStatus: null,
      nextAttemptAt: new Date(BASE),
      finishedAt: new Date(BASE),
    });
    expect(await circuitOf(e)).toEqual({ failures: 1, openUntil: null });
  });

  it('the 5th failure in a row opens the circuit for the first wait, a longer Retry-After, at most 5 minutes', async () => {
    const opened = async (webhooks: Partial<WebhooksConfig>, retryAfterMs: number | null) => {
      const e = await endpoint({ consecutiveFailures: 4 });
      await recordAttempt(depsWith(webhooks), await claimedOf(e), outcome(503, retryAfterMs));
      return circuitOf(e);
    };
    expect(await opened({ retrySchedule: [2, 30] }, null)).toEqual({ failures: 5, openUntil: BASE + 2000 });
    expect(await opened({ retrySchedule: [2, 30] }, 60_000)).toEqual({ failures: 5, openUntil: BASE + 60_000 });
    expect(await opened({ retrySchedule: [2, 30] }, 86_400_000)).toEqual({ failures: 5, openUntil: BASE + 300_000 });
    expect(await opened({ retrySchedule: [] }, null)).toEqual({ failures: 5, openUntil: BASE + 5000 });
  });

  it('an attempt whose lease was taken again writes nothing, to the row or the endpoint', async () => {
    const e = await endpoint({ consecutiveFailures: 1 });
    const d = await claimedOf(e, 1);
    await shared.db.update(webhookDeliveries).set({ attempts: 2 }).where(eq(webhookDeliveries.seq, d.seq));
    const before = await deliveryOf(d.seq);
    await recordAttempt(depsWith(), d, outcome(200));
    expect(await deliveryOf(d.seq)).toEqual(before);
    expect(await circuitOf(e)).toEqual({ failures: 1, openUntil: null });
  });
});

describe('Deliveries from the outbox', () => {
  /** `createDeliveries` in a transaction of its own, as the outbox drain calls it. */
  const deliveriesFrom = (
    rows: Parameters<typeof createDeliveries>[1],
    known?: Parameters<typeof createDeliveries>[3],
  ) => shared.db.transaction((tx) => createDeliveries(tx, rows, BASE, known));

  it('the body, and the outbox row that carries it on the merchant’s webhook channel', () => {
    const body = webhookBody('webhook.test', { endpointId: 'whep_1' }, BASE);
    expect(body).toEqual({
      type: 'webhook.test',
      version: 1,
      timestamp: '2001-02-03T04:05:06.789Z',
      data: { endpoint_id: 'whep_1' },
    });
    const row = webhookOutboxRow('visitor:v1', 'm_1', 'c_1', 'webhook.test', { endpointId: 'whep_1' }, BASE);
    expect(row).toEqual({
      orderKey: 'visitor:v1',
      channel: 'webhook:m_1',
      event: 'webhook.test',
      data: { key: 'c_1', body },
    });
    expect([row, { channel: 'conversation:webhook:m_1' }, { channel: 'webhooks:m_1' }].map(isWebhookOutboxRow)).toEqual(
      [true, false, false],
    );
  });

  it('one delivery per enabled endpoint of the row’s merchant subscribed to its type, in row order', async () => {
    const a1 = await endpoint({ events: ['message.created', 'conversation.closed'] });
    const a2 = await endpoint({ merchantId: a1.merchantId, events: ['conversation.closed'] });
    await endpoint({ merchantId: a1.merchantId, events: ['message.created'], disabled: true });
    const b1 = await endpoint({ events: ['message.created'] });
    const hook = (merchantId: string, event: string, key: string) => ({
      channel: `webhook:${merchantId}`,
      event,
      data: { key, body: { type: event, n: key } },
    });
    const rows = [
      hook(a1.merchantId, 'message.created', 'c1'),
      hook(b1.merchantId, 'message.created', 'c2'),
      hook(a1.merchantId, 'conversation.closed', 'c3'),
    ];
    expect(await deliveriesFrom(rows)).toBe(4);
    const made = await shared.db
      .select()
      .from(webhookDeliveries)
      .where(inArray(webhookDeliveries.merchantId, [a1.merchantId, b1.merchantId]))
      .orderBy(webhookDeliveries.seq);
    expect(made.map((d) => [d.endpointId, d.merchantId, d.event, d.orderKey, d.body])).toEqual([
      [a1.id, a1.merchantId, 'message.created', 'c1', '{"type":"message.created","n":"c1"}'],
      [b1.id, b1.merchantId, 'message.created', 'c2', '{"type":"message.created","n":"c2"}'],
      [a1.id, a1.merchantId, 'conversation.closed', 'c3', '{"type":"conversation.closed","n":"c3"}'],
      [a2.id, a1.merchantId, 'conversation.closed', 'c3', '{"type":"conversation.closed","n":"c3"}'],
    ]);
    expect(made[0]).toMatchObject({
      state: 'pending',
      attempts: 0,
      nextAttemptAt: new Date(BASE),
      createdAt: new Date(BASE),
      leasedUntil: null,
      finishedAt: null,
    });
    expect(made[0]?.id).toMatch(/^msg_/);
  });

  it('with the endpoints given, those are the ones served; none given, none made', async () => {
    const e = await endpoint({ disabled: true });
    const row = { channel: `webhook:${e.merchantId}`, event: 'message.created', data: { key: 'k', body: {} } };
    expect(await deliveriesFrom([row], [])).toBe(0);
    expect(await deliveriesFrom([row], [{ id: e.id, merchantId: e.merchantId, events: e.events }])).toBe(1);
    const made = await shared.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.endpointId, e.id));
    expect(made.map((d) => d.body)).toEqual(['{}']);
    // An endpoint that wants none of the rows' types: nothing to insert.
    const closed = { ...row, event: 'conversation.closed' };
    expect(await deliveriesFrom([closed], [{ id: e.id, merchantId: e.merchantId, events: e.events }])).toBe(0);
  });
});

describe('The dispatcher', () => {
  /** A clock that runs, from BASE on: retries fall due as real time passes. */
  const running = () => {
    const started = Date.now();
    return () => BASE + (Date.now() - started);
  };

  // At the jitter's low end each retry is due before the dispatcher's timer for it fires; at its
  // high end, after a timer set for the schedule's plain wait.
  it.each([
    ['low', 0],
    ['high', 0.9999],
  ])(
    'sends what a ping queues when nudged, and retries a failure when its wait is over, without polling (jitter at its %s end)',
    async (_end, random) => {
      const r = await receiver();
      // A 300 first, then no answer at all, then a 204: each failure sets the retry's timer.
      const answers = [
        (res: ServerResponse) => res.writeHead(300).end(),
        (res: ServerResponse) => res.destroy(),
        (res: ServerResponse) => res.writeHead(204).end(),
      ];
      r.answer((_x, res) => answers.shift()?.(res));
      vi.spyOn(Math, 'random').mockReturnValue(random);
      const e = await endpoint({ url: r.url });
      const key = {
        kind: 'apiKey',
        keyId: 'key_1',
        merchantId: e.merchantId,
        name: 'ops',
        scopes: ['webhooks:manage'],
      } as const;
      const own = depsWith({ retrySchedule: [0.05, 0.05, 0.05] }, running());
      const dispatcher = createWebhookDispatcher(own, { pollMs: 3_600_000, sweepMs: 3_600_000 });
      dispatcher.start();
      try {
        // The ping wakes this deps' dispatcher; the failure's timer, its retry.
        const ping = await testWebhookEndpoint(own, { ...key, scopes: [...key.scopes] }, { endpointId: e.id });
        await eventually(() => r.received.length === 3, 'two failed attempts and the retry that succeeds');
        const [row] = await shared.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, ping.id));
        await eventually(async () => (await deliveryOf(row?.seq ?? 0))?.state === 'delivered', 'delivered');
        expect(await deliveryOf(row?.seq ?? 0)).toMatchObject({ attempts: 3, lastStatus: 204 });
        expect(r.received.map((x) => x.id)).toEqual([ping.id, ping.id, ping.id]);
      } finally {
        await dispatcher.stop();
      }
    },
  );

  it('claims no more than its attempts in flight allow', async () => {
    const r = await receiver();
    r.hang();
    const e = await endpoint({ url: r.url });
    const [first, second] = await queue(e, ['a', 'b']);
    const dispatcher = createWebhookDispatcher(depsWith({ concurrency: 4, timeoutMs: 10_000 }), {
      pollMs: 3_600_000,
      maxInFlight: 1,
    });
    dispatcher.start();
    await eventually(() => r.received.length === 1, 'the first attempt');
    // Once stopped, its claims are over (stop waits for them): the second was never taken.
    await dispatcher.stop();
    expect((await deliveryOf(first?.seq ?? 0))?.attempts).toBe(1);
    expect((await deliveryOf(second?.seq ?? 0))?.attempts).toBe(0);
  });

  it('a finished attempt frees its slot and wakes the dispatcher for the next', async () => {
    const r = await receiver();
    const e = await endpoint({ url: r.url });
    const rows = await queue(e, ['a', 'b']);
    const dispatcher = createWebhookDispatcher(depsWith({ concurrency: 4 }), { pollMs: 3_600_000, maxInFlight: 1 });
    dispatcher.start();
    try {
      await eventually(() => r.received.length === 2, 'both, one after the other');
      expect(r.received.map((x) => x.id)).toEqual(rows.map((d) => d.id));
    } finally {
      await dispatcher.stop();
    }
  });

  it('a claim that fails is logged, and the dispatcher carries on', async () => {
    const warnings: unknown[][] = [];
    const log = Object.assign(Object.create(shared.log), { warn: (...args: unknown[]) => warnings.push(args) });
    const db = new Proxy(shared.db, {
      get(target, prop) {
        if (prop === 'transaction') return async () => Promise.reject(new Error('database away'));
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const dispatcher = createWebhookDispatcher({ ...depsWith(), db, log }, { pollMs: 3_600_000 });
    dispatcher.start();
    try {
      await eventually(() => warnings.length > 0, 'the warning');
      expect(warnings[0]).toEqual([{ err: 'database away' }, 'webhook: claim failed']);
      dispatcher.nudge();
      await eventually(() => warnings.length > 1, 'the next claim, tried again');
    } finally {
      await dispatcher.stop();
    }
  });

  it('an outcome that cannot be written is logged; the delivery stays leased, to be tried again', async () => {
    const r = await receiver();
    const e = await endpoint({ url: r.url });
    const [row] = await queue(e, ['k']);
    const warnings: unknown[][] = [];
    const log = Object.assign(Object.create(shared.log), { warn: (...args: unknown[]) => warnings.push(args) });
    // The claim's transaction goes through; every later one (the outcome's) fails.
    let transactions = 0;
    const db = new Proxy(shared.db, {
      get(target, prop) {
        if (prop === 'transaction' && transactions++ > 0) return async () => Promise.reject(new Error('database away'));
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const dispatcher = createWebhookDispatcher({ ...depsWith(), db, log }, { pollMs: 3_600_000 });
    dispatcher.start();
    try {
      await eventually(
        () => warnings.some(([, message]) => message === 'webhook: attempt not recorded'),
        'the unrecorded attempt',
      );
      expect(warnings.find(([, message]) => message === 'webhook: attempt not recorded')).toEqual([
        { delivery: row?.id, err: 'database away' },
        'webhook: attempt not recorded',
      ]);
      expect(r.received).toHaveLength(1);
      expect(await deliveryOf(row?.seq ?? 0)).toMatchObject({ state: 'pending', attempts: 1, lastStatus: null });
    } finally {
      await dispatcher.stop();
    }
  });

  it('on start, deletes finished deliveries past the log’s retention, and only those', async () => {
    const e = await endpoint();
    const [old, recent, pending] = await queue(e, ['a', 'b', 'c']);
    const day = 86_400_000;
    await shared.db
      .update(webhookDeliveries)
      .set({ state: 'delivered', finishedAt: new Date(BASE - 3 * day - 1) })
      .where(eq(webhookDeliveries.seq, old?.seq ?? 0));
    await shared.db
      .update(webhookDeliveries)
      .set({ state: 'failed', finishedAt: new Date(BASE - 2 * day) })
      .where(eq(webhookDeliveries.seq, recent?.seq ?? 0));
    const dispatcher = createWebhookDispatcher(depsWith({ logRetentionDays: 3 }), {
      pollMs: 3_600_000,
      maxInFlight: 0,
    });
    dispatcher.start();
    try {
      await eventually(async () => !(await deliveryOf(old?.seq ?? 0)), 'the old delivery swept');
      expect((await deliveryOf(recent?.seq ?? 0))?.state).toBe('failed');
      expect((await deliveryOf(pending?.seq ?? 0))?.state).toBe('pending');
    } finally {
      await dispatcher.stop();
    }
  });
});
