import { z } from 'zod';
import { claimConversation, pinConversation } from '../resolvers/conversations/agent-actions.js';
import { closeConversation } from '../resolvers/conversations/closing.js';
import { listConversations, loadConversation } from '../resolvers/conversations/queries.js';
import { rateConversation } from '../resolvers/conversations/rating.js';
import { type AssignResult, assignAgent } from '../resolvers/conversations/routing.js';
import { transferConversation } from '../resolvers/conversations/transfer.js';
import type { ConversationView } from '../resolvers/conversations/view.js';
import { agentBriefWire, messageWire, toAgentBriefWire, toMessageWire } from '../resolvers/event-catalog.js';
import {
  listMessages,
  type MessagePage,
  markRead,
  type ReadResult,
  type SendResult,
  sendMessage,
  setTyping,
} from '../resolvers/messages.js';
import {
  agentChatListInput,
  agentConversationInput,
  agentHistoryInput,
  agentReadInput,
  agentSendInput,
  agentTypingInput,
  chatAssignInput,
  chatPinInput,
  chatRateInput,
  chatTransferInput,
  chatUnpinInput,
  visitorHistoryInput,
  visitorReadInput,
  visitorSendInput,
  visitorTypingInput,
} from './chat-inputs.js';
import { type AnyRoute, jsonRoute } from './route.js';

/**
 * The legacy chat endpoints (docs/chat.md): snake_case at this edge, form or JSON bodies, the
 * same domain functions as GraphQL. Agents address a conversation by the visitor uid.
 */

// ---- legacy output shapes ------------------------------------------------------------------

export const conversationData = z
  .object({
    conversation_id: z.string(),
    visitor_id: z.string(),
    visitor_name: z.string(),
    state: z.enum(['queued', 'active', 'closed']),
    agent: agentBriefWire.nullable(),
    group_id: z.string().nullable(),
    queue_position: z.number().int().nullable().openapi({ description: 'From 1 while queued, else null.' }),
    last_seq: z.number().int(),
    unread_count: z.number().int().openapi({ description: 'Messages of the other side the caller has not read.' }),
    pinned_at: z.number(),
    timestamp: z.number().openapi({ description: 'Last activity, Unix seconds.' }),
    created_at: z.number().openapi({ description: 'Unix milliseconds.' }),
    closed_at: z.number().nullable(),
    closed_by: z.string().nullable().openapi({ description: 'visitor, agent or idle.' }),
    rating: z
      .object({ score: z.number().int(), resolved: z.boolean().nullable(), comment: z.string().nullable() })
      .strict()
      .nullable(),
  })
  .strict();

export const legacyConversation = (c: ConversationView): z.input<typeof conversationData> => ({
  conversation_id: c.conversationId,
  visitor_id: c.visitorId,
  visitor_name: c.visitorName,
  state: c.state,
  agent: c.agent && toAgentBriefWire(c.agent),
  group_id: c.groupId,
  queue_position: c.queuePosition,
  last_seq: c.lastSeq,
  unread_count: c.unreadCount,
  pinned_at: c.pinnedAt,
  timestamp: c.timestamp,
  created_at: c.createdAt,
  closed_at: c.closedAt,
  closed_by: c.closedBy,
  rating: c.rating,
});

const assignData = z
  .object({
    conversation_id: z.string(),
    state: z.enum(['queued', 'active', 'closed']),
    agent: agentBriefWire.nullable(),
    queue_position: z.number().int().nullable(),
    message_left: z
      .object({
        reason: z.enum(['closed', 'no_agent']),
        notice: z.string(),
        next_open_at: z.number().int().nullable(),
        contact_fields: z.array(z.string()),
      })
      .strict()
      .nullable()
      .openapi({
        description: 'Set while nobody can answer: the conversation is kept as a message left (docs/availability.md).',
      }),
  })
  .strict();
const legacyAssign = (r: AssignResult): z.input<typeof assignData> => ({
  conversation_id: r.conversationId,
  state: r.state,
  agent: r.agent && toAgentBriefWire(r.agent),
  queue_position: r.queuePosition,
  message_left: r.messageLeft && {
    reason: r.messageLeft.reason,
    notice: r.messageLeft.notice,
    next_open_at: r.messageLeft.nextOpenAt,
    contact_fields: r.messageLeft.contactFields,
  },
});

export const sendData = messageWire.extend({
  conversation_state: z
    .enum(['queued', 'active', 'closed'])
    .openapi({ description: '`queued`: no agent yet; the message waits for the one who gets it.' }),
  duplicate: z.boolean().openapi({ description: 'True when this client_msg_id was already stored.' }),
});
export const legacySend = (r: SendResult): z.input<typeof sendData> => ({
  ...toMessageWire(r.message),
  conversation_state: r.conversationState,
  duplicate: r.duplicate,
});

export const pageData = z
  .object({
    messages: z.array(messageWire).openapi({ description: 'Oldest first within the page.' }),
    has_more: z.boolean(),
    start_cursor: z.string().nullable().openapi({ description: 'Pass as `before` for the older page.' }),
    end_cursor: z.string().nullable().openapi({ description: 'Pass as `after` for what follows.' }),
  })
  .strict();
export const legacyPage = (p: MessagePage): z.input<typeof pageData> => ({
  messages: p.messages.map(toMessageWire),
  has_more: p.hasMore,
  start_cursor: p.startCursor,
  end_cursor: p.endCursor,
});

const readData = z
  .object({ conversation_id: z.string(), read_seq: z.number().int(), unread_count: z.number().int() })
  .strict();
const legacyRead = (r: ReadResult): z.input<typeof readData> => ({
  conversation_id: r.conversationId,
  read_seq: r.readSeq,
  unread_count: r.unreadCount,
});

const typingData = z.object({ published: z.boolean() }).strict();

/** A page of conversations, as /agent/chat/list and the API keys' /api/conversation/list answer it. */
export const conversationPageData = z
  .object({ list: z.array(conversationData), has_next_page: z.boolean(), end_cursor: z.string().nullable() })
  .strict();
export const legacyConversationPage = (
  page: Awaited<ReturnType<typeof listConversations>>,
): z.input<typeof conversationPageData> => ({
  list: page.nodes.map(legacyConversation),
  has_next_page: page.hasNextPage,
  end_cursor: page.endCursor,
});

export const exampleMessage = {
  id: 'msg_3f9a1c2b7d',
  conversation_id: 'c_8e1f0a9b2c',
  visitor_id: 'v_k2m9q8x7',
  seq: 2,
  sender_type: 'visitor' as const,
  sender_id: 'v_k2m9q8x7',
  client_msg_id: '1700000000000-1',
  type: 'text' as const,
  content: 'Hello!',
  attachment: null,
  meta: null,
  created_at: 1700000000000,
  recalled: false,
};
export const exampleConversation: z.input<typeof conversationData> = {
  conversation_id: 'c_8e1f0a9b2c',
  visitor_id: 'v_k2m9q8x7',
  visitor_name: 'Lily',
  state: 'active',
  agent: { agent_id: 'a_alice', nickname: 'Alice', avatar: '/assets/avatar-alice.svg' },
  group_id: 'g_demo_default',
  queue_position: null,
  last_seq: 2,
  unread_count: 0,
  pinned_at: 0,
  timestamp: 1700000000,
  created_at: 1700000000000,
  closed_at: null,
  closed_by: null,
  rating: null,
};
export const exampleConversationPage: z.input<typeof conversationPageData> = {
  list: [exampleConversation],
  has_next_page: false,
  end_cursor: 'WzE3MDAwMDAwMDAsImNfMSJd',
};

export const examplePage = {
  messages: [exampleMessage],
  has_more: false,
  start_cursor: 'WyJjXzEiLDJd',
  end_cursor: 'WyJjXzEiLDJd',
};

// ---- declarations --------------------------------------------------------------------------

export const chatEndpoints: AnyRoute[] = [
  // ---- visitor ----
  jsonRoute({
    method: 'post',
    path: '/visitor/chat/assign',
    identity: 'visitor',
    tag: 'Chat (visitor)',
    summary: 'Assign an agent (the spec’s step 2)',
    description:
      'The visitor’s open conversation (idempotent), or a new one routed to the least busy online agent of the group under its capacity, else queued with its position.',
    input: chatAssignInput,
    requestExample: {},
    output: assignData,
    example: {
      conversation_id: 'c_8e1f0a9b2c',
      state: 'active',
      agent: { agent_id: 'a_alice', nickname: 'Alice', avatar: '/assets/avatar-alice.svg' },
      queue_position: null,
      message_left: null,
    },
    async handle({ deps, viewer, input }) {
      return legacyAssign(await assignAgent(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/visitor/message/send',
    identity: 'visitor',
    tag: 'Chat (visitor)',
    summary: 'Send a message',
    description:
      'Exactly once per client_msg_id; the answer is the stored message (server id, seq, time). Starts a new conversation after a close.',
    input: visitorSendInput,
    // A merchant over its share of a busy instance is refused before its body is even parsed.
    beforeBody: ({ deps, viewer }) => deps.chatSends.refuseEarly(viewer.merchantId),
    requestExample: { client_msg_id: '1700000000000-1', content: 'Hello!' },
    output: sendData,
    example: { ...exampleMessage, conversation_state: 'active', duplicate: false },
    async handle({ deps, viewer, input }) {
      return legacySend(await sendMessage(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'get',
    path: '/visitor/message/list',
    identity: 'visitor',
    tag: 'Chat (visitor)',
    summary: 'The visitor’s message history',
    description: 'Across its conversations; without before/after the newest page; before: older; after: newer.',
    input: visitorHistoryInput,
    requestExample: { limit: 20 },
    output: pageData,
    example: examplePage,
    async handle({ deps, viewer, input }) {
      return legacyPage(await listMessages(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/visitor/message/read',
    identity: 'visitor',
    tag: 'Chat (visitor)',
    summary: 'Mark read up to a seq',
    input: visitorReadInput,
    requestExample: { seq: 2 },
    output: readData,
    example: { conversation_id: 'c_8e1f0a9b2c', read_seq: 2, unread_count: 0 },
    async handle({ deps, viewer, input }) {
      return legacyRead(await markRead(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/visitor/chat/typing',
    identity: 'visitor',
    tag: 'Chat (visitor)',
    summary: 'Typing indicator',
    description: 'Ephemeral: published to the agent, throttled, never stored.',
    input: visitorTypingInput,
    requestExample: { typing: true },
    output: typingData,
    example: { published: true },
    async handle({ deps, viewer, input }) {
      return setTyping(deps, viewer, input);
    },
  }),
  jsonRoute({
    method: 'get',
    path: '/visitor/chat/get',
    identity: 'visitor',
    tag: 'Chat (visitor)',
    summary: 'The visitor’s conversation',
    description:
      'Its open conversation, else its latest; null before the first (state, agent, queue position, unread).',
    output: conversationData.nullable(),
    example: exampleConversation,
    async handle({ deps, viewer }) {
      const c = await loadConversation(deps, viewer);
      return c && legacyConversation(c);
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/visitor/chat/close',
    identity: 'visitor',
    tag: 'Chat (visitor)',
    summary: 'Close the conversation',
    output: conversationData,
    example: { ...exampleConversation, state: 'closed', closed_by: 'visitor', closed_at: 1700000100000 },
    async handle({ deps, viewer }) {
      return legacyConversation(await closeConversation(deps, viewer));
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/visitor/chat/rate',
    identity: 'visitor',
    tag: 'Chat (visitor)',
    summary: 'Rate a closed conversation (once)',
    description: 'Needs the merchant’s session_invite_rating switch on (resolved: session_invite_resolved); else 1205.',
    input: chatRateInput,
    requestExample: { score: 5, resolved: true },
    output: conversationData,
    example: { ...exampleConversation, state: 'closed', rating: { score: 5, resolved: true, comment: null } },
    async handle({ deps, viewer, input }) {
      return legacyConversation(await rateConversation(deps, viewer, input));
    },
  }),

  // ---- agent ----
  ...(
    [
      ['claim', 'Claim a queued conversation', claimConversation],
      ['close', 'Close a conversation', closeConversation],
    ] as const
  ).map(([action, summary, run]) =>
    jsonRoute({
      method: 'post',
      path: `/agent/chat/${action}`,
      identity: 'agent',
      tag: 'Chat (agent)',
      summary,
      input: agentConversationInput,
      requestExample: { visitor_id: 'v_demo_wang' },
      output: conversationData,
      example: exampleConversation,
      async handle({ deps, viewer, input }) {
        return legacyConversation(await run(deps, viewer, input));
      },
    }),
  ),
  jsonRoute({
    method: 'get',
    path: '/agent/chat/get',
    identity: 'agent',
    tag: 'Chat (agent)',
    summary: 'A visitor’s conversation',
    description: 'The open conversation of the visitor, else its latest; null before the first.',
    input: agentConversationInput,
    requestExample: { visitor_id: 'v_demo_lily' },
    output: conversationData.nullable(),
    example: exampleConversation,
    async handle({ deps, viewer, input }) {
      const c = await loadConversation(deps, viewer, input);
      return c && legacyConversation(c);
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/chat/transfer',
    identity: 'agent',
    tag: 'Chat (agent)',
    summary: 'Transfer to another agent or back to a queue',
    description:
      'to_agent_id: an online agent of the merchant; group_id: that group’s queue; neither: its own group’s queue.',
    input: chatTransferInput,
    requestExample: { visitor_id: 'v_demo_wang', to_agent_id: 'a_bob' },
    output: conversationData,
    example: exampleConversation,
    async handle({ deps, viewer, input }) {
      return legacyConversation(await transferConversation(deps, viewer, input));
    },
  }),
  ...([true, false] as const).map((pinned) =>
    jsonRoute({
      method: 'post',
      path: pinned ? '/agent/chat/pin' : '/agent/chat/unpin',
      identity: 'agent',
      tag: 'Chat (agent)',
      summary: pinned ? 'Pin a conversation' : 'Unpin a conversation',
      input: pinned ? chatPinInput : chatUnpinInput,
      requestExample: { visitor_id: 'v_demo_lily' },
      output: conversationData,
      example: exampleConversation,
      async handle({ deps, viewer, input }) {
        return legacyConversation(await pinConversation(deps, viewer, input));
      },
    }),
  ),
  jsonRoute({
    method: 'get',
    path: '/agent/chat/list',
    identity: 'agent',
    tag: 'Chat (agent)',
    summary: 'List conversations',
    description:
      'scope mine (default), queue (oldest first) or all (administrators); cursor-paginated with after; label_id: only the conversations carrying that label.',
    input: agentChatListInput,
    requestExample: { scope: 'mine', limit: 20 },
    output: conversationPageData,
    example: exampleConversationPage,
    handle: async ({ deps, viewer, input }) => legacyConversationPage(await listConversations(deps, viewer, input)),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/message/send',
    identity: 'agent',
    tag: 'Chat (agent)',
    summary: 'Send a message to a visitor',
    description: 'Into the active conversation assigned to the agent; exactly once per client_msg_id.',
    input: agentSendInput,
    requestExample: { visitor_id: 'v_demo_wang', client_msg_id: '1700000000000-1', content: 'It ships today.' },
    output: sendData,
    example: {
      ...exampleMessage,
      sender_type: 'agent',
      sender_id: 'a_alice',
      conversation_state: 'active',
      duplicate: false,
    },
    async handle({ deps, viewer, input }) {
      return legacySend(await sendMessage(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'get',
    path: '/agent/message/list',
    identity: 'agent',
    tag: 'Chat (agent)',
    summary: 'A visitor’s message history',
    description: 'Across the visitor’s conversations (under history_only_mine: those the agent was assigned).',
    input: agentHistoryInput,
    requestExample: { visitor_id: 'v_demo_lily', limit: 20 },
    output: pageData,
    example: examplePage,
    async handle({ deps, viewer, input }) {
      return legacyPage(await listMessages(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/message/read',
    identity: 'agent',
    tag: 'Chat (agent)',
    summary: 'Mark a conversation read up to a seq',
    input: agentReadInput,
    requestExample: { visitor_id: 'v_demo_wang', seq: 4 },
    output: readData,
    example: { conversation_id: 'c_8e1f0a9b2c', read_seq: 4, unread_count: 0 },
    async handle({ deps, viewer, input }) {
      return legacyRead(await markRead(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/chat/typing',
    identity: 'agent',
    tag: 'Chat (agent)',
    summary: 'Typing indicator',
    input: agentTypingInput,
    requestExample: { visitor_id: 'v_demo_wang', typing: true },
    output: typingData,
    example: { published: true },
    async handle({ deps, viewer, input }) {
      return setTyping(deps, viewer, input);
    },
  }),
];
