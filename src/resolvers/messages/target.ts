import type { Deps } from '../../deps.js';
import { badInput, DomainError } from '../../errors.js';
import {
  type ConversationContext,
  latestConversation,
  openConversation,
  requireMerchantVisitor,
} from '../chat-rows.js';
import { required } from '../inputs.js';
import type { BotViewer } from '../integration/bots/viewer.js';
import { type AgentViewer, requireOnlineReception, type VisitorViewer } from '../viewer.js';

/**
 * Messages (send.ts, history.ts, read.ts, typing.ts): who may act on which visitor's
 * conversation, and the conversation a read or typing call addresses.
 */

export type ChatViewer = AgentViewer | VisitorViewer;
/** Who may send: the chat's two sides, and a merchant's bot (docs/integration.md "Bots"). */
export type SenderViewer = ChatViewer | BotViewer;

/** An identifier field of the messages' inputs. */
export const id = required(64);

/** Whose conversation an operation addresses: the visitor's own, or the `visitorId` an agent names. */
export function targetVisitor(viewer: SenderViewer, visitorId: string | undefined): string {
  if (viewer.kind === 'visitor') return viewer.visitorId;
  if (viewer.kind === 'agent') requireOnlineReception(viewer);
  if (!visitorId) throw badInput('visitorId is required');
  return visitorId;
}

export const sender = (viewer: SenderViewer): { type: 'visitor' | 'agent' | 'bot'; id: string } =>
  viewer.kind === 'visitor'
    ? { type: 'visitor', id: viewer.visitorId }
    : viewer.kind === 'bot'
      ? { type: 'bot', id: viewer.botId }
      : { type: 'agent', id: viewer.agentId };

/** The conversation a read or typing call addresses: the open one, else the latest; none before the first. */
export async function currentConversationIfAny(
  deps: Deps,
  viewer: ChatViewer,
  visitorId: string,
): Promise<ConversationContext | undefined> {
  if (viewer.kind === 'agent') await requireMerchantVisitor(deps.db, viewer.merchantId, visitorId);
  const ctx =
    (await openConversation(deps.db, viewer.merchantId, visitorId)) ??
    (await latestConversation(deps.db, viewer.merchantId, visitorId));
  if (ctx && viewer.kind === 'agent' && ctx.conversation.agentId !== viewer.agentId && viewer.level !== 'admin')
    throw new DomainError('NOT_ASSIGNED', 'This conversation is not assigned to you');
  return ctx;
}

/** As currentConversationIfAny, refusing a visitor who has no conversation yet. */
export async function currentConversation(deps: Deps, viewer: ChatViewer, visitorId: string) {
  const ctx = await currentConversationIfAny(deps, viewer, visitorId);
  if (!ctx) throw new DomainError('NOT_FOUND', 'No conversation yet');
  return ctx;
}
