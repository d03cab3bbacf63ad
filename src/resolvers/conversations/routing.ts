import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { agentGroups, agents, type Bot, conversations } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { newId } from '../../ids.js';
import { leaveMessage, type MessageLeftNotice, nobodyToAnswer, noticeOf } from '../availability/messages-left.js';
import { routingNeedsOf } from '../availability/routing/rules.js';
import { chargeAssign, chargeConversationOpened } from '../budgets/chat.js';
import { type ConversationContext, openConversation } from '../chat-rows.js';
import type { AgentBrief } from '../event-catalog.js';
import { globalChannel } from '../events.js';
import { parseInput } from '../inputs.js';
import { announceBot, firstResponderBot } from '../integration/bots/routing.js';
import { enqueueWebhookEvent } from '../integration/webhooks/events.js';
import { enqueueRows, outboxRows, type Tx, visitorKey } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import type { VisitorViewer } from '../viewer.js';
import { id } from './context.js';
import { drainQueue } from './queue.js';
import { type ConversationState, queuePositionSql, viewOf } from './view.js';

/**
 * Assignment and the queue: a visitor's conversation is opened queued in its group and routed to
 * the least busy online agent of that group under capacity; the queue is served again whenever
 * capacity frees up (close, transfer, an agent coming online) and periodically.
 */

/** The answer of assignAgent (`POST /visitor/chat/assign`). */
export interface AssignResult {
  conversationId: string;
  state: ConversationState;
  agent: AgentBrief | null;
  queuePosition: number | null;
  /** Set while the conversation is a message left: what the visitor is told (docs/availability.md). */
  messageLeft: MessageLeftNotice | null;
}

export const assignInput = z.object({
  groupId: id.optional(),
  agentId: id.optional(),
  /** The page the visitor is on (the merchant's routing rules may match it), at most 2048 characters. */
  entryPage: z.string().max(2048, 'must be at most 2048 characters').optional(),
});
export type AssignInput = z.input<typeof assignInput>;

/**
 * The spec's step 2: the visitor's open conversation (idempotent: never a second one), or a new
 * one that joins its group's queue and is routed at once when an agent is available.
 */
export async function assignAgent(deps: Deps, viewer: VisitorViewer, given: AssignInput = {}): Promise<AssignResult> {
  const input = parseInput(assignInput, given);
  // Counted before the open conversation is read: a repeat is idempotent, not free (budgets/chat.ts).
  await chargeAssign(deps, viewer);
  return assignCharged(deps, viewer, input);
}

/** As assignAgent, for a caller that charged its own budget (a visitor's first message, send.ts). */
export async function assignCharged(
  deps: Deps,
  viewer: VisitorViewer,
  input: z.output<typeof assignInput> = {},
): Promise<AssignResult> {
  const existing = await openConversation(deps.db, viewer.merchantId, viewer.visitorId);
  if (existing) return assignResult(deps, existing.conversation.id);
  await chargeConversationOpened(deps, viewer);
  const groupId = await groupFor(deps, viewer.merchantId, input.groupId);
  let preferred: string | undefined;
  if (input.agentId) {
    const [agent] = await deps.db
      .select({ id: agents.id })
      .from(agents)
      .where(and(eq(agents.id, input.agentId), eq(agents.merchantId, viewer.merchantId)))
      .limit(1);
    if (!agent) throw new DomainError('NOT_FOUND', 'No such agent');
    preferred = agent.id;
  }
  // A bot set as first responder takes the new conversation at once, at any hour (docs/integration.md "Bots").
  const bot = preferred ? undefined : await firstResponderBot(deps, viewer.merchantId, groupId);
  const created = await openNewConversation(deps, viewer.merchantId, viewer.visitorId, groupId, input.entryPage, bot);
  if (created && bot) await publishOutbox(deps, visitorKey(viewer.visitorId));
  else if (created) {
    // Nobody can answer (out of hours, nobody of the group online): kept as a message left, not routed.
    const nobody = await nobodyToAnswer(deps, viewer.merchantId, groupId);
    if (nobody) await leaveMessage(deps, viewer.merchantId, viewer.visitorId, nobody);
    else
      await drainQueue(
        deps,
        viewer.merchantId,
        preferred ? { conversationId: created, agentId: preferred } : undefined,
      );
    await announceIfWaiting(deps, created);
  }
  const ctx = await openConversation(deps.db, viewer.merchantId, viewer.visitorId);
  if (!ctx) throw new DomainError('CONVERSATION_CLOSED', 'The conversation was closed meanwhile; assign again');
  return assignResult(deps, ctx.conversation.id);
}

async function assignResult(deps: Deps, conversationId: string): Promise<AssignResult> {
  const view = await viewOf(deps.db, conversationId, 'visitor');
  const [left] = await deps.db
    .select({
      merchantId: conversations.merchantId,
      leftReason: conversations.leftReason,
      groupId: conversations.groupId,
    })
    .from(conversations)
    .where(eq(conversations.id, conversationId));
  const messageLeft = left && view.state === 'queued' ? await noticeOf(deps, left.merchantId, left) : null;
  return { conversationId, state: view.state, agent: view.agent, queuePosition: view.queuePosition, messageLeft };
}

/** The requested group of the merchant, or its default group. */
export async function groupFor(deps: Deps, merchantId: string, groupId: string | undefined): Promise<string | null> {
  const [group] = await deps.db
    .select({ id: agentGroups.id })
    .from(agentGroups)
    .where(
      and(
        eq(agentGroups.merchantId, merchantId),
        groupId ? eq(agentGroups.id, groupId) : eq(agentGroups.isDefault, true),
      ),
    )
    .limit(1);
  if (groupId && !group) throw new DomainError('NOT_FOUND', 'No such agent group');
  return group?.id ?? null;
}

/**
 * Inserts a queued conversation, or one held by `bot` (active, no agent); the partial unique
 * index makes a concurrent second insert do nothing (one open conversation per visitor).
 * Returns the new id, or undefined when one already existed.
 */
export async function openNewConversation(
  deps: Deps,
  merchantId: string,
  visitorId: string,
  groupId: string | null,
  entryPage?: string,
  bot?: Bot,
): Promise<string | undefined> {
  const now = deps.now();
  return deps.db.transaction(async (tx) => {
    const needs = await routingNeedsOf(tx, merchantId, visitorId, groupId, entryPage ?? null);
    const [row] = await tx
      .insert(conversations)
      .values({
        id: newId('c'),
        merchantId,
        visitorId,
        groupId,
        state: bot ? 'active' : 'queued',
        ...(bot ? { botId: bot.id, bot: 1, assignedAt: new Date(now) } : {}),
        timestamp: Math.floor(now / 1000),
        createdAt: new Date(now),
        queuedAt: new Date(now),
        entryPage: entryPage ?? null,
        requiredSkills: needs.requiredSkills,
        priority: needs.priority,
      })
      .onConflictDoNothing()
      .returning();
    if (!row) return undefined;
    const ctx = await openConversation(tx, merchantId, visitorId);
    if (!ctx) return undefined;
    const created = { conversationId: row.id, visitorId, state: row.state, groupId, botId: row.botId };
    await enqueueWebhookEvent(tx, visitorKey(visitorId), merchantId, row.id, 'conversation.created', created, now);
    if (bot) await announceBot(deps, tx, ctx, bot);
    return row.id;
  });
}

/**
 * `conversation.queued` for a new conversation only when it really waits: routing had no agent
 * for it (or nobody can answer and it is kept as a message left). The row lock orders this with
 * a drain on another instance: one that assigned it first leaves nothing to announce; one that
 * comes after publishes its `conversation.assigned` after this event.
 */
export async function announceIfWaiting(deps: Deps, conversationId: string) {
  const announced = await deps.db.transaction(async (tx) => {
    const [waiting] = await tx
      .select({ merchantId: conversations.merchantId, visitorId: conversations.visitorId })
      .from(conversations)
      .where(and(eq(conversations.id, conversationId), eq(conversations.state, 'queued')))
      .for('update');
    if (!waiting) return undefined;
    const ctx = await openConversation(tx, waiting.merchantId, waiting.visitorId);
    if (!ctx || ctx.conversation.id !== conversationId) return undefined;
    await enqueueQueued(tx, ctx);
    return visitorKey(waiting.visitorId);
  });
  if (announced) await publishOutbox(deps, announced);
}

/** Writes `conversation.queued` (with the queue position) for the merchant's agents and the visitor. */
export async function enqueueQueued(tx: Tx, ctx: ConversationContext) {
  // The position told is remembered on the row: a drain tells the visitor again only when it moves.
  const [position] = await tx
    .update(conversations)
    .set({ queuePositionTold: queuePositionSql })
    .where(eq(conversations.id, ctx.conversation.id))
    .returning({ n: conversations.queuePositionTold });
  const data = {
    conversationId: ctx.conversation.id,
    visitorId: ctx.conversation.visitorId,
    state: 'queued' as const,
    groupId: ctx.conversation.groupId,
    queuePosition: Number(position?.n ?? 1),
  };
  const key = visitorKey(ctx.conversation.visitorId);
  await enqueueRows(tx, outboxRows(key, [globalChannel(ctx.bid), ctx.visitorChannel], 'conversation.queued', data));
}
