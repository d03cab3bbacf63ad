import { and, asc, desc, eq, or, type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Db } from '../db/client.js';
import { attachments, conversations, merchants, messages } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { badInput, DomainError } from '../errors.js';
import { claimAttachmentForMessage } from './attachments/claim.js';
import { attachmentViewOf } from './attachments/download.js';
import { uploaderOf } from './attachments/policy.js';
import { chargeMessage } from './budgets/chat.js';
import {
  bumpOpenConversation,
  type ConversationContext,
  insertMessage,
  latestConversation,
  type NewMessage,
  openConversation,
  requireMerchantVisitor,
  toMessageView,
} from './chat-rows.js';
import { assignAgent } from './conversations/routing.js';
import { type ConversationState, unreadForAgent, unreadForVisitor } from './conversations/view.js';
import { decodeCursor, encodeCursor } from './cursors.js';
import type { AttachmentView, MessageView } from './event-catalog.js';
import { agentChannel, publish } from './events.js';
import { flag, parseInput, required, text } from './inputs.js';
import type { ApiKeyViewer } from './integration/api-keys/authenticate.js';
import { requireScope } from './integration/api-keys/scopes.js';
import type { BotViewer } from './integration/bots/viewer.js';
import { enqueueEvent, publishClaimed, publishOutbox, visitorKey } from './outbox.js';
import { type AgentViewer, requireOnlineReception, type VisitorViewer } from './viewer.js';

/**
 * Messages: send (exactly once per `client_msg_id`, strictly ordered by `seq`), history pages
 * spanning the visitor's conversations, read positions with receipts, and typing (ephemeral).
 */

/** Longest text of a message, in characters (README "Chat"). */
export const MAX_TEXT = 5000;
/** Largest history page. */
export const MAX_PAGE = 100;
/** One `typing: true` event per sender and conversation per this many seconds. */
export const TYPING_THROTTLE_SECONDS = 2;

export type ChatViewer = AgentViewer | VisitorViewer;
/** Who may send: the chat's two sides, and a merchant's bot (docs/integration.md "Bots"). */
export type SenderViewer = ChatViewer | BotViewer;

const id = required(64);
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

export const historyInput = z.object({
  visitorId: id.optional(),
  before: text(200).optional(),
  after: text(200).optional(),
  limit: z.number().int().min(1).max(MAX_PAGE).default(20),
});

/** A seq is a 32-bit position. */
export const readInput = z.object({
  visitorId: id.optional(),
  seq: z
    .number()
    .int()
    .min(0)
    .max(2 ** 31 - 1),
});
export const typingInput = z.object({ visitorId: id.optional(), typing: flag.default(true) });

/** `type` as any string: the schema refuses what a client may not send (GraphQL's MessageType includes `system`). */
export type SendInput = Omit<z.input<typeof sendInput>, 'type'> & { type?: string };
export type HistoryInput = z.input<typeof historyInput>;
export type ReadInput = z.input<typeof readInput>;
export type TypingInput = z.input<typeof typingInput>;

export interface SendResult {
  message: MessageView;
  /** The state of the conversation after the send: `queued` tells the visitor nobody is there yet. */
  conversationState: ConversationState;
  /** True when this `clientMsgId` was already stored: the stored message, nothing published. */
  duplicate: boolean;
}

/** Whose conversation an operation addresses: the visitor's own, or the `visitorId` an agent names. */
function targetVisitor(viewer: SenderViewer, visitorId: string | undefined): string {
  if (viewer.kind === 'visitor') return viewer.visitorId;
  if (viewer.kind === 'agent') requireOnlineReception(viewer);
  if (!visitorId) throw badInput('visitorId is required');
  return visitorId;
}

/** The visitor a key names (it has no visitor of its own). */
function requiredVisitor(_viewer: ApiKeyViewer, visitorId: string | undefined): string {
  if (!visitorId) throw badInput('visitorId is required');
  return visitorId;
}

const sender = (viewer: SenderViewer): { type: 'visitor' | 'agent' | 'bot'; id: string } =>
  viewer.kind === 'visitor'
    ? { type: 'visitor', id: viewer.visitorId }
    : viewer.kind === 'bot'
      ? { type: 'bot', id: viewer.botId }
      : { type: 'agent', id: viewer.agentId };

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
 * events published by this instance at once when it could claim them (outbox.ts, "owned
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
      if (viewer.kind === 'agent') {
        if (bumped.state !== 'active')
          throw new DomainError('NOT_ASSIGNED', 'This conversation has no agent yet: claim it first');
        if (bumped.target.agentId !== viewer.agentId)
          throw new DomainError('NOT_ASSIGNED', 'This conversation is assigned to another agent');
      }
      // Checked under the row lock the hand-off takes too: once handed off, no bot message gets in.
      if (viewer.kind === 'bot' && bumped.botId !== viewer.botId)
        throw new DomainError('HANDED_OFF', 'This conversation is not held by this bot (handed off to the agents)');
      let attachment: AttachmentView | null = null;
      // A finished upload of this sender and merchant, of this kind; marked referenced (attachments.ts).
      if (input.attachmentId)
        attachment = await claimAttachmentForMessage(
          deps,
          tx as unknown as Db,
          uploaderOf(viewer as ChatViewer),
          input.attachmentId,
          input.type as Exclude<typeof input.type, 'text'>,
        );
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
    await assignAgent(deps, viewer);
    const second = await store().catch(storedOnFailure);
    if (!('view' in second)) return second;
    result = second;
  }
  const key = visitorKey(visitorId);
  if (result.claimed) await publishClaimed(deps, key, result.claimed, began);
  else await publishOutbox(deps, key);
  return { message: result.view, conversationState: result.state, duplicate: false };
}

// ---- history -----------------------------------------------------------------------------

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

// ---- read state --------------------------------------------------------------------------

export interface ReadResult {
  conversationId: string;
  /** The reader's read position after the call (it never moves back). */
  readSeq: number;
  /** Messages of the other side still unread. */
  unreadCount: number;
}

/** The conversation a read or typing call addresses: the open one, else the latest. */
async function currentConversation(deps: Deps, viewer: ChatViewer, visitorId: string) {
  if (viewer.kind === 'agent') await requireMerchantVisitor(deps.db, viewer.merchantId, visitorId);
  const ctx =
    (await openConversation(deps.db, viewer.merchantId, visitorId)) ??
    (await latestConversation(deps.db, viewer.merchantId, visitorId));
  if (!ctx) throw new DomainError('NOT_FOUND', 'No conversation yet');
  if (viewer.kind === 'agent' && ctx.conversation.agentId !== viewer.agentId && viewer.level !== 'admin')
    throw new DomainError('NOT_ASSIGNED', 'This conversation is not assigned to you');
  return ctx;
}

/**
 * Marks the conversation read up to `seq` (capped at its last message; never backwards) and, when
 * the position moved, sends a `message.read` receipt to both sides.
 */
export async function markRead(deps: Deps, viewer: ChatViewer, given: ReadInput): Promise<ReadResult> {
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
    for (const channel of [ctx.visitorChannel, ...(row.agentId ? [agentChannel(row.agentId)] : [])])
      await enqueueEvent(tx, visitorKey(row.visitorId), channel, 'message.read', data);
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

// ---- typing ------------------------------------------------------------------------------

/**
 * Tells the other side of the open conversation that the caller is typing (or stopped). Only
 * published, never stored, not even in the channel's resumable history (a resume has no use for
 * it, and a typing flood must not push the events that matter out of it). Throttled both ways:
 * each of `typing: true` and `typing: false` at most once per TYPING_THROTTLE_SECONDS per sender
 * and conversation (`published` false when throttled).
 */
export async function setTyping(
  deps: Deps,
  viewer: ChatViewer,
  given: TypingInput = {},
): Promise<{ published: boolean }> {
  const input = parseInput(typingInput, given);
  const visitorId = targetVisitor(viewer, input.visitorId);
  const ctx: ConversationContext = await currentConversation(deps, viewer, visitorId);
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
