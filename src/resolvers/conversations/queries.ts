import { and, asc, desc, eq, type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';
import { type Conversation, conversations, visitors } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { chargeVisitorRead } from '../budgets/chat.js';
import { latestConversation, openConversation, requireMerchantVisitor } from '../chat-rows.js';
import { decodeCursor, encodeCursor } from '../cursors.js';
import { parseInput, text } from '../inputs.js';
import type { ApiKeyViewer } from '../integration/api-keys/authenticate.js';
import { requireScope } from '../integration/api-keys/scopes.js';
import { type AgentViewer, requireOnlineReception, type VisitorViewer } from '../viewer.js';
import { id, type VisitorRef, visitorRef } from './context.js';
import { type ConversationView, selectViews, toView, viewOf } from './view.js';

/** Reading conversations: a visitor's conversation, and the agents' pages of them. */

export const listInput = z.object({
  scope: z.enum(['mine', 'queue', 'all']).default('mine'),
  after: text(200).optional(),
  first: z.number().int().min(1).max(100).default(20),
  /** Only conversations carrying this label of the merchant (docs/desk.md "Labels"). */
  labelId: id.optional(),
});
export type ListInput = z.input<typeof listInput>;

/**
 * The conversation of a visitor: its open one, else its latest (closed) one; null when it never
 * chatted. An agent addresses a visitor of its own merchant (another's is NOT_FOUND).
 */
export async function loadConversation(
  deps: Deps,
  viewer: AgentViewer | VisitorViewer | ApiKeyViewer,
  given: Partial<VisitorRef> = {},
): Promise<ConversationView | null> {
  let visitorId: string;
  if (viewer.kind === 'visitor') {
    // A visitor's reads have a budget, counted before any statement (budgets/chat.ts).
    await chargeVisitorRead(deps, viewer);
    visitorId = viewer.visitorId;
  } else {
    if (viewer.kind === 'agent') requireOnlineReception(viewer);
    else requireScope(viewer, 'conversations:read');
    visitorId = parseInput(visitorRef, given).visitorId;
    await requireMerchantVisitor(deps.db, viewer.merchantId, visitorId);
  }
  const ctx =
    (await openConversation(deps.db, viewer.merchantId, visitorId)) ??
    (await latestConversation(deps.db, viewer.merchantId, visitorId));
  return ctx ? viewOf(deps.db, ctx.conversation.id, viewer.kind === 'visitor' ? 'visitor' : 'agent') : null;
}

const NOT_A_CURSOR = 'after is not a cursor of this list';

/** A list's filter, order and cursor key: each scope pages by its own order. */
interface ListPlan {
  where: (SQL | undefined)[];
  order: SQL[];
  key: (c: Conversation) => (string | number)[];
}

function planList(
  viewer: AgentViewer | ApiKeyViewer,
  scope: 'mine' | 'queue' | 'all',
  after: string | undefined,
): ListPlan {
  const where: (SQL | undefined)[] = [eq(conversations.merchantId, viewer.merchantId)];
  if (scope === 'queue') {
    where.push(eq(conversations.state, 'queued'));
    if (after) {
      const [at, cid] = decodeCursor('instant', after, NOT_A_CURSOR);
      where.push(sql`(${conversations.queuedAt}, ${conversations.id}) > (${at}::timestamptz, ${cid})`);
    }
    return {
      where,
      order: [asc(conversations.queuedAt), asc(conversations.id)],
      key: (c) => [c.queuedAt.toISOString(), c.id],
    };
  }
  if (scope === 'mine' && viewer.kind === 'agent') {
    where.push(eq(conversations.state, 'active'), eq(conversations.agentId, viewer.agentId));
    if (after) {
      const [ts, cid] = decodeCursor('seconds', after, NOT_A_CURSOR);
      where.push(sql`(${conversations.timestamp}, ${conversations.id}) < (${ts}::bigint, ${cid})`);
    }
    return { where, order: [desc(conversations.timestamp), desc(conversations.id)], key: (c) => [c.timestamp, c.id] };
  }
  if (after) {
    const [at, cid] = decodeCursor('instant', after, NOT_A_CURSOR);
    where.push(sql`(${conversations.createdAt}, ${conversations.id}) < (${at}::timestamptz, ${cid})`);
  }
  return {
    where,
    order: [desc(conversations.createdAt), desc(conversations.id)],
    key: (c) => [c.createdAt.toISOString(), c.id],
  };
}

/**
 * Conversations of the agent's merchant, one page: `mine` (its active ones, latest activity
 * first), `queue` (queued ones, oldest first: the order they are served in) or `all` (every
 * conversation, newest first; administrators only). `after` is the `endCursor` of the previous page.
 * An API key with `conversations:read` reads `all` (its default) or `queue`; it has no `mine`.
 */
export async function listConversations(deps: Deps, viewer: AgentViewer | ApiKeyViewer, given: ListInput = {}) {
  if (viewer.kind === 'apiKey') requireScope(viewer, 'conversations:read');
  else requireOnlineReception(viewer);
  const input = parseInput(listInput, viewer.kind === 'apiKey' ? { ...given, scope: given.scope ?? 'all' } : given);
  if (viewer.kind === 'apiKey' && input.scope === 'mine')
    throw new DomainError('BAD_USER_INPUT', 'scope mine is an agent’s: an API key reads all or queue');
  if (input.scope === 'all' && viewer.kind === 'agent' && viewer.level !== 'admin')
    throw new DomainError('FORBIDDEN', 'scope all is for administrators');
  const { where, order, key } = planList(viewer, input.scope, input.after);
  if (input.labelId)
    where.push(
      sql`exists (select 1 from "conversation_labels" cl join "labels" l on l.id = cl.label_id where cl.conversation_id = "conversations"."id" and cl.label_id = ${input.labelId} and l.merchant_id = ${viewer.merchantId})`,
    );
  const rows = await selectViews(deps.db, 'agent')
    .where(and(eq(visitors.merchantId, viewer.merchantId), ...where))
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
