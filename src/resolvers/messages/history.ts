import { and, asc, desc, eq, or, type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';
import { attachments, conversations, merchants, messages } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { badInput } from '../../errors.js';
import { attachmentViewOf } from '../attachments/download.js';
import { chargeVisitorRead } from '../budgets/chat.js';
import { latestConversation, requireMerchantVisitor, toMessageView } from '../chat-rows.js';
import { decodeCursor, encodeCursor } from '../cursors.js';
import type { MessageView } from '../event-catalog.js';
import { parseInput, text } from '../inputs.js';
import type { ApiKeyViewer } from '../integration/api-keys/authenticate.js';
import { requireScope } from '../integration/api-keys/scopes.js';
import type { AgentViewer } from '../viewer.js';
import { type ChatViewer, id, targetVisitor } from './target.js';

/** History pages spanning the visitor's conversations. */

/** Largest history page. */
export const MAX_PAGE = 100;

export const historyInput = z.object({
  visitorId: id.optional(),
  before: text(200).optional(),
  after: text(200).optional(),
  limit: z.number().int().min(1).max(MAX_PAGE).default(20),
});

export type HistoryInput = z.input<typeof historyInput>;

/** The visitor a key names (it has no visitor of its own). */
function requiredVisitor(_viewer: ApiKeyViewer, visitorId: string | undefined): string {
  if (!visitorId) throw badInput('visitorId is required');
  return visitorId;
}

export interface MessagePage {
  /** Oldest first within the page. */
  messages: MessageView[];
  /** Whether there are more messages in the direction of the request (older for `before` and the first page). */
  hasMore: boolean;
  /** Pass as `before` for the previous (older) page; null when the page is empty. */
  startCursor: string | null;
  /** Pass as `after` for what follows. */
  endCursor: string | null;
}

const encodePosition = (conversationId: string, seq: number) => encodeCursor([conversationId, seq]);

/** A position: a bare seq (of the visitor's latest conversation) or a cursor of a page (cursors.ts checks it). */
async function decodePosition(
  deps: Deps,
  merchantId: string,
  visitorId: string,
  value: string,
): Promise<{ conversationId: string; seq: number }> {
  if (/^\d{1,9}$/.test(value)) {
    const latest = await latestConversation(deps.db, merchantId, visitorId);
    return { conversationId: latest?.conversation.id ?? '', seq: Number(value) };
  }
  const [conversationId, seq] = decodeCursor(
    'message',
    value,
    'before/after must be a seq or a cursor of a message page',
  );
  return { conversationId, seq };
}

/** Whether `history_only_mine` applies to the agent: the merchant turned it on and it is not an administrator. */
export async function historyOnlyMine(deps: Deps, viewer: AgentViewer): Promise<boolean> {
  if (viewer.level === 'admin') return false;
  const [m] = await deps.db
    .select({ settings: merchants.workbenchSettings })
    .from(merchants)
    .where(eq(merchants.id, viewer.merchantId));
  return m?.settings.history_only_mine === true;
}

/**
 * A page of a visitor's messages across all its conversations, in conversation then `seq`
 * order. Without `before`/`after`: the newest `limit`; `before`: the `limit` just older (for
 * scrolling back); `after`: the `limit` just newer (to fill a `seq` hole). Under
 * `history_only_mine` an agent sees only the conversations it was assigned and the queued one.
 */
export async function listMessages(
  deps: Deps,
  viewer: ChatViewer | ApiKeyViewer,
  given: HistoryInput = {},
): Promise<MessagePage> {
  // Anyone can get a visitor token: a visitor's reads have a budget, counted before any statement.
  if (viewer.kind === 'visitor') await chargeVisitorRead(deps, viewer);
  const input = parseInput(historyInput, given);
  if (input.before && input.after) throw badInput('give before or after, not both');
  // A key with conversations:read reads any visitor of its merchant, as an admin would.
  const visitorId =
    viewer.kind === 'apiKey'
      ? requiredVisitor(requireScope(viewer, 'conversations:read'), input.visitorId)
      : targetVisitor(viewer, input.visitorId);
  if (viewer.kind !== 'visitor') await requireMerchantVisitor(deps.db, viewer.merchantId, visitorId);
  const where: (SQL | undefined)[] = [eq(messages.merchantId, viewer.merchantId), eq(messages.visitorId, visitorId)];
  if (viewer.kind === 'agent' && (await historyOnlyMine(deps, viewer))) {
    where.push(
      or(
        eq(conversations.agentId, viewer.agentId),
        eq(conversations.state, 'queued'),
        sql`exists (select 1 from "messages" sm where sm.conversation_id = "conversations"."id" and sm.sender_type = 'system' and sm.meta->>'event' in ('assigned', 'transferred') and (sm.meta->>'agent_id' = ${viewer.agentId} or sm.meta->>'to_agent_id' = ${viewer.agentId}))`,
      ),
    );
  }
  const key = sql`(${conversations.createdAt}, ${conversations.id}, ${messages.seq})`;
  const at = (p: { conversationId: string; seq: number }) =>
    sql`((select cc.created_at from "conversations" cc where cc.id = ${p.conversationId}), ${p.conversationId}::text, ${p.seq}::int)`;
  const forward = Boolean(input.after);
  if (input.before)
    where.push(sql`${key} < ${at(await decodePosition(deps, viewer.merchantId, visitorId, input.before))}`);
  if (input.after)
    where.push(sql`${key} > ${at(await decodePosition(deps, viewer.merchantId, visitorId, input.after))}`);
  const rows = await deps.db
    .select({ m: messages, a: attachments })
    .from(messages)
    .innerJoin(conversations, eq(conversations.id, messages.conversationId))
    .leftJoin(attachments, eq(attachments.id, messages.attachmentId))
    .where(and(...where))
    .orderBy(
      ...(forward
        ? [asc(conversations.createdAt), asc(conversations.id), asc(messages.seq)]
        : [desc(conversations.createdAt), desc(conversations.id), desc(messages.seq)]),
    )
    .limit(input.limit + 1);
  const hasMore = rows.length > input.limit;
  const page = rows.slice(0, input.limit).map((r) => toMessageView(r.m, r.a && attachmentViewOf(deps, r.a)));
  if (!forward) page.reverse();
  const first = page[0];
  const last = page.at(-1);
  return {
    messages: page,
    hasMore,
    startCursor: first ? encodePosition(first.conversationId, first.seq) : null,
    endCursor: last ? encodePosition(last.conversationId, last.seq) : null,
  };
}
