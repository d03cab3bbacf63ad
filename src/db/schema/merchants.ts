import { sql } from 'drizzle-orm';
import { bigint, boolean, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';
import type { BusinessHoursCalendar, RoutingRule } from './availability.js';

// Merchants and their agents: the tenancy every other table is scoped by.

/** The visitor widget's feature switches, by their stored (legacy) keys. */
export const FEATURE_SWITCH_KEYS = [
  'voice',
  'sound',
  'upload_file',
  'upload_img',
  'emoji',
  'session_invite_rating',
  'session_invite_resolved',
] as const;
/** Feature switches of the visitor widget; a key that is absent is "not configured". */
export type FeatureSwitches = Partial<Record<(typeof FEATURE_SWITCH_KEYS)[number], string>>;

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

export type Merchant = typeof merchants.$inferSelect;
export type Agent = typeof agents.$inferSelect;
