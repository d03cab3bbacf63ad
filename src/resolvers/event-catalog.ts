import { z } from 'zod';

/**
 * Every event the gateway publishes, declared once: where it goes, what it means, its wire
 * payload (snake_case, like the REST it sits beside) and the mapping from the domain's
 * camelCase. `publish` (events.ts) is typed by it, the GraphQL description of `channel` and
 * the event table of docs/realtime.md are checked against it, and POST /internal/events may not use these
 * names. Events a channel itself produces (`subscribed`, `history.gap`) are declared too, with
 * `origin: 'bus'`.
 */

/**
 * Which channel carries an event: `global-{bid}`, `agent-{agent_id}`, the visitor's own, or
 * `admin-{bid}` (the merchant's admins: every `message.created` of the merchant); or
 * `internal`, the instances' own channel (`internal:config`) that no client identity may subscribe to;
 * `webhook`: only to the merchant's webhook endpoints (docs/integration.md).
 */
export type Audience = 'global' | 'agent' | 'visitor' | 'admin' | 'internal' | 'webhook';

export interface EventDeclaration<Domain, Wire> {
  audiences: readonly Audience[];
  description: string;
  /** The payload subscribers receive. */
  payload: z.ZodType<Wire>;
  /** The one mapping from the domain's shape to the wire shape. */
  toWire: (data: Domain) => Wire;
  /** `gateway`: published by the domain; `bus`: produced by the channel itself. */
  origin?: 'gateway' | 'bus';
  /** Delivered to webhook endpoints that ask for it, with this payload version (docs/integration.md). */
  webhook?: number;
}

const declare = <Domain, Wire>(d: EventDeclaration<Domain, Wire>) => d;
const same = <T>(data: T) => data;

// ---- shared wire shapes ------------------------------------------------------------------

/** An attachment as messages carry it: the url is signed and expires (see docs/attachments.md). */
export const attachmentWire = z
  .object({
    attachment_id: z.string(),
    kind: z.enum(['image', 'file', 'video', 'voice']),
    mime: z.string(),
    size: z.number().int(),
    name: z.string(),
    url: z.string(),
    thumbnail_url: z.string().nullable(),
  })
  .strict();

export interface AttachmentView {
  attachmentId: string;
  kind: 'image' | 'file' | 'video' | 'voice';
  mime: string;
  size: number;
  name: string;
  url: string;
  thumbnailUrl: string | null;
}

export const toAttachmentWire = (a: AttachmentView): z.infer<typeof attachmentWire> => ({
  attachment_id: a.attachmentId,
  kind: a.kind,
  mime: a.mime,
  size: a.size,
  name: a.name,
  url: a.url,
  thumbnail_url: a.thumbnailUrl,
});

/** A stored message: the answer of message/send, the rows of message/list, the `message.created` payload. */
export const messageWire = z
  .object({
    id: z.string(),
    conversation_id: z.string(),
    visitor_id: z.string(),
    seq: z.number().int().positive(),
    sender_type: z.enum(['visitor', 'agent', 'system', 'bot']),
    sender_id: z.string(),
    client_msg_id: z.string().nullable(),
    type: z.enum(['text', 'image', 'file', 'voice', 'video', 'system']),
    content: z.string(),
    attachment: attachmentWire.nullable(),
    meta: z.record(z.string(), z.unknown()).nullable(),
    /** Unix milliseconds. */
    created_at: z.number().int(),
    recalled: z.boolean(),
  })
  .strict();

export interface MessageView {
  id: string;
  conversationId: string;
  visitorId: string;
  seq: number;
  senderType: 'visitor' | 'agent' | 'system' | 'bot';
  senderId: string;
  clientMsgId: string | null;
  type: 'text' | 'image' | 'file' | 'voice' | 'video' | 'system';
  content: string;
  attachment: AttachmentView | null;
  meta: Record<string, unknown> | null;
  createdAt: number;
  recalled: boolean;
}

export const toMessageWire = (m: MessageView): z.infer<typeof messageWire> => ({
  id: m.id,
  conversation_id: m.conversationId,
  visitor_id: m.visitorId,
  seq: m.seq,
  sender_type: m.senderType,
  sender_id: m.senderId,
  client_msg_id: m.clientMsgId,
  type: m.type,
  content: m.content,
  attachment: m.attachment && toAttachmentWire(m.attachment),
  meta: m.meta,
  created_at: m.createdAt,
  recalled: m.recalled,
});

/** The public face of an agent in chat events and answers. */
export const agentBriefWire = z.object({ agent_id: z.string(), nickname: z.string(), avatar: z.string() }).strict();
export interface AgentBrief {
  agentId: string;
  nickname: string;
  avatar: string;
}
export const toAgentBriefWire = (a: AgentBrief) => ({ agent_id: a.agentId, nickname: a.nickname, avatar: a.avatar });

/** What every conversation event says about its conversation. */
const conversationRef = {
  conversation_id: z.string(),
  visitor_id: z.string(),
  state: z.enum(['queued', 'active', 'closed']),
};
interface ConversationRef {
  conversationId: string;
  visitorId: string;
  state: 'queued' | 'active' | 'closed';
}
const toConversationRef = (c: ConversationRef) => ({
  conversation_id: c.conversationId,
  visitor_id: c.visitorId,
  state: c.state,
});

/** A waiting conversation's place: `conversation.queued` and `conversation.queue_position` carry the same payload. */
const queuePlace = {
  payload: z.object({ ...conversationRef, group_id: z.string().nullable(), queue_position: z.number().int() }).strict(),
  toWire: (d: ConversationRef & { groupId: string | null; queuePosition: number }) => ({
    ...toConversationRef(d),
    group_id: d.groupId,
    queue_position: d.queuePosition,
  }),
};

/** An internal note (agents only): the answer of note/add, the rows of note/list, the `note.created` payload. */
export const noteWire = z
  .object({
    id: z.string(),
    conversation_id: z.string(),
    visitor_id: z.string(),
    agent_id: z.string().nullable(),
    agent_nickname: z.string(),
    after_seq: z.number().int(),
    content: z.string(),
    /** Unix milliseconds. */
    created_at: z.number().int(),
  })
  .strict();

export interface NoteView {
  id: string;
  conversationId: string;
  visitorId: string;
  agentId: string | null;
  agentNickname: string;
  afterSeq: number;
  content: string;
  createdAt: number;
}

export const toNoteWire = (n: NoteView): z.infer<typeof noteWire> => ({
  id: n.id,
  conversation_id: n.conversationId,
  visitor_id: n.visitorId,
  agent_id: n.agentId,
  agent_nickname: n.agentNickname,
  after_seq: n.afterSeq,
  content: n.content,
  created_at: n.createdAt,
});

// ---- the catalog -------------------------------------------------------------------------

export const eventCatalog = {
  'agent.login': declare({
    audiences: ['global'],
    description: 'An agent of the merchant logged in.',
    payload: z.object({ agent_id: z.string(), nickname: z.string() }).strict(),
    toWire: (d: { agentId: string; nickname: string }) => ({ agent_id: d.agentId, nickname: d.nickname }),
  }),
  'agent.logout': declare({
    audiences: ['global'],
    description: 'An agent logged out (one of its Sessions ended by logout).',
    payload: z.object({ agent_id: z.string() }).strict(),
    toWire: (d: { agentId: string }) => ({ agent_id: d.agentId }),
  }),
  'agent.state': declare({
    audiences: ['global'],
    description:
      'An agent’s state changed (`online`, `offline`, `busy`, `away`); `reason` is `connected`, `disconnected` or `manual`.',
    payload: z.object({ agent_id: z.string(), state: z.string(), reason: z.string() }).strict(),
    toWire: (d: { agentId: string; state: string; reason: string }) => ({
      agent_id: d.agentId,
      state: d.state,
      reason: d.reason,
    }),
  }),
  'agent.level_changed': declare({
    audiences: ['agent'],
    description:
      'An admin changed this agent’s level (`admin`, `agent`, `ticket_agent`): its open subscriptions are judged again by the new level, and those it no longer allows (an ex-admin’s `admin-{bid}`) end with `FORBIDDEN`.',
    payload: z.object({ agent_id: z.string(), level: z.string() }).strict(),
    toWire: (d: { agentId: string; level: string }) => ({ agent_id: d.agentId, level: d.level }),
  }),
  'session.ended': declare({
    audiences: ['agent', 'global'],
    description:
      'An agent Session ended (logout, disable, expiry): the last event of the subscriptions under it. `sessions` are public fingerprints of the Session IDs.',
    payload: z.object({ reason: z.string(), sessions: z.array(z.string()) }).strict(),
    toWire: same<{ reason: string; sessions: string[] }>,
  }),
  'visitor.online': declare({
    audiences: ['global'],
    description: 'A visitor opened the chat (its bootstrap), at most once per visitor per interval.',
    payload: z.object({ uid: z.string(), nickname: z.string() }).strict(),
    toWire: (d: { uid: string; nickname: string }) => ({ uid: d.uid, nickname: d.nickname }),
  }),
  'message.created': declare({
    webhook: 1,
    audiences: ['visitor', 'agent', 'admin'],
    description:
      'A message was stored (after its commit), system and bot messages included (to the visitor, its agent and the merchant’s admins on `admin-{bid}`; never an internal note); `message.seq` is the next of its conversation — a jump means fetch the hole with `after`. `bot_id`: the bot that holds the conversation (null when none), so a bot answers only its own conversations.',
    payload: z.object({ message: messageWire, bot_id: z.string().nullable() }).strict(),
    toWire: (d: { message: MessageView; botId?: string | null }) => ({
      message: toMessageWire(d.message),
      bot_id: d.botId ?? null,
    }),
  }),
  'message.read': declare({
    audiences: ['visitor', 'agent'],
    description: 'One side read the conversation up to `seq` (a read receipt for the other side).',
    payload: z
      .object({
        conversation_id: z.string(),
        visitor_id: z.string(),
        reader_type: z.enum(['visitor', 'agent']),
        reader_id: z.string(),
        seq: z.number().int(),
      })
      .strict(),
    toWire: (d: {
      conversationId: string;
      visitorId: string;
      readerType: 'visitor' | 'agent';
      readerId: string;
      seq: number;
    }) => ({
      conversation_id: d.conversationId,
      visitor_id: d.visitorId,
      reader_type: d.readerType,
      reader_id: d.readerId,
      seq: d.seq,
    }),
  }),
  typing: declare({
    audiences: ['visitor', 'agent'],
    description: 'The other side is typing (`typing` true) or stopped; ephemeral, throttled per sender, never stored.',
    payload: z
      .object({
        conversation_id: z.string(),
        visitor_id: z.string(),
        sender_type: z.enum(['visitor', 'agent']),
        sender_id: z.string(),
        typing: z.boolean(),
      })
      .strict(),
    toWire: (d: {
      conversationId: string;
      visitorId: string;
      senderType: 'visitor' | 'agent';
      senderId: string;
      typing: boolean;
    }) => ({
      conversation_id: d.conversationId,
      visitor_id: d.visitorId,
      sender_type: d.senderType,
      sender_id: d.senderId,
      typing: d.typing,
    }),
  }),
  'conversation.queued': declare({
    audiences: ['global', 'visitor'],
    description: 'A conversation waits for an agent (new, or transferred back to a queue); `queue_position` from 1.',
    ...queuePlace,
  }),
  'conversation.queue_position': declare({
    audiences: ['visitor'],
    description:
      'The visitor’s place in its group’s queue moved (conversations ahead were served, closed or claimed, or went ahead of it): `queue_position` from 1, pushed after the change by the queue’s drain, once per new position.',
    ...queuePlace,
  }),
  'conversation.assigned': declare({
    webhook: 1,
    audiences: ['global', 'agent', 'visitor'],
    description: 'An agent took a conversation (routing, a claim or the queue draining).',
    payload: z.object({ ...conversationRef, agent: agentBriefWire, by: z.enum(['routing', 'claim']) }).strict(),
    toWire: (d: ConversationRef & { agent: AgentBrief; by: 'routing' | 'claim' }) => ({
      ...toConversationRef(d),
      agent: toAgentBriefWire(d.agent),
      by: d.by,
    }),
  }),
  'conversation.transferred': declare({
    webhook: 1,
    audiences: ['global', 'agent', 'visitor'],
    description: 'A conversation moved to another agent (`to` set) or back to a group’s queue (`to` null).',
    payload: z
      .object({
        ...conversationRef,
        from_agent_id: z.string(),
        to: agentBriefWire.nullable(),
        group_id: z.string().nullable(),
      })
      .strict(),
    toWire: (d: ConversationRef & { fromAgentId: string; to: AgentBrief | null; groupId: string | null }) => ({
      ...toConversationRef(d),
      from_agent_id: d.fromAgentId,
      to: d.to && toAgentBriefWire(d.to),
      group_id: d.groupId,
    }),
  }),
  'conversation.requeued': declare({
    audiences: ['global', 'agent', 'visitor'],
    description:
      'Its agent went offline beyond the presence grace: the conversation is back at the front of its group’s queue (`conversation.queued` follows with the position).',
    payload: z
      .object({
        ...conversationRef,
        from_agent_id: z.string(),
        group_id: z.string().nullable(),
        reason: z.enum(['agent_offline']),
      })
      .strict(),
    toWire: (d: ConversationRef & { fromAgentId: string; groupId: string | null; reason: 'agent_offline' }) => ({
      ...toConversationRef(d),
      from_agent_id: d.fromAgentId,
      group_id: d.groupId,
      reason: d.reason,
    }),
  }),
  'conversation.closed': declare({
    webhook: 1,
    audiences: ['global', 'agent', 'visitor'],
    description: 'A conversation was closed by the visitor, its agent or the idle timeout (`closed_by`).',
    payload: z
      .object({ ...conversationRef, agent_id: z.string().nullable(), closed_by: z.enum(['visitor', 'agent', 'idle']) })
      .strict(),
    toWire: (d: ConversationRef & { agentId: string | null; closedBy: 'visitor' | 'agent' | 'idle' }) => ({
      ...toConversationRef(d),
      agent_id: d.agentId,
      closed_by: d.closedBy,
    }),
  }),
  'conversation.rating_invited': declare({
    audiences: ['visitor'],
    description: 'The closed conversation may be rated (`rating`) and/or marked resolved (`resolved`).',
    payload: z.object({ conversation_id: z.string(), rating: z.boolean(), resolved: z.boolean() }).strict(),
    toWire: (d: { conversationId: string; rating: boolean; resolved: boolean }) => ({
      conversation_id: d.conversationId,
      rating: d.rating,
      resolved: d.resolved,
    }),
  }),
  'note.created': declare({
    audiences: ['agent'],
    description:
      'An agent wrote an internal note on a conversation: to the agents of the conversation only (its assigned agent and the author), never to a visitor channel. `after_seq` is the seq it follows; notes take no seq of their own.',
    payload: z.object({ note: noteWire }).strict(),
    toWire: (d: { note: NoteView }) => ({ note: toNoteWire(d.note) }),
  }),
  'conversation.message_left': declare({
    webhook: 1,
    audiences: ['global', 'visitor'],
    description:
      'Nobody could answer (`reason` `closed`: out of business hours; `no_agent`: no agent of the group online): the conversation is kept as a message left for agents to take from `messagesLeft`; the visitor gets the `notice` it is shown. Webhook-deliverable.',
    payload: z
      .object({
        ...conversationRef,
        group_id: z.string().nullable(),
        reason: z.enum(['closed', 'no_agent']),
        next_open_at: z.number().int().nullable(),
        notice: z.string(),
      })
      .strict(),
    toWire: (
      d: ConversationRef & {
        groupId: string | null;
        reason: 'closed' | 'no_agent';
        nextOpenAt: number | null;
        notice: string;
      },
    ) => ({
      ...toConversationRef(d),
      group_id: d.groupId,
      reason: d.reason,
      next_open_at: d.nextOpenAt,
      notice: d.notice,
    }),
  }),
  'business_hours.changed': declare({
    audiences: ['global', 'agent', 'visitor'],
    description:
      'The merchant (`group_id` null) or a group opened or closed by its business hours, within a second of the boundary, or at once when an admin’s change flips it; `next_open_at` in Unix seconds.',
    payload: z
      .object({
        group_id: z.string().nullable(),
        open: z.boolean(),
        next_open_at: z.number().int().nullable(),
        timezone: z.string(),
      })
      .strict(),
    toWire: (d: { groupId: string | null; open: boolean; nextOpenAt: number | null; timezone: string }) => ({
      group_id: d.groupId,
      open: d.open,
      next_open_at: d.nextOpenAt,
      timezone: d.timezone,
    }),
  }),
  'conversation.created': declare({
    audiences: ['webhook'],
    webhook: 1,
    description:
      'A visitor started a conversation (before routing: `conversation.assigned` or a queue follows); `bot_id` set when the merchant’s bot took it at once (state `active`, docs/integration.md "Bots").',
    payload: z.object({ ...conversationRef, group_id: z.string().nullable(), bot_id: z.string().nullable() }).strict(),
    toWire: (d: ConversationRef & { groupId: string | null; botId?: string | null }) => ({
      ...toConversationRef(d),
      group_id: d.groupId,
      bot_id: d.botId ?? null,
    }),
  }),
  'conversation.handed_off': declare({
    audiences: ['global', 'visitor', 'webhook'],
    webhook: 1,
    description:
      'The bot that held a conversation handed it off to the agents (`reason`: `bot` its own call, `visitor` the visitor asked for a human, `timeout` the bot did not answer within BOT_HANDOFF_TIMEOUT_SECONDS, `disabled` the bot was disabled); the conversation waits in its group’s queue. Exactly one per hand-off.',
    payload: z
      .object({
        ...conversationRef,
        bot_id: z.string(),
        group_id: z.string().nullable(),
        reason: z.enum(['bot', 'visitor', 'timeout', 'disabled']),
      })
      .strict(),
    toWire: (
      d: ConversationRef & {
        botId: string;
        groupId: string | null;
        reason: 'bot' | 'visitor' | 'timeout' | 'disabled';
      },
    ) => ({ ...toConversationRef(d), bot_id: d.botId, group_id: d.groupId, reason: d.reason }),
  }),
  'conversation.rated': declare({
    audiences: ['webhook'],
    webhook: 1,
    description: 'The visitor rated a closed conversation (`score` 1–5, `resolved` and `comment` when given).',
    payload: z
      .object({
        ...conversationRef,
        score: z.number().int(),
        resolved: z.boolean().nullable(),
        comment: z.string().nullable(),
      })
      .strict(),
    toWire: (d: ConversationRef & { score: number; resolved: boolean | null; comment: string | null }) => ({
      ...toConversationRef(d),
      score: d.score,
      resolved: d.resolved,
      comment: d.comment,
    }),
  }),
  'visitor.created': declare({
    audiences: ['webhook'],
    webhook: 1,
    description:
      'A visitor was created (its first bootstrap or token); `external_user_id` is the merchant’s own id of an identified visitor.',
    payload: z
      .object({ visitor_id: z.string(), nickname: z.string(), external_user_id: z.string().nullable() })
      .strict(),
    toWire: (d: { visitorId: string; nickname: string; externalUserId: string | null }) => ({
      visitor_id: d.visitorId,
      nickname: d.nickname,
      external_user_id: d.externalUserId,
    }),
  }),
  'webhook.test': declare({
    audiences: ['webhook'],
    webhook: 1,
    description: 'A test ping an admin sent to one endpoint (`testWebhookEndpoint`); nothing happened in the chat.',
    payload: z.object({ endpoint_id: z.string() }).strict(),
    toWire: (d: { endpointId: string }) => ({ endpoint_id: d.endpointId }),
  }),
  'merchant.config_changed': declare({
    audiences: ['internal'],
    description:
      "A merchant's configuration (settings, switches, upload limits, groups, attribute definitions, extensions) changed: every instance drops its cached copy.",
    payload: z.object({ merchant_id: z.string() }).strict(),
    toWire: (d: { merchantId: string }) => ({ merchant_id: d.merchantId }),
  }),
  'visitor_token.revoked': declare({
    audiences: ['internal'],
    description: 'A visitor token was revoked: every instance forgets its cached check of it (SHA-256 of the token).',
    payload: z.object({ token_hash: z.string() }).strict(),
    toWire: (d: { tokenHash: string }) => ({ token_hash: d.tokenHash }),
  }),
  subscribed: declare({
    audiences: ['global', 'agent', 'visitor', 'admin'],
    origin: 'bus',
    description:
      'First event of a subscription without `since`: its position is where to resume from. Carries no data; not a published event.',
    payload: z.object({}).strict(),
    toWire: same<Record<string, never>>,
  }),
  'history.gap': declare({
    audiences: ['global', 'agent', 'visitor', 'admin'],
    origin: 'bus',
    description: 'Events after `since` were already dropped from the channel history: reload your state.',
    payload: z.object({ since: z.string() }).strict(),
    toWire: same<{ since: string }>,
  }),
} as const;

export type EventName = keyof typeof eventCatalog;
/** What the domain passes to publish an event (camelCase). */
export type EventData<N extends EventName> = Parameters<(typeof eventCatalog)[N]['toWire']>[0];
/** What subscribers receive. */
export type EventWire<N extends EventName> = ReturnType<(typeof eventCatalog)[N]['toWire']>;

export const eventNames = Object.keys(eventCatalog) as EventName[];

/** Events a webhook endpoint may subscribe to, each with its payload version. */
export const webhookEventNames = eventNames.filter(
  (n) => (eventCatalog[n] as EventDeclaration<unknown, unknown>).webhook !== undefined,
);
export type WebhookEventName =
  | 'message.created'
  | 'conversation.created'
  | 'conversation.assigned'
  | 'conversation.transferred'
  | 'conversation.closed'
  | 'conversation.rated'
  | 'conversation.handed_off'
  | 'conversation.message_left'
  | 'visitor.created'
  | 'webhook.test';

/** Names the gateway owns: POST /internal/events may not publish them. */
export const isReservedEventName = (name: string) => Object.hasOwn(eventCatalog, name);

/** The wire payload of an event (what a subscriber receives, what the outbox stores). */
export function toWire<N extends EventName>(name: N, data: EventData<N>): EventWire<N> {
  const declaration = eventCatalog[name] as unknown as EventDeclaration<EventData<N>, EventWire<N>>;
  return declaration.toWire(data);
}
