import { bigserial, index, jsonb, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * Events committed with the rows they describe and published after the commit; whatever a
 * crash left here is published by any instance's drain (see src/resolvers/outbox/).
 * `order_key` names the sequence a row belongs to (a visitor's conversations, a merchant's
 * business hours, a webhook's order key): rows of one key leave in `id` order, one publisher at
 * a time; rows of different keys are published independently.
 */
export const eventOutbox = pgTable(
  'event_outbox',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    orderKey: text('order_key').notNull().default(''),
    channel: text('channel').notNull(),
    event: text('event').notNull(),
    data: jsonb('data').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    /**
     * Set on the rows of a send that found no earlier row of its key pending: the sending instance
     * publishes them itself right after its commit, and every other publisher leaves the key until
     * then (src/resolvers/outbox/claimed.ts, "owned publication"). Null on every other row.
     */
    claimedUntil: timestamp('claimed_until', { withTimezone: true }),
  },
  (t) => [index('event_outbox_created').on(t.createdAt), index('event_outbox_key').on(t.orderKey, t.id)],
);
