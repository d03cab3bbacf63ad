import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { type Agent, agents, type Conversation, conversations } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { badInput, DomainError } from '../../errors.js';
import { appendMessage, type ConversationContext } from '../chat-rows.js';
import type { AgentBrief } from '../event-catalog.js';
import { agentChannel, globalChannel } from '../events.js';
import { parseInput } from '../inputs.js';
import { webhookOutboxRow } from '../integration/webhooks/events.js';
import { enqueueRows, outboxRow, outboxRows, type Tx, visitorKey } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import { type AgentViewer, requireOnlineReception, TICKET_AGENT } from '../viewer.js';
import { id, requireMine, requireOpen } from './context.js';
import { drainQueueQuietly } from './queue.js';
import { enqueueQueued, groupFor } from './routing.js';
import { type ConversationView, viewOf } from './view.js';

export const transferInput = z
  .object({ visitorId: id, toAgentId: id.optional(), groupId: id.optional() })
  .refine((i) => !(i.toAgentId && i.groupId), 'give either toAgentId or groupId, not both');
export type TransferInput = z.input<typeof transferInput>;

/** The agent a conversation is handed to: of the merchant, not the caller, and online. */
async function transferTarget(deps: Deps, viewer: AgentViewer, toAgentId: string): Promise<Agent> {
  const [target] = await deps.db
    .select()
    .from(agents)
    .where(and(eq(agents.id, toAgentId), eq(agents.merchantId, viewer.merchantId)))
    .limit(1);
  if (!target) throw new DomainError('NOT_FOUND', 'No such agent');
  if (target.id === viewer.agentId) throw badInput('toAgentId is yourself');
  if (target.disabled || target.level === TICKET_AGENT || (await deps.presence.stateOf(target.id)) !== 'online')
    throw new DomainError('AGENT_UNAVAILABLE', 'That agent is not online');
  return target;
}

/**
 * Hands an active conversation to another agent of the merchant (who must be online: not
 * offline, busy or away), or back to a group's queue (`groupId`, or its own group when neither
 * is given), where routing serves it like any other.
 */
export async function transferConversation(
  deps: Deps,
  viewer: AgentViewer,
  given: TransferInput,
): Promise<ConversationView> {
  requireOnlineReception(viewer);
  const input = parseInput(transferInput, given);
  const now = deps.now();
  const target = input.toAgentId ? await transferTarget(deps, viewer, input.toAgentId) : undefined;
  const groupId = input.groupId ? await groupFor(deps, viewer.merchantId, input.groupId) : undefined;
  const conversationId = await deps.db.transaction(async (tx) => {
    if (target) await tx.select({ id: agents.id }).from(agents).where(eq(agents.id, target.id)).for('update');
    const ctx = await requireOpen(tx, viewer.merchantId, input.visitorId);
    requireMine(viewer, ctx);
    const c = ctx.conversation;
    const [updated] = await tx
      .update(conversations)
      .set(
        target
          ? { agentId: target.id, version: c.version + 1, assignedAt: new Date(now) }
          : {
              state: 'queued',
              agentId: null,
              groupId: groupId ?? c.groupId,
              version: c.version + 1,
              queuedAt: new Date(now),
              pinnedAt: 0,
            },
      )
      .where(and(eq(conversations.id, c.id), eq(conversations.version, c.version)))
      .returning();
    if (!updated) throw new DomainError('ALREADY_CLAIMED', 'The conversation changed meanwhile; reload it');
    ctx.conversation = updated;
    if (target)
      await tx
        .update(agents)
        .set({ lastAssignedAt: new Date(now) })
        .where(eq(agents.id, target.id));
    const to = target ? { agentId: target.id, nickname: target.nickname, avatar: target.avatar } : null;
    await enqueueTransferred(deps, tx, ctx, c, to);
    return c.id;
  });
  await publishOutbox(deps, visitorKey(input.visitorId));
  // The transferring agent's capacity freed up, and a re-queued conversation waits: serve the queue.
  await drainQueueQuietly(deps, { merchantId: viewer.merchantId });
  return viewOf(deps.db, conversationId, 'agent');
}

/** The system message and the events of a transfer from `before`'s agent to `to` (null: the queue). */
async function enqueueTransferred(
  deps: Deps,
  tx: Tx,
  ctx: ConversationContext,
  before: Conversation,
  to: AgentBrief | null,
) {
  const updated = ctx.conversation;
  const fromAgentId = before.agentId as string;
  // The old agent sees the system message too: it is the last thing of the conversation it gets.
  const key = visitorKey(before.visitorId);
  const message = await appendMessage(deps, tx, ctx, {
    senderType: 'system',
    senderId: '',
    clientMsgId: null,
    type: 'system',
    content: to ? `Transferred to ${to.nickname}` : 'Transferred back to the queue',
    meta: {
      event: 'transferred',
      from_agent_id: fromAgentId,
      to_agent_id: to?.agentId ?? null,
      group_id: updated.groupId,
    },
  });
  const data = {
    conversationId: before.id,
    visitorId: before.visitorId,
    state: updated.state,
    fromAgentId,
    to,
    groupId: updated.groupId,
  };
  const transferredOn = new Set([
    globalChannel(ctx.bid),
    agentChannel(fromAgentId),
    ...(to ? [agentChannel(to.agentId)] : []),
    ctx.visitorChannel,
  ]);
  await enqueueRows(tx, [
    outboxRow(key, agentChannel(fromAgentId), 'message.created', { message }),
    ...outboxRows(key, transferredOn, 'conversation.transferred', data),
    webhookOutboxRow(key, before.merchantId, before.id, 'conversation.transferred', data, deps.now()),
  ]);
  if (!to) await enqueueQueued(tx, ctx);
}
