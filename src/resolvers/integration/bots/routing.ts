import { and, asc, eq, isNull, or, sql } from 'drizzle-orm';
import { type Bot, bots } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { appendMessage, type ConversationContext } from '../../chat-rows.js';
import type { Tx } from '../../outbox/enqueue.js';

/**
 * Routing to a bot (docs/integration.md "Bots"): when the merchant has an enabled bot for the
 * conversation's group (or for all its groups), the new conversation goes to the bot instead of
 * the queue, in the transaction that creates it.
 */

/** The bot that answers first in `groupId`: the group's own bot before a merchant-wide one, oldest first. */
export async function firstResponderBot(
  deps: Deps,
  merchantId: string,
  groupId: string | null,
): Promise<Bot | undefined> {
  const [bot] = await deps.db
    .select()
    .from(bots)
    .where(
      and(
        eq(bots.merchantId, merchantId),
        eq(bots.disabled, false),
        groupId ? or(eq(bots.groupId, groupId), isNull(bots.groupId)) : isNull(bots.groupId),
      ),
    )
    .orderBy(sql`${bots.groupId} is null`, asc(bots.createdAt), asc(bots.id))
    .limit(1);
  return bot;
}

/** The system message of a bot taking a new conversation (inside the creating transaction). */
export async function announceBot(deps: Deps, tx: Tx, ctx: ConversationContext, bot: Bot) {
  await appendMessage(deps, tx, ctx, {
    senderType: 'system',
    senderId: '',
    clientMsgId: null,
    type: 'system',
    content: `${bot.name} joined the conversation`,
    meta: { event: 'bot_assigned', bot_id: bot.id, bot_name: bot.name },
  });
}
