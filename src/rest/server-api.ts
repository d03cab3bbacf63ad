import { z } from 'zod';
import { listConversations, loadConversation } from '../resolvers/conversations/queries.js';
import { publishEventInput } from '../resolvers/inputs.js';
import { publishMerchantEvent } from '../resolvers/integration/api-keys/publish.js';
import { listMessages } from '../resolvers/messages/history.js';
import {
  conversationData,
  conversationPageData,
  exampleConversation,
  exampleConversationPage,
  examplePage,
  legacyConversation,
  legacyConversationPage,
  legacyPage,
  pageData,
} from './chat-data.js';
import { agentChatListInput, agentConversationInput, agentHistoryInput } from './chat-inputs.js';
import { type AnyRoute, jsonRoute } from './route.js';

/**
 * `/api/*`: the merchant's servers, with an API key (`Authorization: Bearer prly_…`, docs/integration.md
 * "Server-to-server"): the same domain functions and legacy shapes as the agents' endpoints.
 */

const tag = 'Server-to-server (API key)';

export const serverApiEndpoints: AnyRoute[] = [
  jsonRoute({
    method: 'get',
    path: '/api/conversation/list',
    identity: 'apiKey',
    scope: 'conversations:read',
    tag,
    summary: 'List the merchant’s conversations',
    description:
      'scope all (default: every conversation, newest first) or queue (queued, oldest first); cursor-paginated with after; label_id: only those carrying that label.',
    input: agentChatListInput,
    requestExample: { scope: 'all', limit: 20 },
    output: conversationPageData,
    example: exampleConversationPage,
    handle: async ({ deps, viewer, input }) => legacyConversationPage(await listConversations(deps, viewer, input)),
  }),
  jsonRoute({
    method: 'get',
    path: '/api/conversation/get',
    identity: 'apiKey',
    scope: 'conversations:read',
    tag,
    summary: 'A visitor’s conversation',
    description: 'The open conversation of a visitor of the merchant, else its latest; null before the first.',
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
    method: 'get',
    path: '/api/message/list',
    identity: 'apiKey',
    scope: 'conversations:read',
    tag,
    summary: 'A visitor’s message history',
    description: 'Across the visitor’s conversations, in conversation then seq order; before/after page it.',
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
    path: '/api/events/publish',
    identity: 'apiKey',
    scope: 'events:publish',
    tag,
    summary: 'Publish an event on a channel of the merchant',
    description:
      'As POST /internal/events, on the merchant’s own channels only: `global-{bid}`, `agent-{agent_id}` of its agents, its visitors’ channels (another channel: 1403). The gateway’s event names are reserved (1000).',
    input: publishEventInput,
    requestExample: { channel: 'global-demo', event: 'order.shipped', data: { order_id: 'o_1001' } },
    encodings: ['json'],
    output: z.object({ id: z.string().openapi({ description: 'The event id in its channel.' }) }).strict(),
    status: 202,
    example: { id: '1795443464123-0' },
    handle: async ({ deps, viewer, input }) => publishMerchantEvent(deps, viewer, input),
  }),
];
