import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditLog } from '../../src/db/schema.js';
import { agentSession } from '../support/clients.js';
import { eventually } from '../support/deps.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { webhookReceiver } from '../support/webhook-receiver.js';

/**
 * Webhooks through the gateway (docs/integration.md): the GraphQL fields and their REST twins
 * under /agent/webhook/*, for the demo admin `ada`; a ping reaches a real receiver, verified by
 * `standardwebhooks`; the secret is never in a log.
 */

let t: TestApp;
let r: Awaited<ReturnType<typeof webhookReceiver>>;
beforeAll(async () => {
  t = await startTestApp({ env: { WEBHOOK_ALLOW_PRIVATE: 'on', WEBHOOK_RETRY_SCHEDULE: '0.05,0.1,0.2' } });
  r = await webhookReceiver();
});
afterAll(async () => {
  await r?.down();
  await t?.stop();
});

const CREATE = `mutation($url: String!, $events: [String!]!, $description: String) {
  createWebhookEndpoint(url: $url, events: $events, description: $description) { endpoint { id url events } secret }
}`;

describe('Webhooks — GraphQL and /agent/webhook/*', () => {
  it('ada creates an endpoint (secret once), lists it by REST, pings it, reads the log, redelivers, rotates, deletes', async () => {
    const ada = await agentSession(t.url, 'ada');
    const created = await ada.client.graphql(CREATE, { url: r.url, events: ['message.created'], description: 'CRM' });
    expect(created.body.errors).toBeUndefined();
    const { endpoint, secret } = created.body.data.createWebhookEndpoint;
    expect(endpoint).toEqual({ id: expect.stringMatching(/^whep_/), url: r.url, events: ['message.created'] });
    expect(secret).toMatch(/^whsec_/);
    r.useSecrets([secret]);

    const listed = await ada.client.json('/agent/webhook/list');
    expect(listed.body).toMatchObject({
      code: 0,
      data: [{ id: endpoint.id, url: r.url, description: 'CRM', disabled: false }],
    });
    expect(JSON.stringify(listed.body)).not.toContain(secret);

    const ping = await ada.client.json('/agent/webhook/test', { method: 'POST', form: { endpoint_id: endpoint.id } });
    expect(ping.body).toMatchObject({ code: 0, data: { event: 'webhook.test', state: 'pending' } });
    await eventually(() => r.received.length === 1, 'the ping');
    expect(r.received[0]).toMatchObject({ id: ping.body.data.id, verified: true });
    expect(r.received[0]?.payload).toMatchObject({
      type: 'webhook.test',
      version: 1,
      data: { endpoint_id: endpoint.id },
    });

    const log = await eventually(async () => {
      const { body } = await ada.client.graphql(
        'query($id: ID!) { webhookDeliveries(endpointId: $id, first: 5) { id state attempts lastStatus lastLatencyMs } }',
        { id: endpoint.id },
      );
      const [d] = body.data.webhookDeliveries;
      return d?.state === 'delivered' && d;
    }, 'the delivered log entry');
    expect(log).toMatchObject({ id: ping.body.data.id, attempts: 1, lastStatus: 200 });

    const again = await ada.client.graphql('mutation($id: ID!) { redeliverWebhook(deliveryId: $id) { id state } }', {
      id: log.id,
    });
    expect(again.body.data.redeliverWebhook).toEqual({ id: log.id, state: 'pending' });
    await eventually(() => r.received.length === 2, 'the redelivery');
    expect(r.received[1]).toMatchObject({ id: log.id, verified: true });

    const rotated = await ada.client.json('/agent/webhook/rotate', {
      method: 'POST',
      json: { endpoint_id: endpoint.id },
    });
    expect(rotated.body.data.secret).toMatch(/^whsec_/);
    expect(rotated.body.data.secret).not.toBe(secret);

    const disabled = await ada.client.json('/agent/webhook/disable', {
      method: 'POST',
      json: { endpoint_id: endpoint.id },
    });
    expect(disabled.body.data).toMatchObject({ id: endpoint.id, disabled: true });

    const deleted = await ada.client.graphql('mutation($id: ID!) { deleteWebhookEndpoint(endpointId: $id) }', {
      id: endpoint.id,
    });
    expect(deleted.body.data).toEqual({ deleteWebhookEndpoint: true });
    expect((await ada.client.json('/agent/webhook/list')).body.data).toEqual([]);

    // Audited in the change's transaction, never with a secret; no secret in any log line either.
    const audit = await t.app.deps.db
      .select()
      .from(auditLog)
      .where(and(eq(auditLog.targetType, 'webhook_endpoint'), eq(auditLog.targetId, endpoint.id)));
    expect(audit.map((a) => a.action).sort()).toEqual([
      'webhook_endpoint.created',
      'webhook_endpoint.deleted',
      'webhook_endpoint.disabled',
      'webhook_endpoint.secret_rotated',
    ]);
    for (const s of [secret, rotated.body.data.secret]) {
      expect(JSON.stringify(audit)).not.toContain(s.slice(6));
      expect(t.rawLogs()).not.toContain(s.slice(6));
    }
  });

  it('an agent who is not an admin is refused (1403 / FORBIDDEN); a URL that is not http(s) is refused (1000)', async () => {
    const alice = await agentSession(t.url, 'alice');
    const rest = await alice.client.json('/agent/webhook/list');
    expect(rest.status).toBe(403);
    expect(rest.body.code).toBe(1403);
    const gql = await alice.client.graphql(CREATE, { url: r.url, events: ['message.created'] });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const bad = await (await agentSession(t.url, 'ada')).client.json('/agent/webhook/create', {
      method: 'POST',
      form: { url: 'ftp://example.com/x', events: 'message.created' },
    });
    expect(bad.body.code).toBe(1000);
  });
});
