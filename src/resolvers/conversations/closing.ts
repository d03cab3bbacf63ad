import { and, eq, ne, sql } from 'drizzle-orm';
import { conversations, merchants } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { chargeConversationClosed } from '../budgets/chat.js';
import { appendMessage, type ConversationContext, openConversation } from '../chat-rows.js';
import { agentChannel, globalChannel } from '../events.js';
import { parseInput } from '../inputs.js';
import { webhookOutboxRow } from '../integration/webhooks/events.js';
import { enqueueRows, outboxRow, outboxRows, type Tx, visitorKey } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import { type AgentViewer, requireOnlineReception, type VisitorViewer } from '../viewer.js';
import { requireMine, requireOpen, type VisitorRef, visitorRef } from './context.js';
import { drainQueueQuietly } from './queue.js';
import { type ConversationView, viewOf } from './view.js';

/** Closing a conversation: by either side, or by the idle sweep. */

export type ClosedBy = 'visitor' | 'agent' | 'idle';

/**
 * Closes the open conversation of a visitor: by the visitor itself, by its agent (agents address
 * it by `visitorId`), or by the idle sweep. Frees the agent's capacity (the queue is served) and
 * invites the visitor to rate when the merchant's switches say so.
 */
export async function closeConversation(
  deps: Deps,
  viewer: AgentViewer | VisitorViewer,
  given: Partial<VisitorRef> = {},
): Promise<ConversationView> {
  let visitorId: string;
  if (viewer.kind === 'agent') {
    requireOnlineReception(viewer);
    visitorId = parseInput(visitorRef, given).visitorId;
  } else {
    visitorId = viewer.visitorId;
    await chargeConversationClosed(deps, viewer);
  }
  const conversationId = await deps.db.transaction(async (tx) => {
    const ctx = await requireOpen(tx, viewer.merchantId, visitorId);
    if (viewer.kind === 'agent' && ctx.conversation.state === 'active') requireMine(viewer, ctx);
    await closeInTx(deps, tx, ctx, viewer.kind);
    return ctx.conversation.id;
  });
  await afterClose(deps, viewer.merchantId, visitorId);
  return viewOf(deps.db, conversationId, viewer.kind);
}

async function closeInTx(deps: Deps, tx: Tx, ctx: ConversationContext, closedBy: ClosedBy): Promise<boolean> {
  const c = ctx.conversation;
  const now = deps.now();
  const [updated] = await tx
    .update(conversations)
    // A bot's answer deadline ends with the conversation: the sweep reads only rows still due.
    .set({ state: 'closed', version: c.version + 1, closedAt: new Date(now), closedBy, pinnedAt: 0, botDueAt: null })
    .where(and(eq(conversations.id, c.id), eq(conversations.version, c.version), ne(conversations.state, 'closed')))
    .returning();
  if (!updated) return false;
  ctx.conversation = updated;
  await appendMessage(deps, tx, ctx, {
    senderType: 'system',
    senderId: '',
    clientMsgId: null,
    type: 'system',
    content: closedBy === 'idle' ? 'Closed after inactivity' : `Closed by the ${closedBy}`,
    meta: { event: 'closed', closed_by: closedBy },
  });
  const data = {
    conversationId: c.id,
    visitorId: c.visitorId,
    state: 'closed' as const,
    agentId: updated.agentId,
    closedBy,
  };
  const [merchant] = await tx
    .select({ switches: merchants.switches })
    .from(merchants)
    .where(eq(merchants.id, c.merchantId));
  const rating = merchant?.switches.session_invite_rating === 'on';
  const resolved = merchant?.switches.session_invite_resolved === 'on';
  const key = visitorKey(c.visitorId);
  const closedOn = [
    globalChannel(ctx.bid),
    ...(updated.agentId ? [agentChannel(updated.agentId)] : []),
    ctx.visitorChannel,
  ];
  // One statement, in the order the events go out: closed, its webhook, then the invitation.
  await enqueueRows(tx, [
    ...outboxRows(key, closedOn, 'conversation.closed', data),
    webhookOutboxRow(key, c.merchantId, c.id, 'conversation.closed', data, now),
    ...(rating || resolved
      ? [outboxRow(key, ctx.visitorChannel, 'conversation.rating_invited', { conversationId: c.id, rating, resolved })]
      : []),
  ]);
  return true;
}

async function afterClose(deps: Deps, merchantId: string, visitorId: string) {
  await publishOutbox(deps, visitorKey(visitorId));
  await drainQueueQuietly(deps, { merchantId });
}

/**
 * Closes every open conversation with no message for its merchant's `idle_close_minutes`
 * (0: never). Run periodically by the chat service; returns how many it closed.
 */
export async function closeIdleConversations(deps: Deps): Promise<number> {
  const nowSeconds = Math.floor(deps.now() / 1000);
  const idle = await deps.db
    .select({ id: conversations.id, merchantId: conversations.merchantId, visitorId: conversations.visitorId })
    .from(conversations)
    .innerJoin(merchants, eq(merchants.id, conversations.merchantId))
    .where(
      and(
        ne(conversations.state, 'closed'),
        // A message left waits for an agent however long: never closed for idleness once written in.
        sql`(${conversations.leftAt} is null or ${conversations.state} <> 'queued' or ${conversations.lastSeq} = 0)`,
        sql`${merchants.idleCloseMinutes} > 0`,
        sql`${conversations.timestamp} <= ${nowSeconds} - ${merchants.idleCloseMinutes} * 60`,
      ),
    )
    .limit(500);
  let closed = 0;
  const merchantIds = new Set<string>();
  const keys: string[] = [];
  for (const row of idle) {
    const done = await deps.db.transaction(async (tx) => {
      const ctx = await openConversation(tx, row.merchantId, row.visitorId, { lock: true });
      // Re-checked under the lock: a message that arrived meanwhile keeps it open.
      if (
        !ctx ||
        ctx.conversation.id !== row.id ||
        (ctx.conversation.leftAt && ctx.conversation.state === 'queued' && ctx.conversation.lastSeq > 0)
      )
        return false;
      const [m] = await tx
        .select({ minutes: merchants.idleCloseMinutes })
        .from(merchants)
        .where(eq(merchants.id, row.merchantId));
      if (!m || m.minutes <= 0 || ctx.conversation.timestamp > nowSeconds - m.minutes * 60) return false;
      return closeInTx(deps, tx, ctx, 'idle');
    });
    if (done) {
      closed++;
      merchantIds.add(row.merchantId);
      keys.push(visitorKey(row.visitorId));
    }
  }
  if (closed > 0) await publishOutbox(deps, keys);
  for (const merchantId of merchantIds) await drainQueueQuietly(deps, { merchantId });
  return closed;
}
