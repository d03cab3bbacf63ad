import { sql } from 'drizzle-orm';
import {
  bigint,
  bigserial,
  boolean,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';

/** Feature switches of the visitor widget; a key that is absent is "not configured". */
export type FeatureSwitches = Partial<
  Record<
    'voice' | 'sound' | 'upload_file' | 'upload_img' | 'emoji' | 'session_invite_rating' | 'session_invite_resolved',
    string
  >
>;

/**
 * A business-hours calendar (src/resolvers/availability/business-hours.ts): local times in
 * minutes of the day, ISO weekdays (1 Monday … 7 Sunday), ISO dates.
 */
/**
 * A merchant's routing rule (docs/availability.md "Skills and priority"): when the visitor's
 * attribute equals a value, or the entry page contains a text, a new conversation requires a
 * skill and/or gets a priority.
 */
export interface RoutingRule {
  attribute?: string;
  equals?: string;
  pageContains?: string;
  skill?: string;
  priority?: number;
}

export interface BusinessHoursCalendar {
  timezone: string;
  weekly: { day: number; start: number; end: number }[];
  holidays: string[];
  exceptions: { date: string; start: number; end: number }[];
}

export interface WorkbenchExtensions {
  nav: unknown[];
  chat_actions: unknown[];
  side_iframes: unknown[];
  flags: Record<string, unknown>;
  account_level_options: Record<string, unknown>;
}

export const merchants = pgTable('merchants', {
  id: text('id').primaryKey(),
  /** Business id, used in the channel `global-{bid}`. */
  bid: text('bid').notNull().unique(),
  appname: text('appname').notNull(),
  /** Public application key of the real-time connection and the visitor widget. */
  appkey: text('appkey').notNull().unique(),
  /** Secret for HMAC-signed identified visitors (`user_hash`); never sent to a client. */
  identitySecret: text('identity_secret').notNull(),
  verified: boolean('verified').notNull().default(false),
  paid: bigint('paid', { mode: 'number' }).notNull().default(0),
  switches: jsonb('switches').$type<FeatureSwitches>().notNull().default({}),
  imageMaxBytes: bigint('image_max_bytes', { mode: 'number' }).notNull().default(20971520),
  fileMaxBytes: bigint('file_max_bytes', { mode: 'number' }).notNull().default(20971520),
  videoMaxBytes: bigint('video_max_bytes', { mode: 'number' }).notNull().default(104857600),
  voiceMaxBytes: bigint('voice_max_bytes', { mode: 'number' }).notNull().default(20971520),
  /** Extra workbench `setting` members whose shape the spec leaves open. */
  workbenchSettings: jsonb('workbench_settings').$type<Record<string, unknown>>().notNull().default({}),
  extensions: jsonb('extensions')
    .$type<WorkbenchExtensions>()
    .notNull()
    .default({ nav: [], chat_actions: [], side_iframes: [], flags: {}, account_level_options: {} }),
  /**
   * Bumped by every write of the settings above (`merchant:set`); each instance's configuration
   * cache is invalidated by a bus event from the same write (docs/operations.md "Configuration cache").
   */
  settingsVersion: integer('settings_version').notNull().default(1),
  /** Concurrent active conversations an agent takes by default (an agent may override it). */
  maxConcurrentChats: integer('max_concurrent_chats').notNull().default(5),
  /** An open conversation with no message for this long is closed (0: never). */
  idleCloseMinutes: integer('idle_close_minutes').notNull().default(30),
  /** Bytes of attachments the merchant may keep. */
  storageQuotaBytes: bigint('storage_quota_bytes', { mode: 'number' }).notNull().default(10737418240),
  /** The merchant's business hours; null: always open. A group may have its own. */
  businessHours: jsonb('business_hours').$type<BusinessHoursCalendar>(),
  /**
   * The mobile number verified by SMS when the merchant registered itself (docs/desk.md): one
   * number registers at most one merchant. Null for merchants made otherwise (CLI, demo, SMS off).
   */
  registeredMobile: text('registered_mobile').unique(),
  /** Contact details a visitor leaving a message is asked for (`name`, `email`, `phone`). */
  contactFields: jsonb('contact_fields').$type<string[]>().notNull().default([]),
  /** Rules giving new conversations required skills and a priority (docs/availability.md). */
  routingRules: jsonb('routing_rules').$type<RoutingRule[]>().notNull().default([]),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

export const agentGroups = pgTable(
  'agent_groups',
  {
    id: text('id').primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    isDefault: boolean('is_default').notNull().default(false),
    position: integer('position').notNull().default(0),
    /** The group's own business hours; null: the merchant's. */
    businessHours: jsonb('business_hours').$type<BusinessHoursCalendar>(),
    /** Routing policy (src/resolvers/availability/routing/): `LEAST_BUSY`, `ROUND_ROBIN`, `SKILLS`, `LAST_AGENT`. */
    routing: text('routing').notNull().default('LEAST_BUSY'),
    /** Round robin's cursor: the agent it gave the last conversation to (in the row, not in memory). */
    routingCursor: text('routing_cursor'),
    /** Skills every conversation of the group requires (the SKILLS policy; docs/availability.md). */
    requiredSkills: jsonb('required_skills').$type<string[]>().notNull().default([]),
  },
  (t) => [
    uniqueIndex('agent_groups_merchant_name').on(t.merchantId, t.name),
    // Exactly one default group per merchant.
    uniqueIndex('agent_groups_one_default').on(t.merchantId).where(sql`${t.isDefault}`),
  ],
);

export const agents = pgTable(
  'agents',
  {
    /** Public agent id, used in the channel `agent-{agent_id}`. */
    id: text('id').primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    groupId: text('group_id').references(() => agentGroups.id, { onDelete: 'set null' }),
    /** Login name as typed at creation; logins match it case-insensitively (unique index). */
    username: text('username').notNull(),
    passwordHash: text('password_hash').notNull(),
    nickname: text('nickname').notNull(),
    avatar: text('avatar').notNull().default(''),
    /** Role: `agent`, `admin`, `ticket_agent`. */
    level: text('level').notNull().default('agent'),
    /** State chosen by the agent (`busy`, `away`); null means "computed from connections". */
    manualState: text('manual_state'),
    disabled: boolean('disabled').notNull().default(false),
    /** Overrides the merchant's `max_concurrent_chats` for this agent; null: the merchant's. */
    maxConcurrentChats: integer('max_concurrent_chats'),
    /** When a conversation was last assigned to it: ties in routing go to who waited longest. */
    lastAssignedAt: timestamp('last_assigned_at', { withTimezone: true }),
    /** What the agent can handle: the SKILLS policy routes a conversation to agents holding all it requires. */
    skills: jsonb('skills').$type<string[]>().notNull().default([]),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('agents_username_ci').on(sql`lower(${t.username})`), index('agents_merchant').on(t.merchantId)],
);

export const visitors = pgTable(
  'visitors',
  {
    /** The visitor uid; generated by the server, never taken from a request. */
    id: text('id').primaryKey(),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    /** The merchant's own user id of an identified visitor (HMAC-verified); null when anonymous. */
    externalUserId: text('external_user_id'),
    nickname: text('nickname').notNull(),
    avatar: text('avatar').notNull().default(''),
    lang: text('lang').notNull().default('en'),
    /** Unguessable real-time channel name, generated by the server. */
    channel: text('channel').notNull().unique(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('visitors_merchant_external').on(t.merchantId, t.externalUserId)],
);

/** The merchant's visitor attribute configuration: which attributes exist and how they show. */
export const visitorAttributeDefs = pgTable(
  'visitor_attribute_defs',
  {
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    key: text('key').notNull(),
    label: text('label').notNull(),
    /** `text`, `number`, `boolean`, `image`, `url`… */
    type: text('type').notNull().default('text'),
    editable: boolean('editable').notNull().default(false),
    position: integer('position').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.merchantId, t.key] })],
);

export const visitorAttributes = pgTable(
  'visitor_attributes',
  {
    visitorId: text('visitor_id')
      .notNull()
      .references(() => visitors.id, { onDelete: 'cascade' }),
    key: text('key').notNull(),
    value: jsonb('value').$type<string | number | boolean | null>(),
  },
  (t) => [primaryKey({ columns: [t.visitorId, t.key] })],
);

export const visitorTokens = pgTable(
  'visitor_tokens',
  {
    /** SHA-256 of the token: a leaked table opens no conversation. */
    tokenHash: text('token_hash').primaryKey(),
    visitorId: text('visitor_id')
      .notNull()
      .references(() => visitors.id, { onDelete: 'cascade' }),
    merchantId: text('merchant_id')
      .notNull()
      .references(() => merchants.id, { onDelete: 'cascade' }),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index('visitor_tokens_visitor').on(t.visitorId)],
);

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
    /** The bot that holds it (state `active`, no agent); null once handed off (docs/integration.md "Bots"). */
    botId: text('bot_id').references(() => bots.id, { onDelete: 'set null' }),
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

export type Merchant = typeof merchants.$inferSelect;
export type Agent = typeof agents.$inferSelect;
export type Visitor = typeof visitors.$inferSelect;
export type Conversation = typeof conversations.$inferSelect;
export type Message = typeof messages.$inferSelect;
export type Attachment = typeof attachments.$inferSelect;
export type AuditRow = typeof auditLog.$inferSelect;

// ---- the desk's everyday tools (docs/desk.md "Canned responses", "Labels", "Internal notes") ----

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
