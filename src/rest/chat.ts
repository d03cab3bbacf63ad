import { claimConversation, pinConversation } from '../resolvers/conversations/agent-actions.js';
import { closeConversation } from '../resolvers/conversations/closing.js';
import { listConversations, loadConversation } from '../resolvers/conversations/queries.js';
import { rateConversation } from '../resolvers/conversations/rating.js';
import { assignAgent } from '../resolvers/conversations/routing.js';
import { transferConversation } from '../resolvers/conversations/transfer.js';
import { listMessages } from '../resolvers/messages/history.js';
import { markRead } from '../resolvers/messages/read.js';
import { sendMessage } from '../resolvers/messages/send.js';
import { setTyping } from '../resolvers/messages/typing.js';
import {
  assignData,
  conversationData,
  conversationPageData,
  exampleConversation,
  exampleConversationPage,
  exampleMessage,
  examplePage,
  legacyAssign,
  legacyConversation,
  legacyConversationPage,
  legacyPage,
  legacyRead,
  legacySend,
  pageData,
  readData,
  sendData,
  typingData,
} from './chat-data.js';
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
