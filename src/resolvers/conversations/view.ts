import { eq, sql } from 'drizzle-orm';
import { agents, type Conversation, conversations, visitors } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import type { AgentBrief } from '../event-catalog.js';
import type { Tx } from '../outbox/enqueue.js';

/**
 * Conversations (this folder): assignment with automatic routing and a FIFO queue (routing.ts),
 * claim and pin (agent-actions.ts), transfer (transfer.ts), close, either side or idle
 * (closing.ts), rating (rating.ts), reading (queries.ts). Every transition is a compare-and-set
 * on the conversation's state (and version) inside a transaction that also writes the system
 * message and the outbox rows of its events; events are published after the commit (outbox/).
 *
 * Lock order, so concurrent operations never deadlock: agent rows (by id) first, then
 * conversation rows.
 *
 * This file: a conversation as clients see it (`ConversationView`) and the SQL that derives it.
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

// Subqueries name the outer columns in full: drizzle leaves a column unqualified in a
// single-table select, where it would bind to the subquery's own table.
/** Visitor messages after the agent's read position: the `unread_count` of a `chatting` entry. */
export const unreadForAgent = sql<number>`(select count(*)::int from "messages" um where um.conversation_id = "conversations"."id" and um.seq > "conversations"."agent_read_seq" and um.sender_type = 'visitor')`;
/** Agent messages after the visitor's read position. */
export const unreadForVisitor = sql<number>`(select count(*)::int from "messages" um where um.conversation_id = "conversations"."id" and um.seq > "conversations"."visitor_read_seq" and um.sender_type = 'agent')`;
/** Position in the queue of its group (higher priority first, then oldest first), null unless queued. */
export const queuePositionSql = sql<
  number | null
>`case when "conversations"."state" = 'queued' then (select count(*)::int from "conversations" q where q.merchant_id = "conversations"."merchant_id" and q.state = 'queued' and q.group_id is not distinct from "conversations"."group_id" and (q.priority > "conversations"."priority" or (q.priority = "conversations"."priority" and (q.queued_at, q.id) <= ("conversations"."queued_at", "conversations"."id")))) end`;

/**
 * Conversations with what their view needs, for the `side` that reads them (its unread count):
 * joined to the visitor and the assigned agent. Callers add their `where`, order and limit.
 */
export const selectViews = (db: Deps['db'] | Tx, side: 'agent' | 'visitor') =>
  db
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
    .leftJoin(agents, eq(agents.id, conversations.agentId));

export async function viewOf(
  db: Deps['db'] | Tx,
  conversationId: string,
  side: 'agent' | 'visitor',
): Promise<ConversationView> {
  const [row] = await selectViews(db, side).where(eq(conversations.id, conversationId)).limit(1);
  if (!row) throw new DomainError('NOT_FOUND', 'No such conversation');
  return toView(row);
}

export function toView(row: {
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
