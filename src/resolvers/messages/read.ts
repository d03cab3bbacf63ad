import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import { conversations } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { chargeReadMark } from '../budgets/chat.js';
import { unreadForAgent, unreadForVisitor } from '../conversations/view.js';
import { agentChannel } from '../events.js';
import { parseInput } from '../inputs.js';
import { enqueueRows, outboxRows, visitorKey } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import { type ChatViewer, currentConversation, id, targetVisitor } from './target.js';

/** Read positions with receipts. */

/** A seq is a 32-bit position. */
export const readInput = z.object({
  visitorId: id.optional(),
  seq: z
    .number()
    .int()
    .min(0)
    .max(2 ** 31 - 1),
});
export type ReadInput = z.input<typeof readInput>;

export interface ReadResult {
  conversationId: string;
  /** The reader's read position after the call (it never moves back). */
  readSeq: number;
  /** Messages of the other side still unread. */
  unreadCount: number;
}

/**
 * Marks the conversation read up to `seq` (capped at its last message; never backwards) and, when
 * the position moved, sends a `message.read` receipt to both sides.
 */
export async function markRead(deps: Deps, viewer: ChatViewer, given: ReadInput): Promise<ReadResult> {
  // Each call is a transaction, even one that moves nothing: a visitor's have a budget (budgets/chat.ts).
  if (viewer.kind === 'visitor') await chargeReadMark(deps, viewer);
  const input = parseInput(readInput, given);
  const visitorId = targetVisitor(viewer, input.visitorId);
  const ctx = await currentConversation(deps, viewer, visitorId);
  const column = viewer.kind === 'visitor' ? conversations.visitorReadSeq : conversations.agentReadSeq;
  const readerId = viewer.kind === 'visitor' ? viewer.visitorId : viewer.agentId;
  const moved = await deps.db.transaction(async (tx) => {
    const [row] = await tx
      .update(conversations)
      .set(
        viewer.kind === 'visitor'
          ? { visitorReadSeq: sql`least(${input.seq}::int, ${conversations.lastSeq})` }
          : { agentReadSeq: sql`least(${input.seq}::int, ${conversations.lastSeq})` },
      )
      .where(
        and(
          eq(conversations.id, ctx.conversation.id),
          sql`${column} < least(${input.seq}::int, ${conversations.lastSeq})`,
        ),
      )
      .returning();
    if (!row) return false;
    const seq = viewer.kind === 'visitor' ? row.visitorReadSeq : row.agentReadSeq;
    const data = {
      conversationId: row.id,
      visitorId: row.visitorId,
      readerType: viewer.kind,
      readerId,
      seq,
    };
    const readers = [ctx.visitorChannel, ...(row.agentId ? [agentChannel(row.agentId)] : [])];
    await enqueueRows(tx, outboxRows(visitorKey(row.visitorId), readers, 'message.read', data));
    return true;
  });
  if (moved) await publishOutbox(deps, visitorKey(visitorId));
  const [after] = await deps.db
    .select({
      agentReadSeq: conversations.agentReadSeq,
      visitorReadSeq: conversations.visitorReadSeq,
      unread: viewer.kind === 'visitor' ? unreadForVisitor : unreadForAgent,
    })
    .from(conversations)
    .where(eq(conversations.id, ctx.conversation.id));
  return {
    conversationId: ctx.conversation.id,
    readSeq: (viewer.kind === 'visitor' ? after?.visitorReadSeq : after?.agentReadSeq) ?? 0,
    unreadCount: Number(after?.unread ?? 0),
  };
}
