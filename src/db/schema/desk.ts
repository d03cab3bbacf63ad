import { sql } from 'drizzle-orm';
import {
  bigserial,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import { conversations } from './chat.js';
import { agents, merchants } from './merchants.js';
import { visitors } from './visitors.js';

// The merchant's desk: the audit log and the agents' everyday tools (docs/desk.md "Canned responses",
// "Labels", "Internal notes").

/** Who did a privileged action: an agent (through its Session), an API key, the operator CLI, or Parley itself. */
export type AuditActorKind = 'agent' | 'api_key' | 'operator' | 'system';

/**
 * The audit log: one row per privileged action (agents, groups, settings, keys, webhooks,
 * Session ends, exports), written in the same transaction as the change it records. Append-only:
 * no code path updates or deletes a row, and the API only reads it.
 */
export const auditLog = pgTable(
  'audit_log',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    actorKind: text('actor_kind').$type<AuditActorKind>().notNull(),
    /** The agent id, API key id, or a fixed name (`cli`, `parley`) for the operator and the system. */
    actorId: text('actor_id').notNull(),
    /** The actor's display name at the time (an agent's nickname): the log reads without joins. */
    actorName: text('actor_name').notNull(),
    /** What was done, in dot.case: `agent.created`, `settings.updated`, `session.ended`… */
    action: text('action').notNull(),
    targetType: text('target_type').notNull(),
    targetId: text('target_id').notNull(),
    /** The target's recorded fields before and after (null: it did not exist / no longer exists). */
    before: jsonb('before').$type<Record<string, unknown> | null>(),
    after: jsonb('after').$type<Record<string, unknown> | null>(),
    /** The request's client address; null when the action came from no request (CLI, jobs). */
    clientAddress: text('client_address'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('audit_log_merchant_time').on(t.merchantId, t.createdAt, t.id)],
);

export type AuditRow = typeof auditLog.$inferSelect;

/**
 * Canned responses: the merchant's own (`agent_id` null, managed by administrators) and each
 * agent's personal ones. A shortcut is unique, case-insensitively, within its owner.
 */
export const cannedResponses = pgTable(
  'canned_responses',
  {
    id: text('id').primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    /** The owning agent of a personal response; null for the merchant's. */
    agentId: text('agent_id').references(() => agents.id, { onDelete: 'cascade' }),
    shortcut: text('shortcut').notNull(),
    content: text('content').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('canned_responses_owner_shortcut').on(
      t.merchantId,
      sql`coalesce(${t.agentId}, '')`,
      sql`lower(${t.shortcut})`,
    ),
  ],
);

/** Labels of a merchant, put on conversations by its agents. */
export const labels = pgTable(
  'labels',
  {
    id: text('id').primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    /** `#rrggbb`. */
    color: text('color').notNull().default('#64748b'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('labels_merchant_name').on(t.merchantId, sql`lower(${t.name})`)],
);

export const conversationLabels = pgTable(
  'conversation_labels',
  {
    conversationId: text('conversation_id')
      .notNull()
      .references(() => conversations.id, { onDelete: 'cascade' }),
    labelId: text('label_id')
      .notNull()
      .references(() => labels.id, { onDelete: 'cascade' }),
    /** The agent who put it on. */
    agentId: text('agent_id').references(() => agents.id, { onDelete: 'set null' }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.conversationId, t.labelId] }), index('conversation_labels_label').on(t.labelId)],
);

/**
 * Internal notes: agents-only remarks on a conversation. Deliberately not rows of `messages`:
 * they take no `seq`, so the visitor's history, seq-gap detection, unread counts and resume never
 * see them. `after_seq` is the conversation's `last_seq` when the note was written: the
 * workbench shows it after that message (then by time).
 */
export const conversationNotes = pgTable(
  'conversation_notes',
  {
    id: text('id').primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    conversationId: text('conversation_id')
      .notNull()
      .references(() => conversations.id, { onDelete: 'cascade' }),
    visitorId: text('visitor_id')
      .notNull()
      .references(() => visitors.id, { onDelete: 'cascade' }),
    /** The author; null once that agent is deleted. */
    agentId: text('agent_id').references(() => agents.id, { onDelete: 'set null' }),
    afterSeq: integer('after_seq').notNull(),
    content: text('content').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('conversation_notes_visitor').on(t.visitorId, t.createdAt)],
);

export type CannedResponse = typeof cannedResponses.$inferSelect;
export type Label = typeof labels.$inferSelect;
export type ConversationNote = typeof conversationNotes.$inferSelect;
