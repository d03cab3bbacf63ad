import { and, asc, count, desc, eq, inArray, ne, sql } from 'drizzle-orm';
import { z } from 'zod';
import { type Agent, agentGroups, agents, conversations, merchants } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { newId } from '../../ids.js';
import { groupOpenAt } from '../availability/calendars.js';
import { leaveMessage, type MessageLeftNotice, nobodyToAnswer, noticeOf } from '../availability/messages-left.js';
import { chooseAgent, type RoutingPolicy } from '../availability/routing/policies.js';
import { chargeConversationOpened } from '../budgets/chat.js';
import { appendMessage, type ConversationContext, openConversation, selectContexts } from '../chat-rows.js';
import type { AgentBrief } from '../event-catalog.js';
import { agentChannel, globalChannel } from '../events.js';
import { parseInput } from '../inputs.js';
import { enqueueWebhookEvent } from '../integration/webhooks/events.js';
import { enqueueEvent, publishOutbox, type Tx } from '../outbox.js';
import { TICKET_AGENT, type VisitorViewer } from '../viewer.js';
import { id } from './context.js';
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

export const assignInput = z.object({ groupId: id.optional(), agentId: id.optional() });
export type AssignInput = z.input<typeof assignInput>;

/**
 * The spec's step 2: the visitor's open conversation (idempotent: never a second one), or a new
 * one that joins its group's queue and is routed at once when an agent is available.
 */
export async function assignAgent(deps: Deps, viewer: VisitorViewer, given: AssignInput = {}): Promise<AssignResult> {
  const input = parseInput(assignInput, given);
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
  const created = await openNewConversation(deps, viewer.merchantId, viewer.visitorId, groupId);
  // Nobody can answer (out of hours, nobody of the group online): kept as a message left, not routed.
  const nobody = created ? await nobodyToAnswer(deps, viewer.merchantId, groupId) : null;
  if (nobody) await leaveMessage(deps, viewer.merchantId, viewer.visitorId, nobody);
  else if (created)
    await drainQueue(deps, viewer.merchantId, preferred ? { conversationId: created, agentId: preferred } : undefined);
  if (created) await announceIfWaiting(deps, created);
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
 * Inserts a queued conversation; the partial unique index makes a concurrent second insert do
 * nothing (one open conversation per visitor). Returns the new id, or undefined when one
 * already existed.
 */
export async function openNewConversation(
  deps: Deps,
  merchantId: string,
  visitorId: string,
  groupId: string | null,
): Promise<string | undefined> {
  const now = deps.now();
  return deps.db.transaction(async (tx) => {
    const [row] = await tx
      .insert(conversations)
      .values({
        id: newId('c'),
        merchantId,
        visitorId,
        groupId,
        state: 'queued',
        timestamp: Math.floor(now / 1000),
        createdAt: new Date(now),
        queuedAt: new Date(now),
      })
      .onConflictDoNothing()
      .returning();
    if (!row) return undefined;
    const ctx = await openConversation(tx, merchantId, visitorId);
    if (!ctx) return undefined;
    const created = { conversationId: row.id, visitorId, state: 'queued' as const, groupId };
    await enqueueWebhookEvent(tx, merchantId, row.id, 'conversation.created', created, now);
    return row.id;
  });
}

/**
 * `conversation.queued` for a new conversation only when it really waits: routing had no agent
 * for it (or nobody can answer and it is kept as a message left). The row lock orders this with
 * a drain on another instance: one that assigned it first leaves nothing to announce; one that
 * comes after publishes its `conversation.assigned` after this event.
 */
async function announceIfWaiting(deps: Deps, conversationId: string) {
  const announced = await deps.db.transaction(async (tx) => {
    const [waiting] = await tx
      .select({ merchantId: conversations.merchantId, visitorId: conversations.visitorId })
      .from(conversations)
      .where(and(eq(conversations.id, conversationId), eq(conversations.state, 'queued')))
      .for('update');
    if (!waiting) return false;
    const ctx = await openConversation(tx, waiting.merchantId, waiting.visitorId);
    if (!ctx || ctx.conversation.id !== conversationId) return false;
    await enqueueQueued(tx, ctx);
    return true;
  });
  if (announced) await publishOutbox(deps);
}

/** Writes `conversation.queued` (with the queue position) for the merchant's agents and the visitor. */
export async function enqueueQueued(tx: Tx, ctx: ConversationContext) {
  const [position] = await tx
    .select({ n: queuePositionSql })
    .from(conversations)
    .where(eq(conversations.id, ctx.conversation.id));
  const data = {
    conversationId: ctx.conversation.id,
    visitorId: ctx.conversation.visitorId,
    state: 'queued' as const,
    groupId: ctx.conversation.groupId,
    queuePosition: Number(position?.n ?? 1),
  };
  await enqueueEvent(tx, globalChannel(ctx.bid), 'conversation.queued', data);
  await enqueueEvent(tx, ctx.visitorChannel, 'conversation.queued', data);
}

/** An agent's capacity: its own maximum, else the merchant's. */
const capacityOf = (agent: Agent, merchantMax: number) => agent.maxConcurrentChats ?? merchantMax;

/** Agents of the merchant that routing may give conversations to now: online (presence), enabled, reception. */
async function routableAgents(deps: Deps, merchantId: string): Promise<string[]> {
  const candidates = await deps.db
    .select()
    .from(agents)
    .where(and(eq(agents.merchantId, merchantId), eq(agents.disabled, false), ne(agents.level, TICKET_AGENT)));
  const states = await Promise.all(candidates.map((a) => deps.presence.stateOf(a.id)));
  return candidates.filter((_, i) => states[i] === 'online').map((a) => a.id);
}

/** What routing decides from, loaded inside its transaction with the candidate agents' rows locked. */
interface Routing {
  locked: Agent[];
  merchant: { max: number; bid: string };
  defaultGroupId: string | null;
  /** Active conversations per locked agent. */
  active: Map<string, number>;
  /** Each group's policy and round-robin cursor (read after the agents' rows are locked). */
  groups: Map<string, { policy: RoutingPolicy; cursor: string | null }>;
}

async function loadRouting(tx: Tx, merchantId: string, online: string[]): Promise<Routing | undefined> {
  const locked = await tx
    .select()
    .from(agents)
    .where(and(inArray(agents.id, online), eq(agents.merchantId, merchantId), eq(agents.disabled, false)))
    .orderBy(asc(agents.id))
    .for('update');
  const [merchant] = await tx
    .select({ max: merchants.maxConcurrentChats, bid: merchants.bid })
    .from(merchants)
    .where(eq(merchants.id, merchantId));
  const [defaultGroup] = await tx
    .select({ id: agentGroups.id })
    .from(agentGroups)
    .where(and(eq(agentGroups.merchantId, merchantId), eq(agentGroups.isDefault, true)));
  if (!merchant || locked.length === 0) return undefined;
  const active = new Map<string, number>();
  for (const { agentId, n } of await tx
    .select({ agentId: conversations.agentId, n: count() })
    .from(conversations)
    .where(
      and(
        eq(conversations.state, 'active'),
        inArray(
          conversations.agentId,
          locked.map((a) => a.id),
        ),
      ),
    )
    .groupBy(conversations.agentId))
    if (agentId) active.set(agentId, Number(n));
  const groups = new Map(
    (
      await tx
        .select({ id: agentGroups.id, policy: agentGroups.routing, cursor: agentGroups.routingCursor })
        .from(agentGroups)
        .where(eq(agentGroups.merchantId, merchantId))
    ).map((g) => [g.id, { policy: g.policy as RoutingPolicy, cursor: g.cursor }]),
  );
  return { locked, merchant, defaultGroupId: defaultGroup?.id ?? null, active, groups };
}

/**
 * The agent a queued conversation goes to: the preferred one if eligible, else by its group's
 * policy (least busy, round robin, last agent) among the group's online agents under capacity.
 */
async function pickAgent(
  tx: Tx,
  r: Routing,
  ctx: ConversationContext,
  preferred: { conversationId: string; agentId: string } | undefined,
): Promise<Agent | undefined> {
  const groupOf = (a: Agent) => a.groupId ?? r.defaultGroupId;
  const group = ctx.conversation.groupId ?? r.defaultGroupId;
  const eligible = r.locked.filter(
    (a) => groupOf(a) === group && (r.active.get(a.id) ?? 0) < capacityOf(a, r.merchant.max),
  );
  if (eligible.length === 0) return undefined;
  const wanted =
    preferred && preferred.conversationId === ctx.conversation.id
      ? eligible.find((a) => a.id === preferred.agentId)
      : undefined;
  if (wanted) return wanted;
  const policy = (group && r.groups.get(group)) || { policy: 'LEAST_BUSY' as const, cursor: null };
  const lastAgentId = policy.policy === 'LAST_AGENT' ? await previousAgentOf(tx, ctx) : null;
  return chooseAgent(eligible, { ...policy, active: r.active, lastAgentId });
}

/** The agent of the visitor's latest earlier conversation (for the last-agent policy). */
async function previousAgentOf(tx: Tx, ctx: ConversationContext): Promise<string | null> {
  const [row] = await tx
    .select({ agentId: conversations.agentId })
    .from(conversations)
    .where(
      and(
        eq(conversations.merchantId, ctx.conversation.merchantId),
        eq(conversations.visitorId, ctx.conversation.visitorId),
        ne(conversations.id, ctx.conversation.id),
        sql`${conversations.agentId} is not null`,
      ),
    )
    .orderBy(desc(conversations.createdAt))
    .limit(1);
  return row?.agentId ?? null;
}

/**
 * Serves the merchant's queue, oldest first: each queued conversation goes to the least busy
 * online agent of its group under capacity (ties: assigned longest ago). One transaction holds
 * the candidate agents' rows (so two instances draining at once take turns and never exceed a
 * capacity) and assigns with a compare-and-set on `state = 'queued'` (so each conversation is
 * assigned exactly once). Returns how many it assigned.
 */
export async function drainQueue(
  deps: Deps,
  merchantId: string,
  preferred?: { conversationId: string; agentId: string },
): Promise<number> {
  const online = await routableAgents(deps, merchantId);
  if (online.length === 0) return 0;
  const now = deps.now();
  const assigned = await deps.db.transaction(async (tx) => {
    const routing = await loadRouting(tx, merchantId, online);
    if (!routing) return 0;
    const queued = await selectContexts(tx)
      .where(and(eq(conversations.merchantId, merchantId), eq(conversations.state, 'queued')))
      .orderBy(asc(conversations.queuedAt), asc(conversations.id))
      .limit(500)
      .for('update', { of: conversations });
    let n = 0;
    const open = new Map<string | null, boolean>();
    for (const ctx of queued) {
      // Out of business hours a group's conversations wait (messages left) until it opens.
      const group = ctx.conversation.groupId ?? routing.defaultGroupId;
      if (!open.has(group)) open.set(group, await groupOpenAt(tx, merchantId, group, now));
      if (!open.get(group)) continue;
      const agent = await pickAgent(tx, routing, ctx, preferred);
      if (!agent) continue;
      if (await assignInTx(deps, tx, ctx, agent, 'routing', now)) {
        routing.active.set(agent.id, (routing.active.get(agent.id) ?? 0) + 1);
        agent.lastAssignedAt = new Date(now);
        const policy = group ? routing.groups.get(group) : undefined;
        if (group && policy?.policy === 'ROUND_ROBIN') {
          // The cursor lives in the group's row: the next drain, on any instance, continues from it.
          policy.cursor = agent.id;
          await tx.update(agentGroups).set({ routingCursor: agent.id }).where(eq(agentGroups.id, group));
        }
        n++;
      }
    }
    return n;
  });
  if (assigned > 0) await publishOutbox(deps);
  return assigned;
}

/** Compare-and-set queued → active for `agent`, with the system message and the events. */
export async function assignInTx(
  deps: Deps,
  tx: Tx,
  ctx: ConversationContext,
  agent: Agent,
  by: 'routing' | 'claim',
  now: number,
): Promise<boolean> {
  const c = ctx.conversation;
  const [updated] = await tx
    .update(conversations)
    .set({ state: 'active', agentId: agent.id, version: c.version + 1, assignedAt: new Date(now) })
    .where(and(eq(conversations.id, c.id), eq(conversations.state, 'queued'), eq(conversations.version, c.version)))
    .returning();
  if (!updated) return false;
  await tx
    .update(agents)
    .set({ lastAssignedAt: new Date(now) })
    .where(eq(agents.id, agent.id));
  ctx.conversation = updated;
  const brief = { agentId: agent.id, nickname: agent.nickname, avatar: agent.avatar };
  await appendMessage(deps, tx, ctx, {
    senderType: 'system',
    senderId: '',
    clientMsgId: null,
    type: 'system',
    content: `${agent.nickname} joined the conversation`,
    meta: { event: 'assigned', agent_id: agent.id, nickname: agent.nickname, by },
  });
  const data = { conversationId: c.id, visitorId: c.visitorId, state: 'active' as const, agent: brief, by };
  await enqueueEvent(tx, globalChannel(ctx.bid), 'conversation.assigned', data);
  await enqueueEvent(tx, agentChannel(agent.id), 'conversation.assigned', data);
  await enqueueEvent(tx, ctx.visitorChannel, 'conversation.assigned', data);
  await enqueueWebhookEvent(tx, c.merchantId, c.id, 'conversation.assigned', data, now);
  return true;
}

/** Drains the queue of a merchant named by bid (presence changes know the bid); never throws. */
export async function drainQueueQuietly(deps: Deps, merchant: { bid: string } | { merchantId: string }) {
  try {
    let merchantId: string | undefined;
    if ('merchantId' in merchant) merchantId = merchant.merchantId;
    else {
      const [row] = await deps.db.select({ id: merchants.id }).from(merchants).where(eq(merchants.bid, merchant.bid));
      merchantId = row?.id;
    }
    if (merchantId) await drainQueue(deps, merchantId);
  } catch (error) {
    deps.log.warn({ err: (error as Error).message }, 'chat: queue drain failed, the periodic drain retries');
  }
}

/** The periodic safety net: drains the queue of every merchant that has queued conversations. */
export async function drainAllQueues(deps: Deps): Promise<number> {
  const rows = await deps.db
    .selectDistinct({ merchantId: conversations.merchantId })
    .from(conversations)
    .where(eq(conversations.state, 'queued'));
  let n = 0;
  for (const { merchantId } of rows) n += await drainQueue(deps, merchantId);
  return n;
}
