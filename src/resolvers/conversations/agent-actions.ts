import { eq } from 'drizzle-orm';
import { z } from 'zod';
import { agents, conversations } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { flag, parseInput } from '../inputs.js';
import { visitorKey } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import { type AgentViewer, requireOnlineReception } from '../viewer.js';
import { assignInTx } from './assignment.js';
import { id, requireMine, requireOpen, type VisitorRef, visitorRef } from './context.js';
import { drainQueueQuietly } from './queue.js';
import { type ConversationView, viewOf } from './view.js';

/** An agent's own actions on a conversation: claim a queued one, pin an active one. */

export const pinInput = z.object({ visitorId: id, pinned: flag.default(true) });
export type PinInput = z.input<typeof pinInput>;

/** An agent takes a queued conversation; of two agents claiming one, exactly one wins. */
export async function claimConversation(deps: Deps, viewer: AgentViewer, given: VisitorRef): Promise<ConversationView> {
  requireOnlineReception(viewer);
  const { visitorId } = parseInput(visitorRef, given);
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
  await publishOutbox(deps, visitorKey(visitorId));
  // The visitors behind it moved up: the drain tells them their new positions.
  await drainQueueQuietly(deps, { merchantId: viewer.merchantId });
  return viewOf(deps.db, conversationId, 'agent');
}

/** Pins (`pinned` true, the default) or unpins an active conversation of the agent. */
export async function pinConversation(deps: Deps, viewer: AgentViewer, given: PinInput): Promise<ConversationView> {
  requireOnlineReception(viewer);
  const input = parseInput(pinInput, given);
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
