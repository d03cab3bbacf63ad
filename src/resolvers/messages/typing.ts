import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { chargeTyping } from '../budgets/chat.js';
import { agentChannel, publish } from '../events.js';
import { flag, parseInput } from '../inputs.js';
import { type ChatViewer, currentConversationIfAny, id, sender, targetVisitor } from './target.js';

/** Typing (ephemeral). */

/** One `typing: true` event per sender and conversation per this many seconds. */
export const TYPING_THROTTLE_SECONDS = 2;

export const typingInput = z.object({ visitorId: id.optional(), typing: flag.default(true) });

export type TypingInput = z.input<typeof typingInput>;

/**
 * Tells the other side of the open conversation that the caller is typing (or stopped). Only
 * published, never stored, not even in the channel's resumable history (a resume has no use for
 * it, and a typing flood must not push the events that matter out of it). Throttled both ways:
 * each of `typing: true` and `typing: false` at most once per TYPING_THROTTLE_SECONDS per sender
 * and conversation (`published` false when throttled, or when there is nobody to tell: no
 * conversation yet, or none assigned).
 */
export async function setTyping(
  deps: Deps,
  viewer: ChatViewer,
  given: TypingInput = {},
): Promise<{ published: boolean }> {
  // Counted before the conversation is read: the throttle below only drops a notice after that.
  if (viewer.kind === 'visitor') await chargeTyping(deps, viewer);
  const input = parseInput(typingInput, given);
  const visitorId = targetVisitor(viewer, input.visitorId);
  // Typing before the first message (the widget's input fires it) has nobody to tell yet.
  const ctx = await currentConversationIfAny(deps, viewer, visitorId);
  if (!ctx) return { published: false };
  const c = ctx.conversation;
  if (c.state === 'closed') throw new DomainError('CONVERSATION_CLOSED', 'This conversation is closed');
  const who = sender(viewer);
  const limiter = deps.rateLimiter({ name: 'typing', points: 1, durationSeconds: TYPING_THROTTLE_SECONDS });
  try {
    await limiter.consume(`${c.id}:${who.type}:${who.id}:${input.typing}`, () => 'typing throttled');
  } catch (error) {
    if (error instanceof DomainError && error.code === 'RATE_LIMITED') return { published: false };
    throw error;
  }
  const to = viewer.kind === 'visitor' ? (c.agentId ? agentChannel(c.agentId) : null) : ctx.visitorChannel;
  if (!to) return { published: false };
  const senderType = viewer.kind === 'visitor' ? 'visitor' : 'agent';
  await publish(
    deps,
    to,
    'typing',
    { conversationId: c.id, visitorId: c.visitorId, senderType, senderId: who.id, typing: input.typing },
    { ephemeral: true },
  );
  return { published: true };
}
