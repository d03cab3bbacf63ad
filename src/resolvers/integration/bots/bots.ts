import { and, count, eq } from 'drizzle-orm';
import { z } from 'zod';
import { type Bot, bots } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { DomainError } from '../../../errors.js';
import { newId } from '../../../ids.js';
import { groupFor } from '../../conversations/routing.js';
import { auditedAgent, recordAudit } from '../../desk/audit.js';
import { parseInput } from '../../inputs.js';
import type { Tx } from '../../outbox/enqueue.js';
import { type AgentViewer, requireAdmin } from '../../viewer.js';
import { issueApiKey, requireKeyRoom } from '../api-keys/keys.js';
import type { ApiKeyScope } from '../api-keys/scopes.js';
import { handOffAllOf } from './handoff.js';

/** A merchant's bots, managed by its admins (docs/integration.md "Bots"). */

export const MAX_BOTS = 20;
/** What a bot's key may do: read its conversations, send as the bot (and hand off). */
export const BOT_SCOPES: ApiKeyScope[] = ['conversations:read', 'messages:write'];

export interface BotView {
  id: string;
  name: string;
  /** The group whose new conversations it answers first; null: all the merchant's. */
  groupId: string | null;
  /** Its API key's id (revoking the key silences the bot; disabling the bot hands off its conversations). */
  apiKeyId: string;
  disabled: boolean;
  createdAt: number;
}

export const toBotView = (b: Bot): BotView => ({
  id: b.id,
  name: b.name,
  groupId: b.groupId,
  apiKeyId: b.apiKeyId,
  disabled: b.disabled,
  createdAt: b.createdAt.getTime(),
});

export const createBotInput = z.object({
  name: z.string().trim().min(1).max(64),
  groupId: z.string().min(1).max(64).optional(),
});
export type CreateBotInput = z.input<typeof createBotInput>;

export const botIdInput = z.object({ botId: z.string().min(1).max(64) });
export type BotIdInput = z.input<typeof botIdInput>;

export const setBotDisabledInput = botIdInput.extend({ disabled: z.boolean() });
export type SetBotDisabledInput = z.input<typeof setBotDisabledInput>;

const audit = (
  tx: Tx,
  viewer: AgentViewer,
  action: string,
  id: string,
  before: Record<string, unknown> | null,
  after: Record<string, unknown> | null,
) => recordAudit(tx, { ...auditedAgent(viewer), action, target: { type: 'bot', id }, before, after });

/**
 * Creates a bot and its API key (scopes conversations:read and messages:write) in one
 * transaction; the key is answered here and never again. An enabled bot answers its group's (or,
 * without a group, all the merchant's) new conversations first.
 */
export async function createBot(
  deps: Deps,
  viewer: AgentViewer,
  raw: CreateBotInput,
): Promise<{ bot: BotView; key: string }> {
  requireAdmin(viewer);
  const input = parseInput(createBotInput, raw);
  const [existing] = await deps.db.select({ n: count() }).from(bots).where(eq(bots.merchantId, viewer.merchantId));
  if ((existing?.n ?? 0) >= MAX_BOTS) throw new DomainError('LIMIT_REACHED', `A merchant has at most ${MAX_BOTS} bots`);
  // Its key is an API key like any other: it counts against the merchant's live keys.
  await requireKeyRoom(deps.db, viewer.merchantId);
  const groupId = input.groupId ? await groupFor(deps, viewer.merchantId, input.groupId) : null;
  return deps.db.transaction(async (tx) => {
    const issued = await issueApiKey(tx, {
      ...auditedAgent(viewer),
      name: `bot: ${input.name}`,
      scopes: BOT_SCOPES,
      createdBy: viewer.agentId,
      now: deps.now(),
    });
    const row = await insertBot(deps, tx, viewer, { name: input.name, groupId, apiKeyId: issued.apiKey.id });
    return { bot: toBotView(row), key: issued.key };
  });
}

/** Inserts a bot bound to an API key made in the same transaction, with its audit row. */
async function insertBot(
  deps: Deps,
  tx: Tx,
  viewer: AgentViewer,
  bot: { name: string; groupId: string | null; apiKeyId: string },
): Promise<Bot> {
  const [row] = await tx
    .insert(bots)
    .values({ id: newId('bot'), merchantId: viewer.merchantId, ...bot, createdAt: new Date(deps.now()) })
    .returning();
  if (!row) throw new Error('bot insert returned nothing');
  await audit(tx, viewer, 'bot.created', row.id, null, { name: row.name, group_id: row.groupId });
  return row;
}

/** The merchant's bots, oldest first. */
export async function listBots(deps: Deps, viewer: AgentViewer): Promise<BotView[]> {
  requireAdmin(viewer);
  const rows = await deps.db
    .select()
    .from(bots)
    .where(eq(bots.merchantId, viewer.merchantId))
    .orderBy(bots.createdAt, bots.id);
  return rows.map(toBotView);
}

/**
 * Disables a bot (it answers nothing more and routing skips it; the conversations it holds are
 * handed off to the agents, reason `disabled`) or enables it again. Asking for the state it is in
 * answers it unchanged and audits nothing; disabling again still hands off what it may hold (a
 * hand-off that an instance's crash cut short).
 */
export async function setBotDisabled(deps: Deps, viewer: AgentViewer, raw: SetBotDisabledInput): Promise<BotView> {
  requireAdmin(viewer);
  const { botId, disabled } = parseInput(setBotDisabledInput, raw);
  const where = and(eq(bots.id, botId), eq(bots.merchantId, viewer.merchantId));
  const row = await deps.db.transaction(async (tx) => {
    const [current] = await tx.select().from(bots).where(where).for('update');
    if (!current) throw new DomainError('NOT_FOUND', 'No such bot');
    if (current.disabled === disabled) return current;
    const [updated] = await tx.update(bots).set({ disabled }).where(where).returning();
    if (!updated) throw new Error('bot update returned nothing');
    await audit(tx, viewer, disabled ? 'bot.disabled' : 'bot.enabled', botId, { disabled: !disabled }, { disabled });
    return updated;
  });
  if (disabled) await handOffAllOf(deps, botId);
  return toBotView(row);
}
