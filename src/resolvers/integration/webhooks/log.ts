import { and, desc, eq, gte, lt, ne } from 'drizzle-orm';
import { z } from 'zod';
import { type WebhookDelivery, webhookDeliveries } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { DomainError } from '../../../errors.js';
import { parseInput } from '../../inputs.js';
import { type MerchantManager, requireManager } from '../api-keys/manager.js';
import { nudgeWebhooks } from './dispatcher.js';
import { merchantEndpoint } from './endpoints.js';
import { deliveryRow, webhookBody } from './events.js';

/** The delivery log of an endpoint, redelivery and the test ping (docs/integration.md "Delivery log"). */

export interface WebhookDeliveryView {
  /** The `webhook-id` receivers see (the same on every attempt and redelivery). */
  id: string;
  endpointId: string;
  event: string;
  /** `pending` (waiting or in flight), `delivered` or `failed` (final). */
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  /** HTTP status of the last attempt; null when it got no answer. */
  lastStatus: number | null;
  lastError: string | null;
  lastLatencyMs: number | null;
  /** Unix ms. */
  lastAttemptAt: number | null;
  nextAttemptAt: number | null;
  createdAt: number;
  /** The exact body sent. */
  body: string;
}

const toDeliveryView = (d: WebhookDelivery): WebhookDeliveryView => ({
  id: d.id,
  endpointId: d.endpointId,
  event: d.event,
  state: d.state,
  attempts: d.attempts,
  lastStatus: d.lastStatus,
  lastError: d.lastError,
  lastLatencyMs: d.lastLatencyMs,
  lastAttemptAt: d.lastAttemptAt?.getTime() ?? null,
  nextAttemptAt: d.state === 'pending' ? d.nextAttemptAt.getTime() : null,
  createdAt: d.createdAt.getTime(),
  body: d.body,
});

export const MAX_LOG_PAGE = 100;

export const deliveriesInput = z.object({
  endpointId: z.string().min(1).max(64),
  first: z.number().int().min(1).max(MAX_LOG_PAGE).default(20),
});
export type DeliveriesInput = z.input<typeof deliveriesInput>;

/** The newest deliveries of an endpoint first. */
export async function listWebhookDeliveries(
  deps: Deps,
  viewer: MerchantManager,
  raw: DeliveriesInput,
): Promise<WebhookDeliveryView[]> {
  requireManager(viewer, 'webhooks:manage');
  const input = parseInput(deliveriesInput, raw);
  await merchantEndpoint(deps, viewer.merchantId, input.endpointId);
  const rows = await deps.db
    .select()
    .from(webhookDeliveries)
    .where(eq(webhookDeliveries.endpointId, input.endpointId))
    .orderBy(desc(webhookDeliveries.seq))
    .limit(input.first);
  return rows.map(toDeliveryView);
}

export const redeliverInput = z.object({ deliveryId: z.string().min(1).max(64) });
export type RedeliverInput = z.input<typeof redeliverInput>;

/** Sends one delivery again, under the same `webhook-id`, with a fresh retry schedule. */
export async function redeliverWebhook(
  deps: Deps,
  viewer: MerchantManager,
  raw: RedeliverInput,
): Promise<WebhookDeliveryView> {
  requireManager(viewer, 'webhooks:manage');
  const { deliveryId } = parseInput(redeliverInput, raw);
  const [row] = await deps.db
    .update(webhookDeliveries)
    .set(requeued(deps.now()))
    .where(
      and(
        eq(webhookDeliveries.id, deliveryId),
        eq(webhookDeliveries.merchantId, viewer.merchantId),
        ne(webhookDeliveries.state, 'pending'),
      ),
    )
    .returning();
  if (!row) {
    const [pending] = await deps.db
      .select({ id: webhookDeliveries.id })
      .from(webhookDeliveries)
      .where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.merchantId, viewer.merchantId)));
    throw pending
      ? new DomainError('BAD_USER_INPUT', 'This delivery is still pending')
      : new DomainError('NOT_FOUND', 'No such webhook delivery');
  }
  nudgeWebhooks(deps);
  return toDeliveryView(row);
}

const requeued = (now: number) => ({
  state: 'pending' as const,
  attempts: 0,
  nextAttemptAt: new Date(now),
  leasedUntil: null,
  finishedAt: null,
});

export const redeliverRangeInput = z
  .object({
    endpointId: z.string().min(1).max(64),
    /** Unix ms, inclusive. */
    since: z.number().int().nonnegative(),
    /** Unix ms, exclusive. */
    until: z.number().int().positive(),
  })
  .refine((v) => v.since < v.until, { message: 'since must be before until', path: ['until'] });
export type RedeliverRangeInput = z.input<typeof redeliverRangeInput>;

/** Sends again every failed delivery of an endpoint created in [since, until); answers how many. */
export async function redeliverFailedWebhooks(deps: Deps, viewer: MerchantManager, raw: RedeliverRangeInput) {
  requireManager(viewer, 'webhooks:manage');
  const input = parseInput(redeliverRangeInput, raw);
  await merchantEndpoint(deps, viewer.merchantId, input.endpointId);
  const rows = await deps.db
    .update(webhookDeliveries)
    .set(requeued(deps.now()))
    .where(
      and(
        eq(webhookDeliveries.endpointId, input.endpointId),
        eq(webhookDeliveries.state, 'failed'),
        gte(webhookDeliveries.createdAt, new Date(input.since)),
        lt(webhookDeliveries.createdAt, new Date(input.until)),
      ),
    )
    .returning({ id: webhookDeliveries.id });
  if (rows.length > 0) nudgeWebhooks(deps);
  return rows.length;
}

/** Queues a `webhook.test` ping to one endpoint (even a disabled one's log shows it, waiting). */
export async function testWebhookEndpoint(
  deps: Deps,
  viewer: MerchantManager,
  raw: { endpointId: string },
): Promise<WebhookDeliveryView> {
  requireManager(viewer, 'webhooks:manage');
  const { endpointId } = parseInput(z.object({ endpointId: z.string().min(1).max(64) }), raw);
  await merchantEndpoint(deps, viewer.merchantId, endpointId);
  const now = deps.now();
  const body = JSON.stringify(webhookBody('webhook.test', { endpointId }, now));
  const values = deliveryRow(endpointId, viewer.merchantId, 'webhook.test', `test:${endpointId}`, body, now);
  const [row] = await deps.db.insert(webhookDeliveries).values(values).returning();
  if (!row) throw new Error('delivery insert returned nothing');
  nudgeWebhooks(deps);
  return toDeliveryView(row);
}
