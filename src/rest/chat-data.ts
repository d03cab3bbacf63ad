import { z } from 'zod';
import type { listConversations } from '../resolvers/conversations/queries.js';
import type { AssignResult } from '../resolvers/conversations/routing.js';
import type { ConversationView } from '../resolvers/conversations/view.js';
import { agentBriefWire, messageWire, toAgentBriefWire, toMessageWire } from '../resolvers/event-catalog.js';
import type { MessagePage } from '../resolvers/messages/history.js';
import type { ReadResult } from '../resolvers/messages/read.js';
import type { SendResult } from '../resolvers/messages/send.js';

/**
 * The legacy chat endpoints' answers (docs/chat.md): their snake_case shapes, the mappings from
 * the domain's camelCase results and the OpenAPI examples; the declarations are in chat.ts.
 */

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

export const assignData = z
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
export const legacyAssign = (r: AssignResult): z.input<typeof assignData> => ({
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

export const readData = z
  .object({ conversation_id: z.string(), read_seq: z.number().int(), unread_count: z.number().int() })
  .strict();
export const legacyRead = (r: ReadResult): z.input<typeof readData> => ({
  conversation_id: r.conversationId,
  read_seq: r.readSeq,
  unread_count: r.unreadCount,
});

export const typingData = z.object({ published: z.boolean() }).strict();

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
