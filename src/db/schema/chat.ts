import { sql } from 'drizzle-orm';
import { bigint, boolean, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import { bots } from './integration.js';
import { agentGroups, agents, merchants } from './merchants.js';
import { visitors } from './visitors.js';

// The chat: conversations, their messages and the files those messages carry.

/** Conversation lifecycle: waiting for an agent, with an agent, history. */
export type ConversationState = 'queued' | 'active' | 'closed';
/** Who wrote a message; `system` messages record assignment, transfer, closing and rating; `bot`: a merchant's bot (docs/integration.md "Bots"). */
export type SenderType = 'visitor' | 'agent' | 'system' | 'bot';
export type AttachmentKind = 'image' | 'file' | 'video' | 'voice';

/**
 * Conversations between a visitor and the merchant's agents. At most one open (queued or
 * active) per visitor and merchant, enforced by a partial unique index; every state change is
 * a compare-and-set on `state` and `version`. `last_seq` hands out message sequence numbers in
 * the transaction that stores the message (the row lock orders concurrent senders).
 */
export const conversations = pgTable(
  'conversations',
  {
    id: text('id').primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    /** The assigned agent; null while queued (and kept on a closed conversation for history). */
    agentId: text('agent_id').references(() => agents.id, { onDelete: 'set null' }),
    visitorId: text('visitor_id')
      .notNull()
      .references(() => visitors.id, { onDelete: 'cascade' }),
    /** The group whose queue it waits in (null: the merchant's default group). */
    groupId: text('group_id').references(() => agentGroups.id, { onDelete: 'set null' }),
    state: text('state').$type<ConversationState>().notNull().default('queued'),
    /** Bumped by every transition: the compare-and-set token. */
    version: integer('version').notNull().default(1),
    /** The seq of the newest message (0: none yet). */
    lastSeq: integer('last_seq').notNull().default(0),
    /** The last seq each side has read; unread counts derive from them. */
    visitorReadSeq: integer('visitor_read_seq').notNull().default(0),
    agentReadSeq: integer('agent_read_seq').notNull().default(0),
    /** Unix seconds of the last activity (the `chatting` entry's timestamp). */
    timestamp: bigint('timestamp', { mode: 'number' }).notNull(),
    /** Unix seconds when pinned; 0 when not pinned. */
    pinnedAt: bigint('pinned_at', { mode: 'number' }).notNull().default(0),
    /** The `chatting` entry's `bot`: 0 no bot took part, 1 a bot holds it now, 2 a bot handed it off to humans. */
    bot: integer('bot').notNull().default(0),
    /**
     * The bot that holds it (state `active`, no agent); null once handed off, when
     * `handed_off_bot_id` names it instead (docs/integration.md "Bots").
     */
    botId: text('bot_id').references(() => bots.id, { onDelete: 'set null' }),
    /**
     * The bot that held it until its hand-off (whatever the reason); null while a bot holds it or
     * when none ever did. Only this bot's repeated hand-off is answered as done; others are refused.
     */
    handedOffBotId: text('handed_off_bot_id').references(() => bots.id, { onDelete: 'set null' }),
    /**
     * While a bot holds it: when the bot must have answered the oldest unanswered visitor message
     * (BOT_HANDOFF_TIMEOUT_SECONDS); the sweep hands off conversations past it, on any instance.
     */
    botDueAt: timestamp('bot_due_at', { withTimezone: true }),
    accountState: text('account_state').notNull().default('normal'),
    historyOnlyMine: boolean('history_only_mine').notNull().default(false),
    /** Summary of the last message, updated with it (the `chatting` entry's items). */
    items: jsonb('items').$type<unknown[]>().notNull().default([]),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    /** When it (re-)entered the queue: the queue drains oldest first by this. */
    queuedAt: timestamp('queued_at', { withTimezone: true }).notNull().defaultNow(),
    assignedAt: timestamp('assigned_at', { withTimezone: true }),
    closedAt: timestamp('closed_at', { withTimezone: true }),
    /** `visitor`, `agent` or `idle`. */
    closedBy: text('closed_by'),
    ratingScore: integer('rating_score'),
    ratingResolved: boolean('rating_resolved'),
    ratingComment: text('rating_comment'),
    ratedAt: timestamp('rated_at', { withTimezone: true }),
    /**
     * Set when nobody could answer (out of hours, no agent online): a message left. It waits in
     * the list of messages left for an agent to take it, routing and the idle close leave it be.
     */
    leftAt: timestamp('left_at', { withTimezone: true }),
    /** `closed` (out of business hours) or `no_agent`. */
    leftReason: text('left_reason'),
    /** The contact details the visitor left (the merchant's `contact_fields`). */
    contact: jsonb('contact').$type<Record<string, string>>(),
    /** The page the visitor started the conversation on (assign's `entry_page`), for the routing rules. */
    entryPage: text('entry_page'),
    /** Skills an agent needs to take it under the SKILLS policy: the group's and the matching rules'. */
    requiredSkills: jsonb('required_skills').$type<string[]>().notNull().default([]),
    /** Queue order: higher first, FIFO within a priority (the merchant's rules set it). */
    priority: integer('priority').notNull().default(0),
    /**
     * The queue position last told to the visitor (`conversation.queued`, `conversation.queue_position`):
     * each drain, under the merchant's lock, tells the visitors whose position moved since (docs/availability.md).
     */
    queuePositionTold: integer('queue_position_told'),
  },
  (t) => [
    // One open conversation per visitor and merchant: the database decides, not a read-then-write.
    uniqueIndex('conversations_one_open').on(t.merchantId, t.visitorId).where(sql`${t.state} <> 'closed'`),
    index('conversations_queue').on(t.merchantId, t.queuedAt).where(sql`${t.state} = 'queued'`),
    index('conversations_agent_active').on(t.agentId).where(sql`${t.state} = 'active'`),
    index('conversations_visitor').on(t.visitorId, t.createdAt),
    index('conversations_left')
      .on(t.merchantId, t.leftAt)
      .where(sql`${t.state} = 'queued' and ${t.leftAt} is not null`),
    index('conversations_bot_due').on(t.botDueAt).where(sql`${t.botDueAt} is not null`),
  ],
);

/** Uploaded files; referenced by messages of type image, file, video and voice. */
export const attachments = pgTable(
  'attachments',
  {
    id: text('id').primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    /** `visitor` or `agent`, and its id: only the uploader may send it. */
    uploaderType: text('uploader_type').$type<'visitor' | 'agent'>().notNull(),
    uploaderId: text('uploader_id').notNull(),
    kind: text('kind').$type<AttachmentKind>().notNull(),
    /** Decided from the bytes, never from the name or the client's Content-Type. */
    mime: text('mime').notNull(),
    size: bigint('size', { mode: 'number' }).notNull(),
    /** The original file name, sanitised; shown to people only. */
    name: text('name').notNull(),
    storageKey: text('storage_key').notNull(),
    thumbnailKey: text('thumbnail_key'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    /** Set when a message references it; unreferenced uploads are removed after a while. */
    referencedAt: timestamp('referenced_at', { withTimezone: true }),
  },
  (t) => [
    index('attachments_merchant').on(t.merchantId),
    index('attachments_unreferenced').on(t.createdAt).where(sql`${t.referencedAt} is null`),
  ],
);

/** Messages of a conversation, ordered by `seq` (1, 2, 3… without holes), never by time. */
export const messages = pgTable(
  'messages',
  {
    id: text('id').primaryKey(),
    conversationId: text('conversation_id')
      .notNull()
      .references(() => conversations.id, { onDelete: 'cascade' }),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    visitorId: text('visitor_id')
      .notNull()
      .references(() => visitors.id, { onDelete: 'cascade' }),
    seq: integer('seq').notNull(),
    senderType: text('sender_type').$type<SenderType>().notNull(),
    /** The visitor uid or agent id; empty for system messages. */
    senderId: text('sender_id').notNull().default(''),
    /** The sender's idempotency key: a retried send returns the stored row. Null for system messages. */
    clientMsgId: text('client_msg_id'),
    /** `text`, `image`, `file`, `voice`, `video` or `system`. */
    type: text('type').notNull(),
    content: text('content').notNull().default(''),
    attachmentId: text('attachment_id').references(() => attachments.id, { onDelete: 'set null' }),
    /** Structured detail of a system message (who was assigned, the rating…). */
    meta: jsonb('meta').$type<Record<string, unknown>>(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    recalledAt: timestamp('recalled_at', { withTimezone: true }),
  },
  (t) => [
    uniqueIndex('messages_conversation_seq').on(t.conversationId, t.seq),
    // One stored message per sender and key across all the visitor's conversations: a retry that
    // races a close (and so lands in a new conversation) hits this index, not a second row.
    uniqueIndex('messages_sender_client_msg_id').on(t.visitorId, t.senderType, t.senderId, t.clientMsgId),
    index('messages_visitor').on(t.visitorId, t.createdAt),
  ],
);

export type Conversation = typeof conversations.$inferSelect;
export type Message = typeof messages.$inferSelect;
export type Attachment = typeof attachments.$inferSelect;
