import { and, eq, isNotNull, lte, ne } from 'drizzle-orm';
import { z } from 'zod';
import { bots, conversations } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { DomainError } from '../../../errors.js';
import { chargeHumanRequest } from '../../budgets/chat.js';
import { appendMessage, type ConversationContext, openConversation, requireMerchantVisitor } from '../../chat-rows.js';
import { drainQueueQuietly } from '../../conversations/queue.js';
import { announceIfWaiting } from '../../conversations/routing.js';
import type { ConversationState } from '../../conversations/view.js';
import { globalChannel } from '../../events.js';
import { parseInput, required } from '../../inputs.js';
import { enqueueRows, outboxRows, type Tx, visitorKey } from '../../outbox/enqueue.js';
import { publishOutbox } from '../../outbox/publish.js';
import type { VisitorViewer } from '../../viewer.js';
import { webhookOutboxRow } from '../webhooks/events.js';
import type { BotViewer } from './viewer.js';

/**
 * Hand-off from a bot to the merchant's agents (docs/integration.md "Bots"): by the bot's own
 * call, by the visitor asking for a human, by the bot's answer deadline passing, or by the bot
 * being disabled. One compare-and-set under the conversation's row lock (the lock a bot's send
 * takes too): of N concurrent hand-offs exactly one moves the conversation back to its group's
 * queue, writes the system message and the one `conversation.handed_off`; after it, no message
 * of the bot is accepted for the conversation.
 */

export type HandoffReason = 'bot' | 'visitor' | 'timeout' | 'disabled';

export interface HandoffResult {
  conversationId: string;
  /** True for the one call that made the transition; false when it was already handed off. */
  handedOff: boolean;
  /** The conversation's state after the call (`queued` until routing gives it to an agent). */
  state: ConversationState;
}

export const handoffInput = z.object({ visitorId: required(64) });
export type HandoffInput = z.input<typeof handoffInput>;

/** Most overdue conversations one sweep hands off. */
const SWEEP_BATCH = 200;

/**
 * The transition inside `tx`, on a conversation locked by the caller: bot-held → queued, the
 * bot released, the deadline cleared. Returns false (nothing written) when no bot holds it, or
 * (`overdue`) when the bot answered in time after all.
 */
async function handOffInTx(
  deps: Deps,
  tx: Tx,
  ctx: ConversationContext,
  reason: HandoffReason,
  now: number,
): Promise<boolean> {
  const c = ctx.conversation;
  if (!c.botId || c.state !== 'active') return false;
  if (reason === 'timeout' && !(c.botDueAt && c.botDueAt.getTime() <= now)) return false;
  const [updated] = await tx
    .update(conversations)
    .set({
      state: 'queued',
      botId: null,
      handedOffBotId: c.botId,
      bot: 2,
      botDueAt: null,
      queuedAt: new Date(now),
      version: c.version + 1,
    })
    .where(and(eq(conversations.id, c.id), eq(conversations.botId, c.botId), eq(conversations.version, c.version)))
    .returning();
  if (!updated) return false;
  ctx.conversation = updated;
  const [bot] = await tx.select({ name: bots.name }).from(bots).where(eq(bots.id, c.botId));
  await appendMessage(deps, tx, ctx, {
    senderType: 'system',
    senderId: '',
    clientMsgId: null,
    type: 'system',
    content: `${bot?.name ?? 'The bot'} handed the conversation over to an agent`,
    meta: { event: 'handoff', bot_id: c.botId, bot_name: bot?.name ?? null, reason },
  });
  const data = {
    conversationId: c.id,
    visitorId: c.visitorId,
    state: 'queued' as const,
    botId: c.botId,
    groupId: c.groupId,
    reason,
  };
  const key = visitorKey(c.visitorId);
  await enqueueRows(tx, [
    ...outboxRows(key, [globalChannel(ctx.bid), ctx.visitorChannel], 'conversation.handed_off', data),
    webhookOutboxRow(key, c.merchantId, c.id, 'conversation.handed_off', data, now),
  ]);
  return true;
}

/**
 * Locks the visitor's open conversation, lets `decide` refuse, and hands it off. After a
 * transition, publishes and routes (the queue drains to an agent, else `conversation.queued`).
 */
async function handOff(
  deps: Deps,
  merchantId: string,
  visitorId: string,
  reason: HandoffReason,
  decide: (ctx: ConversationContext) => void = () => {},
): Promise<HandoffResult> {
  const now = deps.now();
  const result = await deps.db.transaction(async (tx) => {
    const ctx = await openConversation(tx, merchantId, visitorId, { lock: true });
    if (!ctx) throw new DomainError('CONVERSATION_CLOSED', 'This visitor has no open conversation');
    decide(ctx);
    const handedOff = await handOffInTx(deps, tx, ctx, reason, now);
    return { conversationId: ctx.conversation.id, handedOff, state: ctx.conversation.state };
  });
  if (!result.handedOff) return result;
  await publishOutbox(deps, visitorKey(visitorId));
  await drainQueueQuietly(deps, { merchantId });
  await announceIfWaiting(deps, result.conversationId);
  const [after] = await deps.db
    .select({ state: conversations.state })
    .from(conversations)
    .where(eq(conversations.id, result.conversationId));
  return { ...result, state: after?.state ?? result.state };
}

/**
 * The bot hands the visitor's conversation to the agents. Idempotent: a conversation it already
 * handed off (or that left it for another reason) answers `handedOff: false`; one it never held
 * (another bot holds it, another bot handed it off, no bot ever did) is HANDED_OFF.
 */
export async function botHandoff(deps: Deps, bot: BotViewer, given: HandoffInput): Promise<HandoffResult> {
  const { visitorId } = parseInput(handoffInput, given);
  await requireMerchantVisitor(deps.db, bot.merchantId, visitorId);
  return handOff(deps, bot.merchantId, visitorId, 'bot', (ctx) => {
    const c = ctx.conversation;
    // `bot` 2 says only that some bot handed it off: the repeat is idempotent for the bot that held it, no other.
    if (c.botId !== bot.botId && c.handedOffBotId !== bot.botId)
      throw new DomainError('HANDED_OFF', 'This conversation is not held by this bot');
  });
}

/**
 * The visitor asks for a human (`POST /visitor/chat/human`, `requestHuman`): its conversation
 * leaves the bot that holds it. Without a bot (already with the agents) it answers
 * `handedOff: false` and changes nothing.
 */
export async function requestHuman(deps: Deps, viewer: VisitorViewer): Promise<HandoffResult> {
  // Anyone can get a visitor token: each call is a locked transaction, so it has a budget (budgets/chat.ts).
  await chargeHumanRequest(deps, viewer);
  return handOff(deps, viewer.merchantId, viewer.visitorId, 'visitor');
}

/**
 * The answer-deadline sweep (every instance, periodically): conversations whose bot has not
 * answered a visitor's message by `bot_due_at` are handed off. The deadline is re-checked under
 * the row lock, so a bot's answer committed meanwhile wins. Returns how many it handed off.
 */
export async function handOffOverdueBots(deps: Deps): Promise<number> {
  const now = deps.now();
  const due = await deps.db
    .select({ merchantId: conversations.merchantId, visitorId: conversations.visitorId })
    .from(conversations)
    // Not closed: rows closed before closing cleared the deadline would otherwise be read every round.
    .where(
      and(
        isNotNull(conversations.botDueAt),
        lte(conversations.botDueAt, new Date(now)),
        ne(conversations.state, 'closed'),
      ),
    )
    .limit(SWEEP_BATCH);
  let n = 0;
  for (const row of due) {
    try {
      if ((await handOff(deps, row.merchantId, row.visitorId, 'timeout')).handedOff) n++;
    } catch (error) {
      if (!(error instanceof DomainError)) throw error; // closed meanwhile: nothing to hand off
    }
  }
  return n;
}

/** Hands off every conversation a bot holds (the bot was disabled). Returns how many. */
export async function handOffAllOf(deps: Deps, botId: string): Promise<number> {
  const held = await deps.db
    .select({ merchantId: conversations.merchantId, visitorId: conversations.visitorId })
    .from(conversations)
    .where(eq(conversations.botId, botId));
  let n = 0;
  for (const row of held) {
    try {
      if ((await handOff(deps, row.merchantId, row.visitorId, 'disabled')).handedOff) n++;
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
    }
  }
  return n;
}
