import { and, eq, ne, sql } from 'drizzle-orm';
import { type Conversation, conversations, type Message, merchants, messages, visitors } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import { newId } from '../ids.js';
import type { AttachmentView, MessageView } from './event-catalog.js';
import { agentChannel } from './events.js';
import { webhookOutboxRow } from './integration/webhooks/events.js';
import { enqueueRows, outboxRow, type Tx, visitorKey } from './outbox.js';

/**
 * What the chat's domain files share: loading a conversation with what its events need, and
 * appending a message (the one place a `seq` is handed out). Plain functions over a transaction.
 */

/** A conversation with the channels its events go to. */
export interface ConversationContext {
  conversation: Conversation;
  visitorChannel: string;
  visitorName: string;
  bid: string;
}

/** Summary of the last message, the `items` of a `chatting` entry (README "Chat"). */
export interface LastMessageItem {
  seq: number;
  sender_type: 'visitor' | 'agent' | 'system' | 'bot';
  type: string;
  /** The text, cut to ITEM_CONTENT_MAX characters (graphemes, see `preview`); empty for attachments without a caption. */
  content: string;
  /** Unix milliseconds. */
  created_at: number;
}
export const ITEM_CONTENT_MAX = 100;

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/**
 * The start of `text` for a preview: at most `max` user-perceived characters (graphemes) and
 * `4 × max` UTF-16 units, never cut inside one, so no lone surrogate (refused by jsonb), no
 * emoji cut in half, no base letter without its accent (issue 27, row 6).
 */
export function preview(text: string, max = ITEM_CONTENT_MAX): string {
  if (text.length <= max) return text;
  let out = '';
  let count = 0;
  for (const { segment } of graphemes.segment(text)) {
    if (count === max || out.length + segment.length > 4 * max) break; // one grapheme may hold any number of combining marks
    out += segment;
    count++;
  }
  return out;
}

type Reader = Deps['db'] | Tx;

/**
 * Conversations with what their events need (`ConversationContext`): the conversation, its
 * visitor's channel and name, its merchant's bid. Callers add their `where`, order and lock.
 */
export const selectContexts = (db: Reader) =>
  db
    .select({
      conversation: conversations,
      visitorChannel: visitors.channel,
      visitorName: visitors.nickname,
      bid: merchants.bid,
    })
    .from(conversations)
    .innerJoin(visitors, eq(visitors.id, conversations.visitorId))
    .innerJoin(merchants, eq(merchants.id, conversations.merchantId));

/** The open (queued or active) conversation of a visitor of the merchant, locked when `lock`. */
export async function openConversation(
  db: Reader,
  merchantId: string,
  visitorId: string,
  opts: { lock?: boolean } = {},
): Promise<ConversationContext | undefined> {
  const query = selectContexts(db)
    .where(
      and(
        eq(conversations.merchantId, merchantId),
        eq(visitors.merchantId, merchantId),
        eq(conversations.visitorId, visitorId),
        ne(conversations.state, 'closed'),
      ),
    )
    .limit(1);
  const [row] = opts.lock ? await query.for('update', { of: conversations }) : await query;
  return row;
}

/** The newest conversation of a visitor (open or closed), or undefined when it never chatted. */
export async function latestConversation(
  db: Reader,
  merchantId: string,
  visitorId: string,
): Promise<ConversationContext | undefined> {
  const [row] = await selectContexts(db)
    .where(
      and(
        eq(conversations.merchantId, merchantId),
        eq(visitors.merchantId, merchantId),
        eq(conversations.visitorId, visitorId),
      ),
    )
    .orderBy(sql`${conversations.createdAt} desc, ${conversations.id} desc`)
    .limit(1);
  return row;
}

/** A visitor of the merchant, or NOT_FOUND (another merchant's visitor does not exist here). */
export async function requireMerchantVisitor(db: Reader, merchantId: string, visitorId: string) {
  const [visitor] = await db
    .select()
    .from(visitors)
    .where(and(eq(visitors.id, visitorId), eq(visitors.merchantId, merchantId)))
    .limit(1);
  if (!visitor) throw new DomainError('NOT_FOUND', 'No such visitor');
  return visitor;
}

/** A stored message as clients see it; `attachment` is the view of its attachment row (attachments.ts signs its URLs). */
export const toMessageView = (m: Message, attachment: AttachmentView | null = null): MessageView => ({
  id: m.id,
  conversationId: m.conversationId,
  visitorId: m.visitorId,
  seq: m.seq,
  senderType: m.senderType,
  senderId: m.senderId,
  clientMsgId: m.clientMsgId,
  type: m.type as MessageView['type'],
  content: m.recalledAt ? '' : m.content,
  attachment: attachment && !m.recalledAt ? attachment : null,
  meta: m.meta ?? null,
  createdAt: m.createdAt.getTime(),
  recalled: m.recalledAt !== null,
});

/** The channels a conversation's message events go to: the visitor's, and its agent's when assigned. */
export const participantChannels = (ctx: ConversationContext, agentId = ctx.conversation.agentId) => [
  ctx.visitorChannel,
  ...(agentId ? [agentChannel(agentId)] : []),
];

export interface NewMessage {
  senderType: 'visitor' | 'agent' | 'system' | 'bot';
  senderId: string;
  clientMsgId: string | null;
  type: MessageView['type'];
  content: string;
  /** The claimed attachment (attachments.ts `claimAttachmentForMessage`). */
  attachment?: AttachmentView | null;
  meta?: Record<string, unknown> | null;
}

/**
 * Appends a message inside `tx`: takes the next `seq` by bumping `last_seq` on the
 * conversation row (its row lock orders concurrent senders, so seqs have no holes), updates the
 * activity time, the last-message summary and the sender's read position, stores the row and
 * writes `message.created` to the outbox for the visitor and the assigned agent. While a bot
 * holds the conversation, a visitor's message starts the bot's answer deadline (unless one runs)
 * and the bot's message ends it (docs/integration.md "Bots").
 */
export async function appendMessage(
  deps: Deps,
  tx: Tx,
  ctx: ConversationContext,
  input: NewMessage,
): Promise<MessageView> {
  const now = deps.now();
  const content = input.content;
  const item = {
    sender_type: input.senderType,
    type: input.type,
    content: preview(content),
    created_at: now,
  };
  const [bumped] = await tx
    .update(conversations)
    .set({
      lastSeq: sql`${conversations.lastSeq} + 1`,
      timestamp: Math.floor(now / 1000),
      items: sql`jsonb_build_array(${JSON.stringify(item)}::jsonb || jsonb_build_object('seq', ${conversations.lastSeq} + 1))`,
      ...(input.senderType === 'visitor' ? { visitorReadSeq: sql`${conversations.lastSeq} + 1` } : {}),
      ...(input.senderType === 'agent' ? { agentReadSeq: sql`${conversations.lastSeq} + 1` } : {}),
      ...(input.senderType === 'visitor'
        ? {
            botDueAt: sql`case when ${conversations.botId} is null then null else coalesce(${conversations.botDueAt}, ${new Date(now + deps.config.bots.handoffTimeoutSeconds * 1000).toISOString()}::timestamptz) end`,
          }
        : {}),
      ...(input.senderType === 'bot' ? { botDueAt: null } : {}),
    })
    .where(eq(conversations.id, ctx.conversation.id))
    .returning({ lastSeq: conversations.lastSeq, botId: conversations.botId });
  if (!bumped) throw new DomainError('NOT_FOUND', 'No such conversation');
  const [row] = await tx
    .insert(messages)
    .values({
      id: newId('msg'),
      conversationId: ctx.conversation.id,
      merchantId: ctx.conversation.merchantId,
      visitorId: ctx.conversation.visitorId,
      seq: bumped.lastSeq,
      senderType: input.senderType,
      senderId: input.senderId,
      clientMsgId: input.clientMsgId,
      type: input.type,
      content,
      attachmentId: input.attachment?.attachmentId ?? null,
      meta: input.meta ?? null,
      createdAt: new Date(now),
    })
    .returning();
  if (!row) throw new Error('message insert returned nothing');
  ctx.conversation.lastSeq = bumped.lastSeq;
  const view = toMessageView(row, input.attachment ?? null);
  const data = { message: view, botId: bumped.botId };
  // One statement for the message's events and its webhook row (in this order: their ids follow it).
  const key = visitorKey(ctx.conversation.visitorId);
  await enqueueRows(tx, [
    ...participantChannels(ctx).map((channel) => outboxRow(key, channel, 'message.created', data)),
    webhookOutboxRow(key, ctx.conversation.merchantId, ctx.conversation.id, 'message.created', data, now),
  ]);
  return view;
}
