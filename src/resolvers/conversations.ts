import { and, asc, count, desc, eq, inArray, isNull, ne, type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';
import {
  type Agent,
  agentGroups,
  agents,
  type Conversation,
  conversations,
  merchants,
  visitors,
} from '../db/schema.js';
import type { Deps } from '../deps.js';
import { badInput, DomainError } from '../errors.js';
import { newId } from '../ids.js';
import {
  appendMessage,
  type ConversationContext,
  latestConversation,
  openConversation,
  requireMerchantVisitor,
} from './chat-rows.js';
import type { AgentBrief } from './event-catalog.js';
import { agentChannel, globalChannel } from './events.js';
import { parseInput, text } from './inputs.js';
import { enqueueEvent, publishOutbox, type Tx } from './outbox.js';
import { type AgentViewer, requireOnlineReception, TICKET_AGENT, type VisitorViewer } from './viewer.js';

/**
 * Conversations: assignment with automatic routing and a FIFO queue, claim, transfer, close
 * (either side or idle), pin, list and rating. Every transition is a compare-and-set on the
 * conversation's state (and version) inside a transaction that also writes the system message
 * and the outbox rows of its events; events are published after the commit (outbox.ts).
 *
 * Lock order, so concurrent operations never deadlock: agent rows (by id) first, then
 * conversation rows.
 */

export type ConversationState = Conversation['state'];

export interface ConversationView {
  conversationId: string;
  visitorId: string;
  visitorName: string;
  state: ConversationState;
  agent: AgentBrief | null;
  groupId: string | null;
  /** Position in its group's queue from 1 while queued, else null. */
  queuePosition: number | null;
  lastSeq: number;
  /** Messages of the other side the viewer has not read (derived from the read seqs). */
  unreadCount: number;
  pinnedAt: number;
  /** Last activity, Unix seconds. */
  timestamp: number;
  /** Unix milliseconds. */
  createdAt: number;
  closedAt: number | null;
  closedBy: string | null;
  rating: { score: number; resolved: boolean | null; comment: string | null } | null;
}

/** The answer of assignAgent (`POST /visitor/chat/assign`). */
export interface AssignResult {
  conversationId: string;
  state: ConversationState;
  agent: AgentBrief | null;
  queuePosition: number | null;
}

// ---- inputs ------------------------------------------------------------------------------

const id = text(64).refine((s) => s.trim().length > 0, 'is required');
export const assignInput = z.object({ groupId: id.optional(), agentId: id.optional() });
export const visitorRef = z.object({ visitorId: id });
export const transferInput = z
  .object({ visitorId: id, toAgentId: id.optional(), groupId: id.optional() })
  .refine((i) => !(i.toAgentId && i.groupId), 'give either toAgentId or groupId, not both');
export const pinInput = z.object({ visitorId: id, pinned: z.boolean().default(true) });
export const listInput = z.object({
  scope: z.enum(['mine', 'queue', 'all']).default('mine'),
  after: text(200).optional(),
  first: z.number().int().min(1).max(100).default(20),
  /** Only conversations carrying this label of the merchant (docs/desk.md "Labels"). */
  labelId: id.optional(),
});
export const rateInput = z.object({
  conversationId: id.optional(),
  score: z.number().int().min(1).max(5),
  resolved: z.boolean().optional(),
  comment: text(1000).optional(),
});

// ---- reading -----------------------------------------------------------------------------

// Subqueries name the outer columns in full: drizzle leaves a column unqualified in a
// single-table select, where it would bind to the subquery's own table.
/** Visitor messages after the agent's read position: the `unread_count` of a `chatting` entry. */
export const unreadForAgent = sql<number>`(select count(*)::int from "messages" um where um.conversation_id = "conversations"."id" and um.seq > "conversations"."agent_read_seq" and um.sender_type = 'visitor')`;
/** Agent messages after the visitor's read position. */
export const unreadForVisitor = sql<number>`(select count(*)::int from "messages" um where um.conversation_id = "conversations"."id" and um.seq > "conversations"."visitor_read_seq" and um.sender_type = 'agent')`;
/** Position in the queue of its group (oldest first), null unless queued. */
const queuePositionSql = sql<
  number | null
>`case when "conversations"."state" = 'queued' then (select count(*)::int from "conversations" q where q.merchant_id = "conversations"."merchant_id" and q.state = 'queued' and q.group_id is not distinct from "conversations"."group_id" and (q.queued_at, q.id) <= ("conversations"."queued_at", "conversations"."id")) end`;

async function viewOf(
  db: Deps['db'] | Tx,
  conversationId: string,
  side: 'agent' | 'visitor',
): Promise<ConversationView> {
  const [row] = await db
    .select({
      c: conversations,
      visitorName: visitors.nickname,
      unread: side === 'agent' ? unreadForAgent : unreadForVisitor,
      queuePosition: queuePositionSql,
      agentNickname: agents.nickname,
      agentAvatar: agents.avatar,
    })
    .from(conversations)
    .innerJoin(visitors, eq(visitors.id, conversations.visitorId))
    .leftJoin(agents, eq(agents.id, conversations.agentId))
    .where(eq(conversations.id, conversationId))
    .limit(1);
  if (!row) throw new DomainError('NOT_FOUND', 'No such conversation');
  return toView(row);
}

function toView(row: {
  c: Conversation;
  visitorName: string;
  unread: number;
  queuePosition: number | null;
  agentNickname: string | null;
  agentAvatar: string | null;
}): ConversationView {
  const { c } = row;
  return {
    conversationId: c.id,
    visitorId: c.visitorId,
    visitorName: row.visitorName,
    state: c.state,
    agent: c.agentId ? { agentId: c.agentId, nickname: row.agentNickname ?? '', avatar: row.agentAvatar ?? '' } : null,
    groupId: c.groupId,
    queuePosition: row.queuePosition === null ? null : Number(row.queuePosition),
    lastSeq: c.lastSeq,
    unreadCount: Number(row.unread),
    pinnedAt: c.pinnedAt,
    timestamp: c.timestamp,
    createdAt: c.createdAt.getTime(),
    closedAt: c.closedAt?.getTime() ?? null,
    closedBy: c.closedBy,
    rating:
      c.ratingScore === null ? null : { score: c.ratingScore, resolved: c.ratingResolved, comment: c.ratingComment },
  };
}

/**
 * The conversation of a visitor: its open one, else its latest (closed) one; null when it never
 * chatted. An agent addresses a visitor of its own merchant (another's is NOT_FOUND).
 */
export async function loadConversation(
  deps: Deps,
  viewer: AgentViewer | VisitorViewer,
  raw: { visitorId?: string } = {},
): Promise<ConversationView | null> {
  let visitorId: string;
  if (viewer.kind === 'agent') {
    requireOnlineReception(viewer);
    visitorId = parseInput(visitorRef, raw).visitorId;
    await requireMerchantVisitor(deps.db, viewer.merchantId, visitorId);
  } else visitorId = viewer.visitorId;
  const ctx =
    (await openConversation(deps.db, viewer.merchantId, visitorId)) ??
    (await latestConversation(deps.db, viewer.merchantId, visitorId));
  return ctx ? viewOf(deps.db, ctx.conversation.id, viewer.kind) : null;
}

const encodeCursor = (values: (string | number)[]) => Buffer.from(JSON.stringify(values)).toString('base64url');
function decodeCursor(cursor: string): (string | number)[] {
  try {
    const values = JSON.parse(Buffer.from(cursor, 'base64url').toString());
    if (Array.isArray(values) && values.every((v) => typeof v === 'string' || typeof v === 'number')) return values;
  } catch {
    // fall through
  }
  throw badInput('after is not a cursor of this list');
}

/**
 * Conversations of the agent's merchant, one page: `mine` (its active ones, latest activity
 * first), `queue` (queued ones, oldest first: the order they are served in) or `all` (every
 * conversation, newest first; administrators only). `after` is the `endCursor` of the previous page.
 */
export async function listConversations(deps: Deps, viewer: AgentViewer, raw: unknown) {
  requireOnlineReception(viewer);
  const input = parseInput(listInput, raw ?? {});
  if (input.scope === 'all' && viewer.level !== 'admin')
    throw new DomainError('FORBIDDEN', 'scope all is for administrators');
  const where: (SQL | undefined)[] = [eq(conversations.merchantId, viewer.merchantId)];
  if (input.labelId)
    where.push(
      sql`exists (select 1 from "conversation_labels" cl join "labels" l on l.id = cl.label_id where cl.conversation_id = "conversations"."id" and cl.label_id = ${input.labelId} and l.merchant_id = ${viewer.merchantId})`,
    );
  let order: SQL[];
  let key: (c: Conversation) => (string | number)[];
  if (input.scope === 'queue') {
    where.push(eq(conversations.state, 'queued'));
    order = [asc(conversations.queuedAt), asc(conversations.id)];
    key = (c) => [c.queuedAt.toISOString(), c.id];
    if (input.after) {
      const [at, cid] = decodeCursor(input.after);
      where.push(sql`(${conversations.queuedAt}, ${conversations.id}) > (${String(at)}::timestamptz, ${String(cid)})`);
    }
  } else {
    if (input.scope === 'mine') {
      where.push(eq(conversations.state, 'active'), eq(conversations.agentId, viewer.agentId));
      order = [desc(conversations.timestamp), desc(conversations.id)];
      key = (c) => [c.timestamp, c.id];
      if (input.after) {
        const [ts, cid] = decodeCursor(input.after);
        where.push(sql`(${conversations.timestamp}, ${conversations.id}) < (${Number(ts)}::bigint, ${String(cid)})`);
      }
    } else {
      order = [desc(conversations.createdAt), desc(conversations.id)];
      key = (c) => [c.createdAt.toISOString(), c.id];
      if (input.after) {
        const [at, cid] = decodeCursor(input.after);
        where.push(
          sql`(${conversations.createdAt}, ${conversations.id}) < (${String(at)}::timestamptz, ${String(cid)})`,
        );
      }
    }
  }
  const rows = await deps.db
    .select({
      c: conversations,
      visitorName: visitors.nickname,
      unread: unreadForAgent,
      queuePosition: queuePositionSql,
      agentNickname: agents.nickname,
      agentAvatar: agents.avatar,
    })
    .from(conversations)
    .innerJoin(visitors, and(eq(visitors.id, conversations.visitorId), eq(visitors.merchantId, viewer.merchantId)))
    .leftJoin(agents, eq(agents.id, conversations.agentId))
    .where(and(...where))
    .orderBy(...order)
    .limit(input.first + 1);
  const page = rows.slice(0, input.first);
  const last = page.at(-1);
  return {
    nodes: page.map(toView),
    hasNextPage: rows.length > input.first,
    endCursor: last ? encodeCursor(key(last.c)) : null,
  };
}

// ---- assignment and the queue ------------------------------------------------------------

/**
 * The spec's step 2: the visitor's open conversation (idempotent: never a second one), or a new
 * one that joins its group's queue and is routed at once when an agent is available.
 */
export async function assignAgent(deps: Deps, viewer: VisitorViewer, raw: unknown = {}): Promise<AssignResult> {
  const input = parseInput(assignInput, raw ?? {});
  const existing = await openConversation(deps.db, viewer.merchantId, viewer.visitorId);
  if (existing) return assignResult(deps, existing.conversation.id);
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
  if (created)
    await drainQueue(deps, viewer.merchantId, preferred ? { conversationId: created, agentId: preferred } : undefined);
  const ctx = await openConversation(deps.db, viewer.merchantId, viewer.visitorId);
  if (!ctx) throw new DomainError('CONVERSATION_CLOSED', 'The conversation was closed meanwhile; assign again');
  return assignResult(deps, ctx.conversation.id);
}

async function assignResult(deps: Deps, conversationId: string): Promise<AssignResult> {
  const view = await viewOf(deps.db, conversationId, 'visitor');
  return { conversationId, state: view.state, agent: view.agent, queuePosition: view.queuePosition };
}

/** The requested group of the merchant, or its default group. */
async function groupFor(deps: Deps, merchantId: string, groupId: string | undefined): Promise<string | null> {
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
    await enqueueQueued(tx, ctx);
    return row.id;
  });
}

async function enqueueQueued(tx: Tx, ctx: ConversationContext) {
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
    if (!merchant || locked.length === 0) return 0;
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
    const queued = await tx
      .select({
        conversation: conversations,
        visitorChannel: visitors.channel,
        visitorName: visitors.nickname,
        bid: merchants.bid,
      })
      .from(conversations)
      .innerJoin(visitors, eq(visitors.id, conversations.visitorId))
      .innerJoin(merchants, eq(merchants.id, conversations.merchantId))
      .where(and(eq(conversations.merchantId, merchantId), eq(conversations.state, 'queued')))
      .orderBy(asc(conversations.queuedAt), asc(conversations.id))
      .limit(500)
      .for('update', { of: conversations });
    const groupOf = (a: Agent) => a.groupId ?? defaultGroup?.id ?? null;
    let n = 0;
    for (const ctx of queued) {
      const group = ctx.conversation.groupId ?? defaultGroup?.id ?? null;
      const eligible = locked.filter(
        (a) => groupOf(a) === group && (active.get(a.id) ?? 0) < capacityOf(a, merchant.max),
      );
      if (eligible.length === 0) continue;
      const wanted =
        preferred && preferred.conversationId === ctx.conversation.id
          ? eligible.find((a) => a.id === preferred.agentId)
          : undefined;
      const agent =
        wanted ??
        eligible.sort(
          (a, b) =>
            (active.get(a.id) ?? 0) - (active.get(b.id) ?? 0) ||
            (a.lastAssignedAt?.getTime() ?? 0) - (b.lastAssignedAt?.getTime() ?? 0) ||
            a.id.localeCompare(b.id),
        )[0];
      if (!agent) continue;
      if (await assignInTx(deps, tx, ctx, agent, 'routing', now)) {
        active.set(agent.id, (active.get(agent.id) ?? 0) + 1);
        agent.lastAssignedAt = new Date(now);
        n++;
      }
    }
    return n;
  });
  if (assigned > 0) await publishOutbox(deps);
  return assigned;
}

/** Compare-and-set queued → active for `agent`, with the system message and the events. */
async function assignInTx(
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

// ---- agent actions -----------------------------------------------------------------------

/** An agent takes a queued conversation; of two agents claiming one, exactly one wins. */
export async function claimConversation(deps: Deps, viewer: AgentViewer, raw: unknown): Promise<ConversationView> {
  requireOnlineReception(viewer);
  const { visitorId } = parseInput(visitorRef, raw);
  const now = deps.now();
  const conversationId = await deps.db.transaction(async (tx) => {
    const [agent] = await tx.select().from(agents).where(eq(agents.id, viewer.agentId)).for('update');
    if (!agent) throw new DomainError('SESSION_MISMATCH', 'Invalid parameter: agent not found, please log in again');
    const ctx = await requireOpen(tx, viewer.merchantId, visitorId);
    if (ctx.conversation.state !== 'queued')
      throw new DomainError('ALREADY_CLAIMED', 'This conversation already has an agent');
    if (!(await assignInTx(deps, tx, ctx, agent, 'claim', now)))
      throw new DomainError('ALREADY_CLAIMED', 'This conversation already has an agent');
    return ctx.conversation.id;
  });
  await publishOutbox(deps);
  return viewOf(deps.db, conversationId, 'agent');
}

async function requireOpen(tx: Tx, merchantId: string, visitorId: string) {
  await requireMerchantVisitor(tx, merchantId, visitorId);
  const ctx = await openConversation(tx, merchantId, visitorId, { lock: true });
  if (!ctx) throw new DomainError('CONVERSATION_CLOSED', 'This visitor has no open conversation');
  return ctx;
}

/** The open conversation must be active and this agent's (an administrator may act on any). */
function requireMine(viewer: AgentViewer, ctx: ConversationContext) {
  const c = ctx.conversation;
  if (c.state !== 'active') throw new DomainError('NOT_ASSIGNED', 'This conversation has no agent yet: claim it first');
  if (c.agentId !== viewer.agentId && viewer.level !== 'admin')
    throw new DomainError('NOT_ASSIGNED', 'This conversation is assigned to another agent');
}

/**
 * Hands an active conversation to another agent of the merchant (who must be online: not
 * offline, busy or away), or back to a group's queue (`groupId`, or its own group when neither
 * is given), where routing serves it like any other.
 */
export async function transferConversation(deps: Deps, viewer: AgentViewer, raw: unknown): Promise<ConversationView> {
  requireOnlineReception(viewer);
  const input = parseInput(transferInput, raw);
  const now = deps.now();
  let target: Agent | undefined;
  if (input.toAgentId) {
    [target] = await deps.db
      .select()
      .from(agents)
      .where(and(eq(agents.id, input.toAgentId), eq(agents.merchantId, viewer.merchantId)))
      .limit(1);
    if (!target) throw new DomainError('NOT_FOUND', 'No such agent');
    if (target.id === viewer.agentId) throw badInput('toAgentId is yourself');
    if (target.disabled || target.level === TICKET_AGENT || (await deps.presence.stateOf(target.id)) !== 'online')
      throw new DomainError('AGENT_UNAVAILABLE', 'That agent is not online');
  }
  const groupId = input.groupId ? await groupFor(deps, viewer.merchantId, input.groupId) : undefined;
  const conversationId = await deps.db.transaction(async (tx) => {
    if (target) await tx.select({ id: agents.id }).from(agents).where(eq(agents.id, target.id)).for('update');
    const ctx = await requireOpen(tx, viewer.merchantId, input.visitorId);
    requireMine(viewer, ctx);
    const c = ctx.conversation;
    const fromAgentId = c.agentId as string;
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
    // The old agent sees the system message too: it is the last thing of the conversation it gets.
    await enqueueEvent(tx, agentChannel(fromAgentId), 'message.created', {
      message: await appendMessage(deps, tx, ctx, {
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
      }),
    });
    const data = {
      conversationId: c.id,
      visitorId: c.visitorId,
      state: updated.state,
      fromAgentId,
      to,
      groupId: updated.groupId,
    };
    for (const channel of new Set([
      globalChannel(ctx.bid),
      agentChannel(fromAgentId),
      ...(to ? [agentChannel(to.agentId)] : []),
      ctx.visitorChannel,
    ]))
      await enqueueEvent(tx, channel, 'conversation.transferred', data);
    if (!to) await enqueueQueued(tx, ctx);
    return c.id;
  });
  await publishOutbox(deps);
  // The transferring agent's capacity freed up, and a re-queued conversation waits: serve the queue.
  await drainQueueQuietly(deps, { merchantId: viewer.merchantId });
  return viewOf(deps.db, conversationId, 'agent');
}

/** Pins (`pinned` true, the default) or unpins an active conversation of the agent. */
export async function pinConversation(deps: Deps, viewer: AgentViewer, raw: unknown): Promise<ConversationView> {
  requireOnlineReception(viewer);
  const input = parseInput(pinInput, raw);
  const conversationId = await deps.db.transaction(async (tx) => {
    const ctx = await requireOpen(tx, viewer.merchantId, input.visitorId);
    requireMine(viewer, ctx);
    await tx
      .update(conversations)
      .set({ pinnedAt: input.pinned ? Math.floor(deps.now() / 1000) : 0 })
      .where(eq(conversations.id, ctx.conversation.id));
    return ctx.conversation.id;
  });
  return viewOf(deps.db, conversationId, 'agent');
}

// ---- closing and rating ------------------------------------------------------------------

export type ClosedBy = 'visitor' | 'agent' | 'idle';

/**
 * Closes the open conversation of a visitor: by the visitor itself, by its agent (agents address
 * it by `visitorId`), or by the idle sweep. Frees the agent's capacity (the queue is served) and
 * invites the visitor to rate when the merchant's switches say so.
 */
export async function closeConversation(
  deps: Deps,
  viewer: AgentViewer | VisitorViewer,
  raw: unknown = {},
): Promise<ConversationView> {
  let visitorId: string;
  if (viewer.kind === 'agent') {
    requireOnlineReception(viewer);
    visitorId = parseInput(visitorRef, raw).visitorId;
  } else visitorId = viewer.visitorId;
  const conversationId = await deps.db.transaction(async (tx) => {
    const ctx = await requireOpen(tx, viewer.merchantId, visitorId);
    if (viewer.kind === 'agent' && ctx.conversation.state === 'active') requireMine(viewer, ctx);
    await closeInTx(deps, tx, ctx, viewer.kind);
    return ctx.conversation.id;
  });
  await afterClose(deps, viewer.merchantId);
  return viewOf(deps.db, conversationId, viewer.kind);
}

async function closeInTx(deps: Deps, tx: Tx, ctx: ConversationContext, closedBy: ClosedBy): Promise<boolean> {
  const c = ctx.conversation;
  const now = deps.now();
  const [updated] = await tx
    .update(conversations)
    .set({ state: 'closed', version: c.version + 1, closedAt: new Date(now), closedBy, pinnedAt: 0 })
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
  for (const channel of [
    globalChannel(ctx.bid),
    ...(updated.agentId ? [agentChannel(updated.agentId)] : []),
    ctx.visitorChannel,
  ])
    await enqueueEvent(tx, channel, 'conversation.closed', data);
  const [merchant] = await tx
    .select({ switches: merchants.switches })
    .from(merchants)
    .where(eq(merchants.id, c.merchantId));
  const rating = merchant?.switches.session_invite_rating === 'on';
  const resolved = merchant?.switches.session_invite_resolved === 'on';
  if (rating || resolved)
    await enqueueEvent(tx, ctx.visitorChannel, 'conversation.rating_invited', {
      conversationId: c.id,
      rating,
      resolved,
    });
  return true;
}

async function afterClose(deps: Deps, merchantId: string) {
  await publishOutbox(deps);
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
        sql`${merchants.idleCloseMinutes} > 0`,
        sql`${conversations.timestamp} <= ${nowSeconds} - ${merchants.idleCloseMinutes} * 60`,
      ),
    )
    .limit(500);
  let closed = 0;
  const merchantIds = new Set<string>();
  for (const row of idle) {
    const done = await deps.db.transaction(async (tx) => {
      const ctx = await openConversation(tx, row.merchantId, row.visitorId, { lock: true });
      // Re-checked under the lock: a message that arrived meanwhile keeps it open.
      if (!ctx || ctx.conversation.id !== row.id) return false;
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
    }
  }
  if (closed > 0) await publishOutbox(deps);
  for (const merchantId of merchantIds) await drainQueueQuietly(deps, { merchantId });
  return closed;
}

/**
 * The visitor rates a closed conversation (its latest one unless `conversationId` is given),
 * once, while the merchant's `session_invite_rating` (or, for `resolved` alone,
 * `session_invite_resolved`) switch is on.
 */
export async function rateConversation(deps: Deps, viewer: VisitorViewer, raw: unknown): Promise<ConversationView> {
  const input = parseInput(rateInput, raw);
  const [merchant] = await deps.db
    .select({ switches: merchants.switches })
    .from(merchants)
    .where(eq(merchants.id, viewer.merchantId));
  if (merchant?.switches.session_invite_rating !== 'on')
    throw new DomainError('RATING_NOT_ALLOWED', 'Rating is not enabled for this merchant');
  if (input.resolved !== undefined && merchant.switches.session_invite_resolved !== 'on')
    throw new DomainError('RATING_NOT_ALLOWED', 'Resolved feedback is not enabled for this merchant');
  const conversationId = await deps.db.transaction(async (tx) => {
    const [row] = await tx
      .select({
        conversation: conversations,
        visitorChannel: visitors.channel,
        visitorName: visitors.nickname,
        bid: merchants.bid,
      })
      .from(conversations)
      .innerJoin(visitors, eq(visitors.id, conversations.visitorId))
      .innerJoin(merchants, eq(merchants.id, conversations.merchantId))
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
    return rated.id;
  });
  await publishOutbox(deps);
  return viewOf(deps.db, conversationId, 'visitor');
}
