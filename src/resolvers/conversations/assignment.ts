import { and, eq, inArray, sql } from 'drizzle-orm';
import { type Agent, agents, type Conversation, conversations, messages } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { newId } from '../../ids.js';
import { appendMessage, type ConversationContext, participantChannels, preview, toMessageView } from '../chat-rows.js';
import { agentChannel, globalChannel } from '../events.js';
import { webhookOutboxRow } from '../integration/webhooks/events.js';
import { enqueueRows, type OutboxRow, outboxRow, outboxRows, rowsOf, type Tx, visitorKey } from '../outbox/enqueue.js';

/**
 * Queued → active: one conversation (a claim) or a drain's whole pass at once. Both are a
 * compare-and-set on the conversation's `state` and `version` (a close, claim or drain meanwhile
 * wins), write the "joined" system message (its seq taken on the conversation row) and the
 * events: `message.created`, `conversation.assigned` (merchant, agent, visitor) and their webhooks.
 */

export type AssignedBy = 'routing' | 'claim';

const joinedMessage = (agent: Agent, by: AssignedBy) => ({
  senderType: 'system' as const,
  senderId: '',
  clientMsgId: null,
  type: 'system' as const,
  content: `${agent.nickname} joined the conversation`,
  meta: { event: 'assigned', agent_id: agent.id, nickname: agent.nickname, by },
});

const assignedData = (c: Conversation, agent: Agent, by: AssignedBy) => ({
  conversationId: c.id,
  visitorId: c.visitorId,
  state: 'active' as const,
  agent: { agentId: agent.id, nickname: agent.nickname, avatar: agent.avatar },
  by,
});

/** Compare-and-set queued → active for `agent`, with the system message and the events. */
export async function assignInTx(
  deps: Deps,
  tx: Tx,
  ctx: ConversationContext,
  agent: Agent,
  by: AssignedBy,
  now: number,
): Promise<boolean> {
  const c = ctx.conversation;
  const [updated] = await tx
    .update(conversations)
    // Taken by an agent, it is no longer a message left (a later re-queue is an ordinary wait).
    .set({
      state: 'active',
      agentId: agent.id,
      version: c.version + 1,
      assignedAt: new Date(now),
      leftAt: null,
      leftReason: null,
    })
    .where(and(eq(conversations.id, c.id), eq(conversations.state, 'queued'), eq(conversations.version, c.version)))
    .returning();
  if (!updated) return false;
  await tx
    .update(agents)
    .set({ lastAssignedAt: new Date(now) })
    .where(eq(agents.id, agent.id));
  ctx.conversation = updated;
  await appendMessage(deps, tx, ctx, joinedMessage(agent, by));
  await enqueueRows(tx, assignedRows(ctx, agent, by, now));
  return true;
}

/** `conversation.assigned` on the merchant's, the agent's and the visitor's channels, then its webhook. */
function assignedRows(ctx: ConversationContext, agent: Agent, by: AssignedBy, now: number): OutboxRow[] {
  const c = ctx.conversation;
  const key = visitorKey(c.visitorId);
  const data = assignedData(c, agent, by);
  return [
    ...outboxRows(
      key,
      [globalChannel(ctx.bid), agentChannel(agent.id), ctx.visitorChannel],
      'conversation.assigned',
      data,
    ),
    webhookOutboxRow(key, c.merchantId, c.id, 'conversation.assigned', data, now),
  ];
}

/**
 * What `assignInTx` does, for a drain's whole pass in four statements whatever its size (one
 * compare-and-set update that also takes each system message's seq, the agents' assignment
 * times, the messages, the outbox rows in order). Returns the conversations it assigned.
 */
export async function assignMany(
  tx: Tx,
  decided: { ctx: ConversationContext; agent: Agent }[],
  now: number,
): Promise<ConversationContext[]> {
  if (decided.length === 0) return [];
  const by: AssignedBy = 'routing';
  const updated = await activateQueued(tx, decided, by, now);
  const byId = new Map(updated.map((r) => [r.id, r]));
  const done = decided.filter(({ ctx }) => byId.has(ctx.conversation.id));
  if (done.length === 0) return [];
  await tx
    .update(agents)
    .set({ lastAssignedAt: new Date(now) })
    .where(
      inArray(
        agents.id,
        done.map((d) => d.agent.id),
      ),
    );
  for (const { ctx, agent } of done) {
    const row = byId.get(ctx.conversation.id) as { last_seq: number; version: number };
    ctx.conversation = {
      ...ctx.conversation,
      state: 'active',
      agentId: agent.id,
      version: Number(row.version),
      lastSeq: Number(row.last_seq),
      assignedAt: new Date(now),
      timestamp: Math.floor(now / 1000),
      leftAt: null,
      leftReason: null,
    };
  }
  const stored = await tx
    .insert(messages)
    .values(
      done.map(({ ctx, agent }) => ({
        id: newId('msg'),
        conversationId: ctx.conversation.id,
        merchantId: ctx.conversation.merchantId,
        visitorId: ctx.conversation.visitorId,
        seq: ctx.conversation.lastSeq,
        ...joinedMessage(agent, by),
        attachmentId: null,
        createdAt: new Date(now),
      })),
    )
    .returning();
  const messageOf = new Map(stored.map((m) => [m.conversationId, toMessageView(m)]));
  await enqueueRows(tx, assignmentOutboxRows(done, messageOf, by, now));
  return done.map((d) => d.ctx);
}

/**
 * The pass's compare-and-set: each conversation still queued at its version becomes active with
 * its agent, and takes the seq of its system message.
 */
async function activateQueued(
  tx: Tx,
  decided: { ctx: ConversationContext; agent: Agent }[],
  by: AssignedBy,
  now: number,
) {
  const items = decided.map(({ ctx, agent }) => {
    const m = joinedMessage(agent, by);
    const item = { sender_type: m.senderType, type: m.type, content: preview(m.content), created_at: now };
    return sql`(${ctx.conversation.id}, ${agent.id}, ${ctx.conversation.version}::int, ${JSON.stringify(item)}::jsonb)`;
  });
  return rowsOf<{ id: string; last_seq: number; version: number }>(
    await tx.execute(sql`
      update conversations c
      set state = 'active', agent_id = v.agent_id, version = c.version + 1, assigned_at = ${new Date(now).toISOString()}::timestamptz,
          last_seq = c.last_seq + 1, timestamp = ${Math.floor(now / 1000)}, left_at = null, left_reason = null,
          items = jsonb_build_array(v.item || jsonb_build_object('seq', c.last_seq + 1))
      from (values ${sql.join(items, sql`, `)}) as v(id, agent_id, version, item)
      where c.id = v.id and c.state = 'queued' and c.version = v.version
      returning c.id, c.last_seq, c.version`),
  );
}

/** The pass's events, in order per conversation: the system message, then the assignment (channels and webhooks). */
function assignmentOutboxRows(
  done: { ctx: ConversationContext; agent: Agent }[],
  messageOf: Map<string, ReturnType<typeof toMessageView>>,
  by: AssignedBy,
  now: number,
): OutboxRow[] {
  const rows: OutboxRow[] = [];
  for (const { ctx, agent } of done) {
    const c = ctx.conversation;
    const key = visitorKey(c.visitorId);
    const message = messageOf.get(c.id);
    if (message) {
      for (const channel of participantChannels(ctx))
        rows.push(outboxRow(key, channel, 'message.created', { message }));
      rows.push(webhookOutboxRow(key, c.merchantId, c.id, 'message.created', { message }, now));
    }
    rows.push(...assignedRows(ctx, agent, by, now));
  }
  return rows;
}
