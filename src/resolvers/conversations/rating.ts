import { and, desc, eq, isNull } from 'drizzle-orm';
import { z } from 'zod';
import { conversations, merchants } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { chargeRating } from '../budgets/chat.js';
import { appendMessage, selectContexts } from '../chat-rows.js';
import { flag, parseInput, text } from '../inputs.js';
import { enqueueWebhookEvent } from '../integration/webhooks/events.js';
import { visitorKey } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import type { VisitorViewer } from '../viewer.js';
import { id } from './context.js';
import { type ConversationView, viewOf } from './view.js';

export const rateInput = z.object({
  conversationId: id.optional(),
  score: z.number().int().min(1).max(5),
  resolved: flag.optional(),
  comment: text(1000).optional(),
});
export type RateInput = z.input<typeof rateInput>;

/**
 * The visitor rates a closed conversation (its latest one unless `conversationId` is given),
 * once, while the merchant's `session_invite_rating` (or, for `resolved` alone,
 * `session_invite_resolved`) switch is on.
 */
export async function rateConversation(deps: Deps, viewer: VisitorViewer, given: RateInput): Promise<ConversationView> {
  // A repeat is refused as already rated, but only after a locked transaction: counted first (budgets/chat.ts).
  await chargeRating(deps, viewer);
  const input = parseInput(rateInput, given);
  const [merchant] = await deps.db
    .select({ switches: merchants.switches })
    .from(merchants)
    .where(eq(merchants.id, viewer.merchantId));
  if (merchant?.switches.session_invite_rating !== 'on')
    throw new DomainError('RATING_NOT_ALLOWED', 'Rating is not enabled for this merchant');
  if (input.resolved !== undefined && merchant.switches.session_invite_resolved !== 'on')
    throw new DomainError('RATING_NOT_ALLOWED', 'Resolved feedback is not enabled for this merchant');
  const conversationId = await deps.db.transaction(async (tx) => {
    const [row] = await selectContexts(tx)
      .where(
        and(
          eq(conversations.merchantId, viewer.merchantId),
          eq(conversations.visitorId, viewer.visitorId),
          eq(conversations.state, 'closed'),
          input.conversationId ? eq(conversations.id, input.conversationId) : undefined,
        ),
      )
      .orderBy(desc(conversations.closedAt), desc(conversations.id))
      .limit(1)
      .for('update', { of: conversations });
    if (!row) throw new DomainError('RATING_NOT_ALLOWED', 'Only a closed conversation of yours can be rated');
    const [rated] = await tx
      .update(conversations)
      .set({
        ratingScore: input.score,
        ratingResolved: input.resolved ?? null,
        ratingComment: input.comment ?? null,
        ratedAt: new Date(deps.now()),
      })
      .where(and(eq(conversations.id, row.conversation.id), isNull(conversations.ratedAt)))
      .returning();
    if (!rated) throw new DomainError('RATING_NOT_ALLOWED', 'This conversation was already rated');
    row.conversation = rated;
    await appendMessage(deps, tx, row, {
      senderType: 'system',
      senderId: '',
      clientMsgId: null,
      type: 'system',
      content: `Rated ${input.score}/5`,
      meta: { event: 'rated', score: input.score, resolved: input.resolved ?? null },
    });
    const ratedData = { conversationId: rated.id, visitorId: rated.visitorId, state: 'closed' as const };
    const rating = { score: input.score, resolved: input.resolved ?? null, comment: input.comment ?? null };
    await enqueueWebhookEvent(
      tx,
      visitorKey(rated.visitorId),
      rated.merchantId,
      rated.id,
      'conversation.rated',
      { ...ratedData, ...rating },
      deps.now(),
    );
    return rated.id;
  });
  await publishOutbox(deps, visitorKey(viewer.visitorId));
  return viewOf(deps.db, conversationId, 'visitor');
}
