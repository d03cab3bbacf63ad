import { and, asc, eq, sql } from 'drizzle-orm';
import { agents, conversations } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { appendMessage, selectContexts } from '../chat-rows.js';
import { agentChannel, globalChannel } from '../events.js';
import { enqueueRows, outboxRows, visitorKey } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import { drainQueue } from './queue.js';
import { enqueueQueued } from './routing.js';

/**
 * An agent offline beyond the presence grace (docs/availability.md "Re-queue"): its active
 * conversations go back to their group's queue **at the front** (ahead of every conversation
 * waiting, in their own queue order), each with a system message, `conversation.requeued` to the
 * merchant, the agent and the visitor, and `conversation.queued` with the visitor's position; then
 * the queue is drained, so the group's policy hands them to another agent when one has room.
 * Called by the one instance that settles the agent offline; a reconnection first keeps them.
 */
export async function requeueOfflineAgent(deps: Deps, agentId: string): Promise<number> {
  if ((await deps.presence.stateOf(agentId)) !== 'offline') return 0;
  const now = deps.now();
  const keys: string[] = [];
  const { merchantId, moved } = await deps.db.transaction(async (tx) => {
    // Lock order: the agent's row first (as a drain or a claim does), then the conversations.
    const [agent] = await tx.select().from(agents).where(eq(agents.id, agentId)).for('update');
    if (!agent) return { merchantId: null, moved: 0 };
    const held = await selectContexts(tx)
      .where(and(eq(conversations.agentId, agentId), eq(conversations.state, 'active')))
      .orderBy(asc(conversations.queuedAt), asc(conversations.id))
      .for('update', { of: conversations });
    if (held.length === 0) return { merchantId: agent.merchantId, moved: 0 };
    // The front: before the oldest conversation waiting in the merchant's queue (and never later
    // than now); the queue orders by priority first, so it is the front of its priority.
    const [oldest] = await tx
      .select({ at: sql<string | null>`min(${conversations.queuedAt})` })
      .from(conversations)
      .where(and(eq(conversations.merchantId, agent.merchantId), eq(conversations.state, 'queued')));
    const front = Math.min(oldest?.at ? new Date(oldest.at).getTime() : now, now) - held.length;
    for (const [i, ctx] of held.entries()) {
      const c = ctx.conversation;
      const [updated] = await tx
        .update(conversations)
        .set({ state: 'queued', agentId: null, version: c.version + 1, queuedAt: new Date(front + i), pinnedAt: 0 })
        .where(and(eq(conversations.id, c.id), eq(conversations.version, c.version)))
        .returning();
      if (!updated) continue;
      ctx.conversation = updated;
      await appendMessage(deps, tx, ctx, {
        senderType: 'system',
        senderId: '',
        clientMsgId: null,
        type: 'system',
        content: `${agent.nickname} went offline; the conversation is back in the queue`,
        meta: { event: 'requeued', from_agent_id: agentId, reason: 'agent_offline', group_id: updated.groupId },
      });
      const data = {
        conversationId: c.id,
        visitorId: c.visitorId,
        state: 'queued' as const,
        fromAgentId: agentId,
        groupId: updated.groupId,
        reason: 'agent_offline' as const,
      };
      const requeuedOn = [globalChannel(ctx.bid), agentChannel(agentId), ctx.visitorChannel];
      await enqueueRows(tx, outboxRows(visitorKey(c.visitorId), requeuedOn, 'conversation.requeued', data));
      await enqueueQueued(tx, ctx);
      keys.push(visitorKey(c.visitorId));
    }
    return { merchantId: agent.merchantId, moved: held.length };
  });
  if (moved === 0 || !merchantId) return 0;
  await publishOutbox(deps, keys);
  await drainQueue(deps, merchantId);
  return moved;
}
