import { z } from 'zod';
import { DomainError } from '../../errors.js';
import { type ConversationContext, openConversation, requireMerchantVisitor } from '../chat-rows.js';
import { required } from '../inputs.js';
import type { Tx } from '../outbox/enqueue.js';
import type { AgentViewer } from '../viewer.js';

/** What the conversation operations share: the id rule, the visitor an agent names, the open conversation it acts on. */

export const id = required(64);
/** The visitor an agent names (`claimConversation`, `closeConversation`, `loadConversation`). */
export const visitorRef = z.object({ visitorId: id });
export type VisitorRef = z.input<typeof visitorRef>;

/** The open conversation of a visitor of the merchant, locked; CONVERSATION_CLOSED when there is none. */
export async function requireOpen(tx: Tx, merchantId: string, visitorId: string) {
  await requireMerchantVisitor(tx, merchantId, visitorId);
  const ctx = await openConversation(tx, merchantId, visitorId, { lock: true });
  if (!ctx) throw new DomainError('CONVERSATION_CLOSED', 'This visitor has no open conversation');
  return ctx;
}

/** The open conversation must be active and this agent's (an administrator may act on any). */
export function requireMine(viewer: AgentViewer, ctx: ConversationContext) {
  const c = ctx.conversation;
  if (c.state !== 'active') throw new DomainError('NOT_ASSIGNED', 'This conversation has no agent yet: claim it first');
  if (c.agentId !== viewer.agentId && viewer.level !== 'admin')
    throw new DomainError('NOT_ASSIGNED', 'This conversation is assigned to another agent');
}
