import { randomBytes } from 'node:crypto';
import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import { hashPassword } from '../auth/passwords.js';
import { type Agent, agentGroups, agents, FEATURE_SWITCH_KEYS, merchants } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import { newId, newSecret } from '../ids.js';
import { publishEvent } from './channels.js';
import { endAllSessions } from './desk/sessions.js';
import { displayName, languageTag, parseInput, publishEventInput, text } from './inputs.js';
import { announceMerchantConfigChanged } from './merchant-config.js';
import { issueVisitorToken, revokeVisitorToken, userHashFor } from './visitor.js';

/**
 * Operator actions (the admin CLI is their adapter): create merchants and agents, change a
 * merchant's settings, disable an agent, reset a password, issue or revoke visitor tokens,
 * publish a test event. Each validates its own input and reuses the domain functions the gateway
 * runs. Every write of a merchant's configuration announces it (merchant-config.ts), so every
 * instance's configuration cache drops its copy.
 */

/** Ends stored Sessions by ID; implemented over the HTTP session store by the adapter. */
export interface SessionTerminator {
  destroy(sessionId: string): Promise<void>;
}

export const LEVELS = ['agent', 'admin', 'ticket_agent'] as const;

const bid = z.string().regex(/^[a-z0-9][a-z0-9_-]{1,31}$/, 'must be 2-32 lowercase letters, digits, _ or -');
const username = z.string().regex(/^[A-Za-z0-9_.@-]{1,64}$/, 'must be 1-64 letters, digits or _ . @ -');
const password = z.string().min(8, 'must be at least 8 characters').max(256, 'must be at most 256 characters');

export const createMerchantInput = z.object({
  bid,
  appname: text(64).refine((s) => s.trim().length > 0, 'is required'),
  appkey: z
    .string()
    .regex(/^[A-Za-z0-9_-]{8,128}$/, 'must be 8-128 letters, digits, _ or -')
    .optional(),
  verified: z.boolean().optional(),
});

// Feature switches (FEATURE_SWITCH_KEYS) take `on`, `off`, or `unset` (not configured: absent from the bootstrap).
const LIMIT_COLUMNS = {
  image_max_bytes: 'imageMaxBytes',
  file_max_bytes: 'fileMaxBytes',
  video_max_bytes: 'videoMaxBytes',
  voice_max_bytes: 'voiceMaxBytes',
} as const;
/** The upload limits' setting keys (the admin page's fields, through the pages' contract). */
export const UPLOAD_LIMIT_KEYS = Object.keys(LIMIT_COLUMNS) as (keyof typeof LIMIT_COLUMNS)[];
/** Chat settings: integers within their bounds. */
const CHAT_SETTINGS = {
  max_concurrent_chats: { column: 'maxConcurrentChats', min: 1, max: 1000 },
  idle_close_minutes: { column: 'idleCloseMinutes', min: 0, max: 10080 },
} as const;
/** Every key `merchant:set` accepts. */
export const MERCHANT_SETTING_KEYS = [
  ...FEATURE_SWITCH_KEYS,
  ...UPLOAD_LIMIT_KEYS,
  ...(Object.keys(CHAT_SETTINGS) as (keyof typeof CHAT_SETTINGS)[]),
  'appname',
] as const;
/** Upload limits: whole bytes, at most 4 GiB. */
const MAX_UPLOAD_LIMIT = 4 * 1024 ** 3;

export const merchantSettingInput = z.object({
  bid,
  key: z.enum(MERCHANT_SETTING_KEYS),
  value: z.string().max(256),
});

export const createAgentInput = z.object({
  bid,
  username,
  password: password.optional(),
  nickname: displayName(64).optional(),
  level: z.enum(LEVELS).default('agent'),
  group: text(64).optional(),
});

export const agentRef = z.object({ username });
type AgentRef = z.input<typeof agentRef>;
export const resetPasswordInput = agentRef.extend({ password: password.optional() });

/** A password an operator hands over once: 16 URL-safe characters (96 bits). */
const generatePassword = () => randomBytes(12).toString('base64url');

/**
 * Creates a merchant with its `Default` agent group. Returns the public appkey and the
 * identity secret (for signing identified visitors' `user_hash`), shown to the operator once.
 */
export async function createMerchant(deps: Deps, given: z.input<typeof createMerchantInput>) {
  const input = parseInput(createMerchantInput, given);
  const id = newId('m');
  const appkey = input.appkey ?? `${input.bid}-${newSecret(12)}`;
  const identitySecret = newSecret(32);
  const inserted = await deps.db
    .insert(merchants)
    .values({ id, bid: input.bid, appname: input.appname, appkey, identitySecret, verified: input.verified ?? false })
    .onConflictDoNothing()
    .returning({ id: merchants.id });
  if (inserted.length === 0) throw new DomainError('BAD_USER_INPUT', 'bid or appkey is already taken');
  await deps.db.insert(agentGroups).values({ id: newId('g'), merchantId: id, name: 'Default', isDefault: true });
  await announceMerchantConfigChanged(deps, id);
  return { merchantId: id, bid: input.bid, appname: input.appname, appkey, identitySecret };
}

/**
 * Changes one setting of a merchant (a feature switch, an upload limit, a chat setting or its
 * appname), bumps `settings_version` in the same statement and announces the change: every
 * instance answers the new value from its next bootstrap (README "Configuration cache").
 */
export async function setMerchantSetting(deps: Deps, given: z.input<typeof merchantSettingInput>) {
  const input = parseInput(merchantSettingInput, given);
  const merchant = await merchantByBid(deps, input.bid);
  const set: Partial<Record<string, unknown>> = {};
  let value: string | number | null;
  const key = input.key;
  if ((FEATURE_SWITCH_KEYS as readonly string[]).includes(key)) {
    if (!['on', 'off', 'unset'].includes(input.value)) throw badSetting(key, 'must be on, off or unset');
    value = input.value === 'unset' ? null : input.value;
    set.switches =
      value === null
        ? sql`${merchants.switches} - ${key}::text`
        : sql`${merchants.switches} || ${JSON.stringify({ [key]: value })}::jsonb`;
  } else if (key in LIMIT_COLUMNS) {
    value = integerSetting(key, input.value, 0, MAX_UPLOAD_LIMIT);
    set[LIMIT_COLUMNS[key as keyof typeof LIMIT_COLUMNS]] = value;
  } else if (key in CHAT_SETTINGS) {
    const spec = CHAT_SETTINGS[key as keyof typeof CHAT_SETTINGS];
    value = integerSetting(key, input.value, spec.min, spec.max);
    set[spec.column] = value;
  } else {
    value = parseInput(z.object({ appname: text(64).refine((s) => s.trim().length > 0, 'is required') }), {
      appname: input.value,
    }).appname;
    set.appname = value;
  }
  const [updated] = await deps.db
    .update(merchants)
    .set({ ...set, settingsVersion: sql`${merchants.settingsVersion} + 1` })
    .where(eq(merchants.id, merchant.id))
    .returning({ settingsVersion: merchants.settingsVersion });
  const announced = await announceMerchantConfigChanged(deps, merchant.id);
  return { bid: input.bid, key, value, settingsVersion: updated?.settingsVersion, announced };
}

const badSetting = (key: string, message: string) => new DomainError('BAD_USER_INPUT', `${key} ${message}`);

function integerSetting(key: string, raw: string, min: number, max: number): number {
  if (!/^\d{1,12}$/.test(raw)) throw badSetting(key, 'must be a whole number');
  const n = Number(raw);
  if (n < min || n > max) throw badSetting(key, `must be between ${min} and ${max}`);
  return n;
}

/** Creates an agent of a merchant; a password is generated (and returned once) when none is given. */
export async function createAgent(deps: Deps, given: z.input<typeof createAgentInput>) {
  const input = parseInput(createAgentInput, given);
  const merchant = await merchantByBid(deps, input.bid);
  const [group] = await deps.db
    .select({ id: agentGroups.id })
    .from(agentGroups)
    .where(
      and(
        eq(agentGroups.merchantId, merchant.id),
        input.group ? eq(agentGroups.name, input.group) : eq(agentGroups.isDefault, true),
      ),
    )
    .limit(1);
  if (input.group && !group)
    throw new DomainError('NOT_FOUND', `No agent group ${input.group} in merchant ${input.bid}`);
  const plain = input.password ?? generatePassword();
  const id = newId('a');
  const inserted = await deps.db
    .insert(agents)
    .values({
      id,
      merchantId: merchant.id,
      groupId: group?.id ?? null,
      username: input.username,
      passwordHash: await hashPassword(plain),
      nickname: input.nickname ?? input.username,
      level: input.level,
    })
    .onConflictDoNothing()
    .returning({ id: agents.id });
  if (inserted.length === 0) throw new DomainError('BAD_USER_INPUT', 'username is already taken');
  return {
    agentId: id,
    username: input.username,
    bid: input.bid,
    level: input.level,
    ...(input.password ? {} : { password: plain }),
  };
}

/**
 * Disables an agent: it can no longer log in, and every Session it has is destroyed and
 * announced (`session.ended`, reason `disabled`) so its open subscriptions on every instance end.
 */
export async function disableAgent(deps: Deps, given: AgentRef, sessions: SessionTerminator) {
  const agent = await findAgent(deps, parseInput(agentRef, given).username);
  await deps.db.update(agents).set({ disabled: true }).where(eq(agents.id, agent.id));
  const sessionsEnded = await endAllSessions(deps, sessions, agent.id, 'disabled');
  return { agentId: agent.id, username: agent.username, disabled: true, sessionsEnded };
}

/** Enables a disabled agent again (its old Sessions stay ended). */
export async function enableAgent(deps: Deps, given: AgentRef) {
  const agent = await findAgent(deps, parseInput(agentRef, given).username);
  await deps.db.update(agents).set({ disabled: false }).where(eq(agents.id, agent.id));
  return { agentId: agent.id, username: agent.username, disabled: false };
}

/**
 * Sets a new password (generated and returned once when none is given) and ends the agent's
 * Sessions, so whoever knew the old one is logged out everywhere.
 */
export async function resetAgentPassword(
  deps: Deps,
  given: z.input<typeof resetPasswordInput>,
  sessions: SessionTerminator,
) {
  const input = parseInput(resetPasswordInput, given);
  const agent = await findAgent(deps, input.username);
  const plain = input.password ?? generatePassword();
  await deps.db
    .update(agents)
    .set({ passwordHash: await hashPassword(plain) })
    .where(eq(agents.id, agent.id));
  const sessionsEnded = await endAllSessions(deps, sessions, agent.id, 'password_reset');
  return { agentId: agent.id, username: agent.username, sessionsEnded, ...(input.password ? {} : { password: plain }) };
}

export const operatorVisitorTokenInput = z.object({
  appkey: text(128),
  userId: text(128).optional(),
  nickname: displayName(64).optional(),
  lang: languageTag.optional(),
});

/**
 * Issues a visitor token as the merchant's own backend would: anonymous, or for `userId`
 * signed with the merchant's identity secret (the same uid every time).
 */
export async function issueOperatorVisitorToken(deps: Deps, given: z.input<typeof operatorVisitorTokenInput>) {
  const input = parseInput(operatorVisitorTokenInput, given);
  let userHash: string | undefined;
  if (input.userId !== undefined) {
    const [merchant] = await deps.db
      .select({ secret: merchants.identitySecret })
      .from(merchants)
      .where(eq(merchants.appkey, input.appkey))
      .limit(1);
    if (!merchant) throw new DomainError('APPKEY_INVALID', 'Unknown appkey');
    userHash = userHashFor(merchant.secret, input.userId);
  }
  return issueVisitorToken(
    deps,
    { appkey: input.appkey, userId: input.userId, userHash, nickname: input.nickname, lang: input.lang },
    'operator',
  );
}

export const revokeTokenInput = z.object({ token: text(512) });

/** Revokes a visitor token; `revoked` is false when no such token exists. */
export async function revokeOperatorVisitorToken(deps: Deps, given: z.input<typeof revokeTokenInput>) {
  const { token } = parseInput(revokeTokenInput, given);
  return { revoked: await revokeVisitorToken(deps, token) };
}

/** Publishes an event on a channel, exactly as POST /internal/events does. */
export async function publishTestEvent(deps: Deps, given: z.input<typeof publishEventInput>) {
  const event = await publishEvent(deps, parseInput(publishEventInput, given));
  return { id: event.id, channel: event.channel, event: event.event };
}

async function merchantByBid(deps: Deps, value: string) {
  const [merchant] = await deps.db.select().from(merchants).where(eq(merchants.bid, value)).limit(1);
  if (!merchant) throw new DomainError('NOT_FOUND', `No merchant with bid ${value}`);
  return merchant;
}

async function findAgent(deps: Deps, name: string): Promise<Agent> {
  const [agent] = await deps.db
    .select()
    .from(agents)
    .where(eq(sql`lower(${agents.username})`, name.toLowerCase()))
    .limit(1);
  if (!agent) throw new DomainError('NOT_FOUND', `No agent ${name}`);
  return agent;
}
