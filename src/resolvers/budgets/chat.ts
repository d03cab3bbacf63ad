import type { Deps } from '../../deps.js';
import type { AgentViewer, VisitorViewer } from '../viewer.js';

/**
 * The chat's write budgets (issue 27, rows 2 and 3; README "Security and reliability"): anyone can
 * get a visitor token, so every visitor write is one anyone can repeat. Each budget answers
 * RATE_LIMITED (REST 1429 with `Retry-After`, GraphQL `RATE_LIMITED` with `retryAfter`).
 *
 * - messages per sender (visitor or agent): a burst window and an hourly one, so neither a
 *   flood nor a steady drip can fill the database or a channel's history;
 * - visitor messages per merchant: however many tokens one merchant's visitors hold, their
 *   writes share one budget, so they cannot take the shared instance from other merchants;
 * - conversations opened, and closed, per visitor: a send + close loop would otherwise publish
 *   on the merchant's `global-{bid}` channel without end.
 */

/** Seconds of the burst window of CHAT_MESSAGE_BURST. */
export const MESSAGE_BURST_SECONDS = 10;

type Sender = AgentViewer | VisitorViewer;

const senderKey = (viewer: Sender) => (viewer.kind === 'visitor' ? `v:${viewer.visitorId}` : `a:${viewer.agentId}`);
const wait = (what: string) => (seconds: number) => `Too many ${what}: retry in ${seconds} s`;

/** Counts one message of the sender against its budgets (and a visitor's against its merchant's). */
export async function chargeMessage(deps: Deps, viewer: Sender): Promise<void> {
  const limits = deps.config.chatLimits;
  const key = senderKey(viewer);
  if (viewer.kind === 'visitor')
    await deps
      .rateLimiter({ name: 'chat-merchant-messages', points: limits.merchantMessagesPerMinute, durationSeconds: 60 })
      .consume(viewer.merchantId, wait('messages from this merchant’s visitors'));
  await deps
    .rateLimiter({ name: 'chat-message-burst', points: limits.messageBurst, durationSeconds: MESSAGE_BURST_SECONDS })
    .consume(key, wait('messages'));
  await deps
    .rateLimiter({ name: 'chat-message-hour', points: limits.messagesPerHour, durationSeconds: 3600 })
    .consume(key, wait('messages this hour'));
}

/** Counts a conversation the visitor opens (an assign or a first message that starts one). */
export async function chargeConversationOpened(deps: Deps, viewer: VisitorViewer): Promise<void> {
  await deps
    .rateLimiter({ name: 'chat-opened', points: deps.config.chatLimits.conversationsPerHour, durationSeconds: 3600 })
    .consume(viewer.visitorId, wait('conversations opened this hour'));
}

/** Counts a conversation the visitor closes. */
export async function chargeConversationClosed(deps: Deps, viewer: VisitorViewer): Promise<void> {
  await deps
    .rateLimiter({ name: 'chat-closed', points: deps.config.chatLimits.conversationsPerHour, durationSeconds: 3600 })
    .consume(viewer.visitorId, wait('conversations closed this hour'));
}
