import { and, eq, ne, sql } from 'drizzle-orm';
import { type Conversation, conversations, type Message, merchants, visitors } from '../db/schema.js';
import { runStatement } from '../db/statement.js';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import { newId } from '../ids.js';
import type { AttachmentView, MessageView } from './event-catalog.js';
import { toWire } from './event-catalog.js';
import { adminChannel, agentChannel } from './events.js';
import { webhookOutboxRow } from './integration/webhooks/events.js';
import type { ClaimedRow } from './outbox/claimed.js';
import { type Tx, visitorKey } from './outbox/enqueue.js';
import { OUTBOX_LEASE_MS } from './outbox/rounds.js';

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

/**
 * The channels a conversation's `message.created` goes to: the visitor's, its agent's when
 * assigned, and the merchant's admin channel (`admin-{bid}`, every message of the merchant for
 * its admins: one row and one publish more per message). Internal notes never use this.
 */
export const participantChannels = (
  ctx: Pick<ConversationContext, 'visitorChannel' | 'bid'> & { conversation?: { agentId: string | null } },
  agentId = ctx.conversation?.agentId,
) => [ctx.visitorChannel, ...(agentId ? [agentChannel(agentId)] : []), adminChannel(ctx.bid)];

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
 * writes `message.created` to the outbox for the visitor, the assigned agent and the admins. While a bot
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
  const set = bumpSet(deps, input, now);
  const [bumped] = await runStatement<{ last_seq: number; bot_id: string | null }>(tx, bumpByIdText(input.senderType), [
    ...set,
    ctx.conversation.id,
  ]);
  if (!bumped) throw new DomainError('NOT_FOUND', 'No such conversation');
  ctx.conversation.lastSeq = Number(bumped.last_seq);
  const { view } = await insertMessage(
    tx,
    {
      id: ctx.conversation.id,
      merchantId: ctx.conversation.merchantId,
      visitorId: ctx.conversation.visitorId,
      agentId: ctx.conversation.agentId,
      visitorChannel: ctx.visitorChannel,
      bid: ctx.bid,
    },
    input,
    { seq: Number(bumped.last_seq), botId: bumped.bot_id, now },
  );
  return view;
}

/**
 * The `set` list of a message's bump of its conversation row (alias `c`), by sender: the next
 * seq, the activity time ($1), the last-message summary ($2), the sender's read position, the
 * bot's answer deadline ($3, a visitor's message only). Fixed texts: prepared once (db/statement.ts).
 */
const COMMON_SET = `last_seq = c.last_seq + 1, "timestamp" = $1,
    items = jsonb_build_array($2::jsonb || jsonb_build_object('seq', c.last_seq + 1))`;
const BUMP_SET: Record<NewMessage['senderType'], string> = {
  visitor: `${COMMON_SET}, visitor_read_seq = c.last_seq + 1,
    bot_due_at = case when c.bot_id is null then null else coalesce(c.bot_due_at, $3::timestamptz) end`,
  agent: `${COMMON_SET}, agent_read_seq = c.last_seq + 1`,
  bot: `${COMMON_SET}, bot_due_at = null`,
  system: COMMON_SET,
};

/** The parameters of `BUMP_SET[input.senderType]`, in order. */
function bumpSet(deps: Deps, input: NewMessage, now: number): unknown[] {
  const item = JSON.stringify({
    sender_type: input.senderType,
    type: input.type,
    content: preview(input.content),
    created_at: now,
  });
  const params: unknown[] = [Math.floor(now / 1000), item];
  if (input.senderType === 'visitor')
    params.push(new Date(now + deps.config.bots.handoffTimeoutSeconds * 1000).toISOString());
  return params;
}

/** The number of `bumpSet`'s parameters: the next placeholder is this + 1. */
const bumpParams = (senderType: NewMessage['senderType']) => (senderType === 'visitor' ? 3 : 2);

/** appendMessage's bump: the conversation by id (the caller holds its row). */
const bumpByIdText = memoBySender(
  (s) => `update conversations c set ${BUMP_SET[s]}
      where c.id = $${bumpParams(s) + 1}
      returning c.last_seq, c.bot_id`,
);

/** A send's bump: the open conversation of the visitor of the merchant, with what its events need. */
const bumpOpenText = memoBySender((s) => {
  const merchant = `$${bumpParams(s) + 1}`;
  const visitor = `$${bumpParams(s) + 2}`;
  return `update conversations c set ${BUMP_SET[s]}
      from visitors v, merchants m
      where c.merchant_id = ${merchant} and c.visitor_id = ${visitor} and c.state <> 'closed'
        and v.id = c.visitor_id and v.merchant_id = ${merchant} and m.id = ${merchant}
      returning c.id, c.agent_id, c.bot_id, c.state, c.last_seq, v.channel, m.bid`;
});

function memoBySender(text: (senderType: NewMessage['senderType']) => string) {
  const texts = new Map<NewMessage['senderType'], string>();
  return (senderType: NewMessage['senderType']) => {
    let made = texts.get(senderType);
    if (made === undefined) {
      made = text(senderType);
      texts.set(senderType, made);
    }
    return made;
  };
}

/** What a send's one statement of lock and bump answers: the open conversation as the send needs it. */
export interface BumpedConversation {
  target: MessageTarget;
  state: Conversation['state'];
  botId: string | null;
  seq: number;
}

/**
 * A send's first statement: the open conversation of the visitor locked and bumped for the
 * message (the update takes the row lock that orders concurrent sends, on every instance), with
 * what the message's events need. Undefined when the visitor has no open conversation. The
 * caller's checks (assigned agent, holding bot) come after it, in the same transaction: a refusal
 * rolls the bump back.
 */
export async function bumpOpenConversation(
  deps: Deps,
  tx: Tx,
  merchantId: string,
  visitorId: string,
  input: NewMessage,
  now: number,
): Promise<BumpedConversation | undefined> {
  const [row] = await runStatement<{
    id: string;
    agent_id: string | null;
    bot_id: string | null;
    state: Conversation['state'];
    last_seq: number;
    channel: string;
    bid: string;
  }>(tx, bumpOpenText(input.senderType), [...bumpSet(deps, input, now), merchantId, visitorId]);
  if (!row) return undefined;
  return {
    target: { id: row.id, merchantId, visitorId, agentId: row.agent_id, visitorChannel: row.channel, bid: row.bid },
    state: row.state,
    botId: row.bot_id,
    seq: Number(row.last_seq),
  };
}

/** The conversation a message is stored in, as its row and events need it. */
export interface MessageTarget {
  id: string;
  merchantId: string;
  visitorId: string;
  agentId: string | null;
  visitorChannel: string;
  /** The merchant's bid: its admin channel. */
  bid: string;
}

/**
 * `insertMessage`'s one statement: $1 whether to claim, $2 the order key, $3–$15 the message's
 * columns, $16–$17 the outbox rows' channels and events, in order (their ids follow it): every row's
 * data is the wire payload $18 (sent once, not once per channel), but the last row's, the webhook
 * row, which is $19.
 */
const INSERT_MESSAGE = `
  with own as materialized (
    select $1::boolean and not exists (select 1 from event_outbox where order_key = $2) as mine
  ), msg as (
    insert into messages (id, conversation_id, merchant_id, visitor_id, seq, sender_type, sender_id,
                          client_msg_id, type, content, attachment_id, meta, created_at)
    values ($3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb, $15::timestamptz)
  )
  insert into event_outbox (order_key, channel, event, data, claimed_until)
  select $2, r.channel, r.event,
         case when r.ord = cardinality($16::text[]) then $19::jsonb else $18::jsonb end,
         case when (select mine from own) then clock_timestamp() + ${OUTBOX_LEASE_MS} * interval '1 millisecond' end
  from unnest($16::text[], $17::text[]) with ordinality as r(channel, event, ord)
  order by r.ord
  returning id, claimed_until is not null as mine`;

/**
 * Stores a message with the `seq` its bump took and writes its `message.created` rows to the
 * outbox (the visitor's channel, the agent's when assigned, the admins', the webhook row, in this order: their
 * ids follow it), in one statement. With `claim` (a send), the rows are claimed for the sender's
 * own publication after commit when no earlier row of the key is pending — read in this
 * statement, after the bump's row lock (outbox/claimed.ts, "owned publication"); `claimed` then lists
 * them in order, else it is null and the caller publishes through `publishOutbox`.
 */
export async function insertMessage(
  tx: Tx,
  target: MessageTarget,
  input: NewMessage,
  at: { seq: number; botId: string | null; now: number },
  claim = false,
): Promise<{ view: MessageView; claimed: ClaimedRow[] | null }> {
  const { seq, botId, now } = at;
  const view: MessageView = {
    id: newId('msg'),
    conversationId: target.id,
    visitorId: target.visitorId,
    seq,
    senderType: input.senderType,
    senderId: input.senderId,
    clientMsgId: input.clientMsgId,
    type: input.type,
    content: input.content,
    attachment: input.attachment ?? null,
    meta: input.meta ?? null,
    createdAt: now,
    recalled: false,
  };
  const data = { message: view, botId };
  const key = visitorKey(target.visitorId);
  // The wire payload serialized once for every channel's row.
  const wire = toWire('message.created', data);
  const wireText = JSON.stringify(wire);
  const rows: ClaimedRow[] = participantChannels(target, target.agentId).map((channel) => ({
    id: 0,
    channel,
    event: 'message.created',
    data: wire,
  }));
  const hook = webhookOutboxRow(key, target.merchantId, target.id, 'message.created', data, now);
  rows.push({ id: 0, channel: hook.channel, event: hook.event, data: hook.data });
  const inserted = await runStatement<{ id: number | string; mine: boolean }>(tx, INSERT_MESSAGE, [
    claim,
    key,
    view.id,
    target.id,
    target.merchantId,
    target.visitorId,
    seq,
    input.senderType,
    input.senderId,
    input.clientMsgId,
    input.type,
    input.content,
    input.attachment?.attachmentId ?? null,
    input.meta ? JSON.stringify(input.meta) : null,
    new Date(now).toISOString(),
    rows.map((r) => r.channel),
    rows.map((r) => r.event),
    wireText,
    JSON.stringify(hook.data),
  ]);
  if (inserted.length !== rows.length) throw new Error('message insert: outbox rows missing');
  if (!inserted[0]?.mine) return { view, claimed: null };
  const ids = inserted.map((r) => Number(r.id)).sort((a, b) => a - b);
  return { view, claimed: rows.map((r, i) => ({ ...r, id: ids[i] as number })) };
}
