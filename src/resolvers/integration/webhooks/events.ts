import { and, eq, inArray, sql } from 'drizzle-orm';
import { eventOutbox, webhookDeliveries, webhookEndpoints } from '../../../db/schema.js';
import { newId } from '../../../ids.js';
import { type EventData, eventCatalog, toWire, type WebhookEventName } from '../../event-catalog.js';
import type { OutboxRow, Tx } from '../../outbox/enqueue.js';

/**
 * Webhook events ride the outbox: the chat's transaction writes one outbox row per event on the
 * channel `webhook:{merchantId}` (never published on the bus), and the outbox drain that
 * publishes committed rows in order turns it into one delivery row per subscribed endpoint, in
 * the same transaction that deletes it. So a delivery exists only for a committed event, exactly
 * once per endpoint, and deliveries of one conversation are numbered in commit (= seq) order.
 */

export const WEBHOOK_CHANNEL_PREFIX = 'webhook:';

/** The body every endpoint receives for an event (docs/integration.md "Payloads"). */
export interface WebhookBody {
  type: WebhookEventName;
  /** The payload version of this type. */
  version: number;
  /** ISO 8601, when the event happened. */
  timestamp: string;
  data: unknown;
}

interface OutboxWebhook {
  /** The order key: a conversation id, or a visitor id for visitor events. */
  key: string;
  body: WebhookBody;
}

export function webhookBody<N extends WebhookEventName>(name: N, data: EventData<N>, at: number): WebhookBody {
  return {
    type: name,
    // Every webhook event declares its payload version (test/domain/events.test.ts checks it).
    version: (eventCatalog[name] as { webhook: number }).webhook,
    timestamp: new Date(at).toISOString(),
    data: toWire(name, data),
  };
}

/**
 * Queues a webhook event inside `tx` (delivered once `tx` commits). `outboxKey`: the outbox order
 * key it rides with (the visitor's, as the channel events of the same change). `orderKey`:
 * deliveries of one key go out in order per endpoint (the conversation id; the visitor id for
 * visitor events).
 */
export async function enqueueWebhookEvent<N extends WebhookEventName>(
  tx: Tx,
  outboxKey: string,
  merchantId: string,
  orderKey: string,
  name: N,
  data: EventData<N>,
  at: number,
) {
  await tx.insert(eventOutbox).values(webhookOutboxRow(outboxKey, merchantId, orderKey, name, data, at));
}

/** The outbox row of a webhook event (for `enqueueRows`, several in one statement), under `outboxKey`. */
export function webhookOutboxRow<N extends WebhookEventName>(
  outboxKey: string,
  merchantId: string,
  orderKey: string,
  name: N,
  data: EventData<N>,
  at: number,
): OutboxRow {
  const payload: OutboxWebhook = { key: orderKey, body: webhookBody(name, data, at) };
  return { orderKey: outboxKey, channel: `${WEBHOOK_CHANNEL_PREFIX}${merchantId}`, event: name, data: payload };
}

/** An enabled endpoint as `createDeliveries` needs it. */
export interface WebhookEndpointRef {
  id: string;
  merchantId: string;
  events: string[];
}

export const isWebhookOutboxRow = (row: { channel: string }) => row.channel.startsWith(WEBHOOK_CHANNEL_PREFIX);

/**
 * Turns drained webhook outbox rows (in outbox order) into delivery rows for every enabled
 * endpoint of their merchant that subscribes to their type. Returns how many it created.
 */
export async function createDeliveries(
  tx: Tx,
  rows: readonly { channel: string; event: string; data: unknown }[],
  now: number,
  /** The enabled endpoints of the rows' merchants, when the caller read them in its own statement (in `tx`). */
  known?: readonly WebhookEndpointRef[],
): Promise<number> {
  const merchantIds = [...new Set(rows.map((r) => r.channel.slice(WEBHOOK_CHANNEL_PREFIX.length)))];
  const endpoints =
    known ??
    (await tx
      .select({ id: webhookEndpoints.id, merchantId: webhookEndpoints.merchantId, events: webhookEndpoints.events })
      .from(webhookEndpoints)
      .where(and(inArray(webhookEndpoints.merchantId, merchantIds), eq(webhookEndpoints.disabled, false))));
  if (endpoints.length === 0) return 0;
  const values: (typeof webhookDeliveries.$inferInsert)[] = [];
  for (const row of rows) {
    const merchantId = row.channel.slice(WEBHOOK_CHANNEL_PREFIX.length);
    const { key, body } = row.data as OutboxWebhook;
    const text = JSON.stringify(body);
    for (const e of endpoints) {
      if (e.merchantId !== merchantId || !e.events.includes(row.event)) continue;
      values.push(deliveryRow(e.id, merchantId, row.event, key, text, now));
    }
  }
  // One statement keeps the rows' order: `seq` is taken in the order of `values`.
  if (values.length > 0) await tx.insert(webhookDeliveries).values(values);
  return values.length;
}

export const deliveryRow = (
  endpointId: string,
  merchantId: string,
  event: string,
  orderKey: string,
  body: string,
  now: number,
): typeof webhookDeliveries.$inferInsert => ({
  id: newId('msg'),
  endpointId,
  merchantId,
  event,
  orderKey,
  body,
  nextAttemptAt: new Date(now),
  createdAt: new Date(now),
});

/** Deliveries per endpoint waiting or in flight (the admin page's backlog figure). */
export const pendingCount = sql<number>`count(*) filter (where ${webhookDeliveries.state} = 'pending')`;
