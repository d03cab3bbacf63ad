import { sql } from 'drizzle-orm';
import { bigserial, boolean, index, integer, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';
import { agentGroups, agents, merchants } from './merchants.js';

// The merchant's systems (docs/integration.md): bots, webhooks and API keys.

/**
 * A merchant's bots (docs/integration.md "Bots"): participants acting through their API key.
 * An enabled bot is the first responder of its group's new conversations (`groupId`), or of all
 * the merchant's when `groupId` is null.
 */
export const bots = pgTable(
  'bots',
  {
    id: text('id').primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    groupId: text('group_id').references(() => agentGroups.id, { onDelete: 'set null' }),
    /** The bot's API key (scopes conversations:read and messages:write), made with it. */
    apiKeyId: text('api_key_id')
      .notNull()
      .unique()
      .references(() => apiKeys.id, { onDelete: 'cascade' }),
    disabled: boolean('disabled').notNull().default(false),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('bots_merchant').on(t.merchantId, t.createdAt)],
);

export type Bot = typeof bots.$inferSelect;

/**
 * A merchant's webhook endpoints (docs/integration.md "Webhooks"). The signing secret is kept
 * as given to the merchant (it must sign); during a rotation the previous one signs too until
 * `previousSecretUntil`. `consecutiveFailures` and `circuitOpenUntil` are the circuit breaker.
 */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: text('id').primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    url: text('url').notNull(),
    description: text('description').notNull().default(''),
    /** Event types delivered to it. */
    events: jsonb('events').$type<string[]>().notNull(),
    secret: text('secret').notNull(),
    previousSecret: text('previous_secret'),
    previousSecretUntil: timestamp('previous_secret_until', { withTimezone: true }),
    disabled: boolean('disabled').notNull().default(false),
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    circuitOpenUntil: timestamp('circuit_open_until', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('webhook_endpoints_merchant').on(t.merchantId)],
);

/**
 * One row per event and endpoint: the delivery and its log. `seq` orders deliveries (oldest
 * first per endpoint and `orderKey`, the conversation); `id` is the stable `webhook-id`. A
 * claimed row's `nextAttemptAt` is its lease: an instance that dies mid-delivery leaves it due.
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    seq: bigserial('seq', { mode: 'number' }).primaryKey(),
    id: text('id').notNull().unique(),
    endpointId: text('endpoint_id')
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: 'cascade' }),
    merchantId: text('merchant_id').notNull(),
    event: text('event').notNull(),
    /** Deliveries with one key (a conversation, a visitor) go out in `seq` order. */
    orderKey: text('order_key').notNull(),
    /** The exact bytes sent on every attempt. */
    body: text('body').notNull(),
    /** `pending`, `delivered` or `failed`. */
    state: text('state').$type<'pending' | 'delivered' | 'failed'>().notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true }).notNull().defaultNow(),
    /** Set while an instance sends it (the lease's end). */
    leasedUntil: timestamp('leased_until', { withTimezone: true }),
    lastStatus: integer('last_status'),
    lastError: text('last_error'),
    lastLatencyMs: integer('last_latency_ms'),
    lastAttemptAt: timestamp('last_attempt_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    finishedAt: timestamp('finished_at', { withTimezone: true }),
  },
  (t) => [
    index('webhook_deliveries_due').on(t.nextAttemptAt).where(sql`${t.state} = 'pending'`),
    index('webhook_deliveries_order').on(t.endpointId, t.orderKey, t.seq).where(sql`${t.state} = 'pending'`),
    index('webhook_deliveries_endpoint').on(t.endpointId, t.seq),
    index('webhook_deliveries_leased').on(t.endpointId).where(sql`${t.leasedUntil} is not null`),
    index('webhook_deliveries_finished').on(t.finishedAt),
  ],
);

export type WebhookEndpoint = typeof webhookEndpoints.$inferSelect;
export type WebhookDelivery = typeof webhookDeliveries.$inferSelect;

/**
 * A merchant's API keys for its servers and bots (docs/integration.md "API keys"). Only the
 * SHA-256 of the whole key is kept (keys are 256-bit random, so a plain hash is enough) and a
 * short display prefix; the key itself is answered once, at creation.
 */
export const apiKeys = pgTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    /** Scopes (src/resolvers/integration/api-keys/scopes.ts). */
    scopes: jsonb('scopes').$type<string[]>().notNull(),
    /** SHA-256 (hex) of the whole key. */
    hash: text('hash').notNull().unique(),
    /** The key's first characters (`prly_` and a few more), to recognise it in a list. */
    displayPrefix: text('display_prefix').notNull(),
    /** The admin agent that created it; null when made otherwise (a bot's key, the CLI) or that agent is gone. */
    createdBy: text('created_by').references(() => agents.id, { onDelete: 'set null' }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    /** Updated at most once a minute per key (API_KEY_LAST_USED_WRITE_SECONDS). */
    lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
    expiresAt: timestamp('expires_at', { withTimezone: true }),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [index('api_keys_merchant').on(t.merchantId, t.createdAt)],
);

export type ApiKey = typeof apiKeys.$inferSelect;
