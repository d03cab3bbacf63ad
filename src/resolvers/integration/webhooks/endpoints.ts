import { and, count, eq } from 'drizzle-orm';
import { z } from 'zod';
import { type WebhookEndpoint, webhookDeliveries, webhookEndpoints } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { DomainError } from '../../../errors.js';
import { newId } from '../../../ids.js';
import { recordAudit } from '../../desk/audit.js';
import { webhookEventNames } from '../../event-catalog.js';
import { parseInput } from '../../inputs.js';
import type { Tx } from '../../outbox/enqueue.js';
import { auditedManager, type MerchantManager, requireManager } from '../api-keys/manager.js';
import { checkedAddresses, PrivateAddressError } from './addresses.js';
import { newWebhookSecret } from './signing.js';

/** A merchant's webhook endpoints, managed by its admins (docs/integration.md "Webhooks"). */

export const MAX_ENDPOINTS = 20;

/** An endpoint as admins see it: never its secret (shown once, at creation and rotation). */
export interface WebhookEndpointView {
  id: string;
  url: string;
  description: string;
  events: string[];
  disabled: boolean;
  /** Failed attempts in a row; at 5 the circuit opens and attempts pause. */
  consecutiveFailures: number;
  /** Unix ms until which attempts pause (the circuit breaker), or null. */
  circuitOpenUntil: number | null;
  /** Unix ms until which the previous secret still signs after a rotation, or null. */
  previousSecretUntil: number | null;
  createdAt: number;
}

export const toEndpointView = (e: WebhookEndpoint): WebhookEndpointView => ({
  id: e.id,
  url: e.url,
  description: e.description,
  events: e.events,
  disabled: e.disabled,
  consecutiveFailures: e.consecutiveFailures,
  circuitOpenUntil: e.circuitOpenUntil?.getTime() ?? null,
  previousSecretUntil: e.previousSecretUntil?.getTime() ?? null,
  createdAt: e.createdAt.getTime(),
});

/** What the audit log records of an endpoint (never its secret). */
const audited = (e: WebhookEndpoint) => ({
  url: e.url,
  events: e.events,
  description: e.description,
  disabled: e.disabled,
});

const audit = (
  tx: Tx,
  viewer: MerchantManager,
  action: string,
  id: string,
  before: Record<string, unknown> | null,
  after: Record<string, unknown> | null,
) => recordAudit(tx, { ...auditedManager(viewer), action, target: { type: 'webhook_endpoint', id }, before, after });

/** Events an endpoint may ask for (`webhook.test` pings reach every endpoint). */
const subscribable = webhookEventNames.filter((n) => n !== 'webhook.test') as [string, ...string[]];

export const createEndpointInput = z.object({
  url: z.string().trim().url().max(2048),
  events: z
    .array(z.enum(subscribable))
    .min(1)
    .max(subscribable.length)
    .transform((list) => [...new Set(list)]),
  description: z.string().trim().max(200).default(''),
});
export type CreateEndpointInput = z.input<typeof createEndpointInput>;

export const endpointIdInput = z.object({ endpointId: z.string().min(1).max(64) });
export type EndpointIdInput = z.input<typeof endpointIdInput>;

export const setDisabledInput = endpointIdInput.extend({ disabled: z.boolean() });
export type SetDisabledInput = z.input<typeof setDisabledInput>;

/**
 * A URL webhooks may go to: https (http too outside production), no credentials in it, and a
 * host that resolves to public addresses only unless WEBHOOK_ALLOW_PRIVATE is on.
 */
export async function checkEndpointUrl(deps: Deps, raw: string): Promise<string> {
  const url = new URL(raw);
  const schemes = deps.config.env === 'production' ? ['https:'] : ['https:', 'http:'];
  if (!schemes.includes(url.protocol))
    throw new DomainError('BAD_USER_INPUT', `url: must start with ${schemes.map((s) => `${s}//`).join(' or ')}`);
  if (url.username || url.password) throw new DomainError('BAD_USER_INPUT', 'url: must not carry credentials');
  try {
    await checkedAddresses(url.hostname, deps.config.webhooks.allowPrivate);
  } catch (error) {
    if (error instanceof PrivateAddressError)
      throw new DomainError('BAD_USER_INPUT', 'url: private and loopback addresses are not allowed');
    throw new DomainError('BAD_USER_INPUT', 'url: the host name does not resolve');
  }
  url.hash = '';
  return url.toString();
}

/** Registers an endpoint; its signing secret is answered here and never again. */
export async function createWebhookEndpoint(
  deps: Deps,
  viewer: MerchantManager,
  raw: CreateEndpointInput,
): Promise<{ endpoint: WebhookEndpointView; secret: string }> {
  requireManager(viewer, 'webhooks:manage');
  const input = parseInput(createEndpointInput, raw);
  const url = await checkEndpointUrl(deps, input.url);
  const [existing] = await deps.db
    .select({ n: count() })
    .from(webhookEndpoints)
    .where(eq(webhookEndpoints.merchantId, viewer.merchantId));
  if ((existing?.n ?? 0) >= MAX_ENDPOINTS)
    throw new DomainError('BAD_USER_INPUT', `A merchant has at most ${MAX_ENDPOINTS} webhook endpoints`);
  const secret = newWebhookSecret();
  const row = await deps.db.transaction(async (tx) => {
    const [inserted] = await tx
      .insert(webhookEndpoints)
      .values({
        id: newId('whep'),
        merchantId: viewer.merchantId,
        url,
        description: input.description,
        events: input.events,
        secret,
        createdAt: new Date(deps.now()),
      })
      .returning();
    if (!inserted) throw new Error('endpoint insert returned nothing');
    await audit(tx, viewer, 'webhook_endpoint.created', inserted.id, null, audited(inserted));
    return inserted;
  });
  return { endpoint: toEndpointView(row), secret };
}

/** The merchant's endpoints, oldest first. */
export async function listWebhookEndpoints(deps: Deps, viewer: MerchantManager): Promise<WebhookEndpointView[]> {
  requireManager(viewer, 'webhooks:manage');
  const rows = await deps.db
    .select()
    .from(webhookEndpoints)
    .where(eq(webhookEndpoints.merchantId, viewer.merchantId))
    .orderBy(webhookEndpoints.createdAt, webhookEndpoints.id);
  return rows.map(toEndpointView);
}

/** One endpoint of the viewer's merchant, or NOT_FOUND. */
export async function merchantEndpoint(deps: Deps, merchantId: string, endpointId: string) {
  const [row] = await deps.db
    .select()
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, endpointId), eq(webhookEndpoints.merchantId, merchantId)));
  if (!row) throw new DomainError('NOT_FOUND', 'No such webhook endpoint');
  return row;
}

/** Deletes an endpoint and its delivery log; nothing more is sent to it. */
export async function deleteWebhookEndpoint(
  deps: Deps,
  viewer: MerchantManager,
  raw: EndpointIdInput,
): Promise<boolean> {
  requireManager(viewer, 'webhooks:manage');
  const { endpointId } = parseInput(endpointIdInput, raw);
  const existing = await merchantEndpoint(deps, viewer.merchantId, endpointId);
  // Deliveries before the endpoint, the order in which an attempt's outcome locks them (no deadlock).
  await deps.db.transaction(async (tx) => {
    await tx.delete(webhookDeliveries).where(eq(webhookDeliveries.endpointId, endpointId));
    await tx.delete(webhookEndpoints).where(eq(webhookEndpoints.id, endpointId));
    await audit(tx, viewer, 'webhook_endpoint.deleted', endpointId, audited(existing), null);
  });
  return true;
}

/**
 * Disables (no new events are queued for it, pending ones wait) or enables an endpoint;
 * enabling also closes its circuit. Asking for what already holds writes and audits nothing.
 */
export async function setWebhookEndpointDisabled(
  deps: Deps,
  viewer: MerchantManager,
  raw: SetDisabledInput,
): Promise<WebhookEndpointView> {
  requireManager(viewer, 'webhooks:manage');
  const { endpointId, disabled } = parseInput(setDisabledInput, raw);
  const where = and(eq(webhookEndpoints.id, endpointId), eq(webhookEndpoints.merchantId, viewer.merchantId));
  const row = await deps.db.transaction(async (tx) => {
    const [current] = await tx.select().from(webhookEndpoints).where(where).for('update');
    if (!current) throw new DomainError('NOT_FOUND', 'No such webhook endpoint');
    // Enabling closes the circuit, so enabling an enabled endpoint whose circuit is open is a change.
    const circuitClosed = current.consecutiveFailures === 0 && current.circuitOpenUntil === null;
    if (current.disabled === disabled && (disabled || circuitClosed)) return current;
    const [updated] = await tx
      .update(webhookEndpoints)
      .set(disabled ? { disabled } : { disabled, consecutiveFailures: 0, circuitOpenUntil: null })
      .where(where)
      .returning();
    if (!updated) throw new Error('webhook endpoint update returned nothing');
    const action = disabled ? 'webhook_endpoint.disabled' : 'webhook_endpoint.enabled';
    const circuit = (row: WebhookEndpoint) =>
      disabled || circuitClosed
        ? {}
        : { consecutiveFailures: row.consecutiveFailures, circuitOpenUntil: row.circuitOpenUntil?.getTime() ?? null };
    const before = { disabled: current.disabled, ...circuit(current) };
    await audit(tx, viewer, action, endpointId, before, { disabled, ...circuit(updated) });
    return updated;
  });
  return toEndpointView(row);
}

/**
 * A new signing secret, answered once. The previous one keeps signing beside it for
 * WEBHOOK_SECRET_OVERLAP_SECONDS, so receivers can switch without missing a delivery.
 */
export async function rotateWebhookSecret(
  deps: Deps,
  viewer: MerchantManager,
  raw: EndpointIdInput,
): Promise<{ endpoint: WebhookEndpointView; secret: string }> {
  requireManager(viewer, 'webhooks:manage');
  const { endpointId } = parseInput(endpointIdInput, raw);
  const current = await merchantEndpoint(deps, viewer.merchantId, endpointId);
  const secret = newWebhookSecret();
  const row = await deps.db.transaction(async (tx) => {
    const [updated] = await tx
      .update(webhookEndpoints)
      .set({
        secret,
        previousSecret: current.secret,
        previousSecretUntil: new Date(deps.now() + deps.config.webhooks.secretOverlapSeconds * 1000),
      })
      .where(and(eq(webhookEndpoints.id, endpointId), eq(webhookEndpoints.secret, current.secret)))
      .returning();
    if (!updated) throw new DomainError('BAD_USER_INPUT', 'The secret was rotated concurrently: retry');
    // Never a secret in the log: only when the previous one stops signing.
    await audit(tx, viewer, 'webhook_endpoint.secret_rotated', endpointId, null, {
      previous_secret_until: updated.previousSecretUntil?.toISOString() ?? null,
    });
    return updated;
  });
  return { endpoint: toEndpointView(row), secret };
}
