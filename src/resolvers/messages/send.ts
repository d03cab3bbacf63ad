import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import type { Db } from '../../db/client.js';
import { attachments, conversations, messages } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { badInput, DomainError } from '../../errors.js';
import { claimAttachmentForMessage } from '../attachments/claim.js';
import { attachmentViewOf } from '../attachments/download.js';
import { uploaderOf } from '../attachments/policy.js';
import { chargeMessage } from '../budgets/chat.js';
import {
  bumpOpenConversation,
  insertMessage,
  type NewMessage,
  requireMerchantVisitor,
  toMessageView,
} from '../chat-rows.js';
import { assignCharged } from '../conversations/routing.js';
import type { ConversationState } from '../conversations/view.js';
import type { AttachmentView, MessageView } from '../event-catalog.js';
import { parseInput, required, text } from '../inputs.js';
import { publishClaimed } from '../outbox/claimed.js';
import { visitorKey } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import { type ChatViewer, id, type SenderViewer, sender, targetVisitor } from './target.js';

/** Sending a message: exactly once per `client_msg_id`, strictly ordered by `seq`. */

/** Longest text of a message, in characters (README "Chat"). */
export const MAX_TEXT = 5000;

const MESSAGE_TYPES = ['text', 'image', 'file', 'voice', 'video'] as const;

export const sendInput = z
  .object({
    visitorId: id.optional(),
    clientMsgId: required(64),
    type: z.enum(MESSAGE_TYPES).default('text'),
    content: text(MAX_TEXT).default(''),
    attachmentId: id.optional(),
  })
  .superRefine((i, ctx) => {
    if (i.type === 'text') {
      if (i.content.trim().length === 0) ctx.addIssue({ code: 'custom', path: ['content'], message: 'is required' });
      if (i.attachmentId)
        ctx.addIssue({ code: 'custom', path: ['attachmentId'], message: 'is only for attachment messages' });
    } else if (!i.attachmentId)
      ctx.addIssue({ code: 'custom', path: ['attachmentId'], message: `is required for a ${i.type} message` });
  });

/** `type` as any string: the schema refuses what a client may not send (GraphQL's MessageType includes `system`). */
export type SendInput = Omit<z.input<typeof sendInput>, 'type'> & { type?: string };

export interface SendResult {
  message: MessageView;
  /** The state of the conversation after the send: `queued` tells the visitor nobody is there yet. */
  conversationState: ConversationState;
  /** True when this `clientMsgId` was already stored: the stored message, nothing published. */
  duplicate: boolean;
}

/** An already stored message of this sender and key (any conversation of the visitor). */
async function storedSend(
  deps: Deps,
  merchantId: string,
  visitorId: string,
  who: ReturnType<typeof sender>,
  key: string,
) {
  const [row] = await deps.db
    .select({ m: messages, a: attachments, state: conversations.state })
    .from(messages)
    .innerJoin(conversations, eq(conversations.id, messages.conversationId))
    .leftJoin(attachments, eq(attachments.id, messages.attachmentId))
    .where(
      and(
        eq(messages.merchantId, merchantId),
        eq(messages.visitorId, visitorId),
        eq(messages.senderType, who.type),
        eq(messages.senderId, who.id),
        eq(messages.clientMsgId, key),
      ),
    )
    .limit(1);
  return (
    row && {
      message: toMessageView(row.m, row.a && attachmentViewOf(deps, row.a)),
      conversationState: row.state,
      duplicate: true,
    }
  );
}

/**
 * Sends a message. The visitor writes into its open conversation — a new one (routed like an
 * assign) when it has none, so writing after a close starts over; an agent into the active
 * conversation assigned to it; a bot into the conversation it holds (text only), refused with
 * HANDED_OFF once it was handed off. A repeated `clientMsgId` returns the stored message.
 */
export async function sendMessage(deps: Deps, viewer: SenderViewer, given: SendInput): Promise<SendResult> {
  const input = parseInput(sendInput, given);
  const visitorId = targetVisitor(viewer, input.visitorId);
  if (viewer.kind === 'bot' && input.type !== 'text') throw badInput('type: a bot sends text messages');
  // Before any other work: on a busy instance, a merchant over its share waits (budgets/chat.ts).
  if (viewer.kind === 'visitor') deps.chatSends.admit(viewer.merchantId);
  // Before any database work: a flood is refused at the cost of a counter (retries count too).
  await chargeMessage(deps, viewer);
  // Fairness between merchants: a visitor send is stored in one of its merchant's few slots
  // (budgets/chat.ts), so one merchant's flood cannot queue the database ahead of the others.
  if (viewer.kind === 'visitor')
    return deps.chatSends.run(viewer.merchantId, () => storeSend(deps, viewer, input, visitorId));
  return storeSend(deps, viewer, input, visitorId);
}

/**
 * The stored part of a send, once its budgets are charged. Exactly once: the unique index of a
 * sender's `clientMsgId` decides, with no lookup first on every send — a store that fails for any
 * reason (a copy committed before, in any conversation of the visitor; the conversation closed,
 * reassigned or handed off since that copy) answers with the stored copy when there is one.
 * Four statements (begin; lock and bump; the message with its outbox rows; commit), then the
 * events published by this instance at once when it could claim them (outbox/claimed.ts, "owned
 * publication"), else through `publishOutbox`.
 */
async function storeSend(
  deps: Deps,
  viewer: SenderViewer,
  input: z.output<typeof sendInput>,
  visitorId: string,
): Promise<SendResult> {
  const who = sender(viewer);
  if (viewer.kind !== 'visitor') await requireMerchantVisitor(deps.db, viewer.merchantId, visitorId);
  const message: NewMessage = {
    senderType: who.type,
    senderId: who.id,
    clientMsgId: input.clientMsgId,
    type: input.type,
    content: input.content,
    meta: viewer.kind === 'bot' ? { bot_name: viewer.name } : null,
  };

  let began = 0;
  const store = () =>
    deps.db.transaction(async (tx) => {
      const now = deps.now();
      // The row lock orders concurrent sends of the conversation, on every instance.
      const bumped = await bumpOpenConversation(deps, tx, viewer.merchantId, visitorId, message, now);
      if (!bumped) throw new DomainError('CONVERSATION_CLOSED', 'This conversation is closed');
      requireHolder(viewer, bumped);
      // A finished upload of this sender and merchant, of this kind; marked referenced (attachments.ts).
      const attachment: AttachmentView | null = input.attachmentId
        ? await claimAttachmentForMessage(
            deps,
            tx as unknown as Db,
            uploaderOf(viewer as ChatViewer),
            input.attachmentId,
            input.type as Exclude<typeof input.type, 'text'>,
          )
        : null;
      began = Date.now();
      // A copy committed before (a retry, in any conversation of the visitor) makes this fail on
      // messages_sender_client_msg_id: answered with that copy below.
      const stored = await insertMessage(
        tx,
        bumped.target,
        { ...message, attachment },
        { seq: bumped.seq, botId: bumped.botId, now },
        true,
      );
      return { ...stored, state: bumped.state };
    });
  // The store failed: a copy of this send stored before (or concurrently) is the answer.
  const storedOnFailure = (error: unknown) =>
    storedSend(deps, viewer.merchantId, visitorId, who, input.clientMsgId)
      .catch(() => undefined)
      .then((row) => row ?? Promise.reject(error));
  let result: Awaited<ReturnType<typeof store>>;
  try {
    result = await store();
  } catch (error) {
    // The visitor has no open conversation (never had one, or it closed — its agent, the idle
    // sweep): the message starts a new one, as any write after a close does — unless a copy of
    // it was stored meanwhile (a retry racing the close), which is the answer.
    if (!(viewer.kind === 'visitor' && error instanceof DomainError && error.code === 'CONVERSATION_CLOSED'))
      return storedOnFailure(error);
    const meanwhile = await storedSend(deps, viewer.merchantId, visitorId, who, input.clientMsgId);
    if (meanwhile) return meanwhile;
    await assignCharged(deps, viewer);
    const second = await store().catch(storedOnFailure);
    if (!('view' in second)) return second;
    result = second;
  }
  const key = visitorKey(visitorId);
  if (result.claimed) await publishClaimed(deps, key, result.claimed, began);
  else await publishOutbox(deps, key);
  return { message: result.view, conversationState: result.state, duplicate: false };
}

/** Under the conversation's row lock: an agent sends only in its own active conversation, a bot only while it holds one. */
function requireHolder(viewer: SenderViewer, bumped: NonNullable<Awaited<ReturnType<typeof bumpOpenConversation>>>) {
  if (viewer.kind === 'agent') {
    if (bumped.state !== 'active')
      throw new DomainError('NOT_ASSIGNED', 'This conversation has no agent yet: claim it first');
    if (bumped.target.agentId !== viewer.agentId)
      throw new DomainError('NOT_ASSIGNED', 'This conversation is assigned to another agent');
  }
  // Checked under the row lock the hand-off takes too: once handed off, no bot message gets in.
  if (viewer.kind === 'bot' && bumped.botId !== viewer.botId)
    throw new DomainError('HANDED_OFF', 'This conversation is not held by this bot (handed off to the agents)');
}
