import { claimConversation, pinConversation } from '../resolvers/conversations/agent-actions.js';
import { closeConversation } from '../resolvers/conversations/closing.js';
import { listConversations, loadConversation } from '../resolvers/conversations/queries.js';
import { rateConversation } from '../resolvers/conversations/rating.js';
import { type AssignResult, assignAgent } from '../resolvers/conversations/routing.js';
import { transferConversation } from '../resolvers/conversations/transfer.js';
import type { ConversationView } from '../resolvers/conversations/view.js';
import type { AgentBrief } from '../resolvers/event-catalog.js';
import { chatViewer, defined, managerViewer, readerViewer } from './args.js';
import { MessageLeftNoticeRef } from './availability.js';
import { builder } from './builder.js';

/**
 * Conversations in GraphQL: the same domain functions as the legacy REST endpoints (README
 * "Chat"); the messages are in message.ts.
 */

export const ConversationStateEnum = builder.enumType('ConversationState', {
  description: 'Where a conversation is in its life.',
  values: {
    queued: { description: 'Waiting for an agent (in its group’s queue).' },
    active: { description: 'An agent is assigned.' },
    closed: { description: 'Closed: history.' },
  } as const,
});

const ScopeEnum = builder.enumType('ConversationScope', {
  description: 'Which conversations `conversations` lists.',
  values: {
    mine: { description: 'The agent’s active conversations, latest activity first.' },
    queue: { description: 'Queued conversations of the merchant, oldest first (the order they are served in).' },
    all: { description: 'Every conversation of the merchant, newest first (administrators only).' },
  } as const,
});

const ChatAgent = builder.objectRef<AgentBrief>('ChatAgent').implement({
  description: 'The public face of an agent in a conversation.',
  fields: (t) => ({
    id: t.exposeID('agentId', { description: 'Agent id (the same as `agentId`), so caches normalize agents.' }),
    agentId: t.exposeString('agentId', { description: 'Agent id.' }),
    nickname: t.exposeString('nickname', { description: 'Nickname.' }),
    avatar: t.exposeString('avatar', { description: 'Avatar URL or path.' }),
  }),
});

const Rating = builder.objectRef<NonNullable<ConversationView['rating']>>('ConversationRating').implement({
  description: 'The visitor’s rating of a closed conversation.',
  fields: (t) => ({
    score: t.exposeInt('score', { description: '1 to 5.' }),
    resolved: t.exposeBoolean('resolved', { nullable: true, description: 'Resolved feedback, when given.' }),
    comment: t.exposeString('comment', { nullable: true, description: 'Free text, when given.' }),
  }),
});

export const Conversation = builder.objectRef<ConversationView>('Conversation').implement({
  description: 'A conversation between a visitor and the merchant’s agents.',
  fields: (t) => ({
    id: t.exposeID('conversationId', {
      description: 'Conversation id (the same as `conversationId`), so caches update a conversation after mutations.',
    }),
    conversationId: t.exposeString('conversationId', { description: 'Conversation id.' }),
    visitorId: t.exposeString('visitorId', { description: 'The visitor uid; agents address conversations by it.' }),
    visitorName: t.exposeString('visitorName', { description: 'The visitor’s nickname.' }),
    state: t.expose('state', { type: ConversationStateEnum, description: 'queued, active or closed.' }),
    agent: t.field({
      type: ChatAgent,
      nullable: true,
      resolve: (c) => c.agent,
      description: 'The assigned agent (kept on a closed conversation); null while queued.',
    }),
    groupId: t.exposeString('groupId', { nullable: true, description: 'The agent group whose queue it belongs to.' }),
    queuePosition: t.exposeInt('queuePosition', {
      nullable: true,
      description: 'Position in its group’s queue from 1 while queued; null otherwise.',
    }),
    lastSeq: t.exposeInt('lastSeq', { description: 'The seq of its newest message (0: none).' }),
    unreadCount: t.exposeInt('unreadCount', {
      description: 'Messages of the other side the caller has not read (from the read positions).',
    }),
    pinnedAt: t.exposeFloat('pinnedAt', { description: 'Pin time in Unix seconds; 0 when not pinned.' }),
    timestamp: t.exposeFloat('timestamp', { description: 'Last activity, Unix seconds.' }),
    createdAt: t.exposeFloat('createdAt', { description: 'Unix milliseconds.' }),
    closedAt: t.exposeFloat('closedAt', { nullable: true, description: 'Unix milliseconds; null while open.' }),
    closedBy: t.exposeString('closedBy', { nullable: true, description: '`visitor`, `agent` or `idle`.' }),
    rating: t.field({
      type: Rating,
      nullable: true,
      resolve: (c) => c.rating,
      description: 'The visitor’s rating, once given.',
    }),
  }),
});

const PageInfo = builder
  .objectRef<{ hasNextPage: boolean; endCursor: string | null }>('ConversationPageInfo')
  .implement({
    description: 'Where a page of conversations ends.',
    fields: (t) => ({
      hasNextPage: t.exposeBoolean('hasNextPage', { description: 'Whether more follow.' }),
      endCursor: t.exposeString('endCursor', {
        nullable: true,
        description: 'Pass as `after` for the next page; null on an empty page.',
      }),
    }),
  });

const ConversationConnection = builder
  .objectRef<Awaited<ReturnType<typeof listConversations>>>('ConversationConnection')
  .implement({
    description: 'A page of conversations.',
    fields: (t) => ({
      nodes: t.field({ type: [Conversation], resolve: (c) => c.nodes, description: 'The conversations of the page.' }),
      pageInfo: t.field({
        type: PageInfo,
        resolve: (c) => ({ hasNextPage: c.hasNextPage, endCursor: c.endCursor }),
        description: 'Pagination.',
      }),
    }),
  });

const AssignResultRef = builder.objectRef<AssignResult>('AssignResult').implement({
  description: 'The visitor’s conversation after `assignAgent`.',
  fields: (t) => ({
    conversationId: t.exposeString('conversationId', { description: 'Conversation id.' }),
    state: t.expose('state', { type: ConversationStateEnum, description: '`active` with an agent, or `queued`.' }),
    agent: t.field({
      type: ChatAgent,
      nullable: true,
      resolve: (r) => r.agent,
      description: 'The assigned agent; null while queued.',
    }),
    queuePosition: t.exposeInt('queuePosition', { nullable: true, description: 'Position from 1 while queued.' }),
    messageLeft: t.field({
      type: MessageLeftNoticeRef,
      nullable: true,
      resolve: (r) => r.messageLeft,
      description:
        'Set while nobody can answer: the conversation is kept as a message left, and what to tell the visitor.',
    }),
  }),
});

// ---- queries ---------------------------------------------------------------------------------

builder.queryField('conversation', (t) =>
  t.field({
    type: Conversation,
    nullable: true,
    description:
      'A visitor’s conversation: its open one, else its latest; null before the first. Agents (and API keys with `conversations:read`) name the visitor; a visitor gets its own.',
    args: {
      visitorId: t.arg.string({ description: 'The visitor uid (agents only).' }),
    },
    resolve: async (_root, args, ctx) => loadConversation(ctx.deps, await readerViewer(ctx), defined(args)),
  }),
);

builder.queryField('conversations', (t) =>
  t.field({
    type: ConversationConnection,
    description:
      'Conversations of the agent’s merchant, one page (agents, refused to ticket agents; or an API key with `conversations:read`: `all` by default, or `queue`).',
    args: {
      scope: t.arg({ type: ScopeEnum, description: 'Which conversations; `mine` by default.' }),
      after: t.arg.string({ description: 'The `endCursor` of the previous page.' }),
      first: t.arg.int({ description: 'Page size, 1–100 (20 by default).' }),
      labelId: t.arg.string({ description: 'Only the conversations carrying this label of the merchant.' }),
    },
    resolve: async (_root, args, ctx) => listConversations(ctx.deps, await managerViewer(ctx), defined(args)),
  }),
);

// ---- mutations -------------------------------------------------------------------------------

builder.mutationField('assignAgent', (t) =>
  t.field({
    type: AssignResultRef,
    description:
      'The spec’s step 2 (visitors): the open conversation, or a new one routed by its group’s policy to an online agent under capacity, else queued (`queuePosition`) or kept as a message left (`messageLeft`). Idempotent.',
    args: {
      groupId: t.arg.string({ description: 'An agent group of the merchant (the default group otherwise).' }),
      agentId: t.arg.string({ description: 'A specific agent of the merchant, preferred when available.' }),
      entryPage: t.arg.string({
        description:
          'The page the visitor is on (at most 2048 characters): the merchant’s routing rules may give the conversation required skills or a priority by it.',
      }),
    },
    resolve: async (_root, args, ctx) => assignAgent(ctx.deps, await ctx.visitor(), defined(args)),
  }),
);

builder.mutationField('claimConversation', (t) =>
  t.field({
    type: Conversation,
    description:
      'An agent takes a queued conversation; of two claiming at once one wins, the other gets ALREADY_CLAIMED.',
    args: { visitorId: t.arg.string({ required: true, description: 'The visitor uid.' }) },
    resolve: async (_root, args, ctx) => claimConversation(ctx.deps, await ctx.agent(), args),
  }),
);

builder.mutationField('transferConversation', (t) =>
  t.field({
    type: Conversation,
    description:
      'Hands the agent’s active conversation to another online agent (`toAgentId`) or back to a group’s queue (`groupId`, or its own group when neither is given).',
    args: {
      visitorId: t.arg.string({ required: true, description: 'The visitor uid.' }),
      toAgentId: t.arg.string({ description: 'An online agent of the merchant.' }),
      groupId: t.arg.string({ description: 'A group whose queue takes it.' }),
    },
    resolve: async (_root, args, ctx) => transferConversation(ctx.deps, await ctx.agent(), defined(args)),
  }),
);

builder.mutationField('closeConversation', (t) =>
  t.field({
    type: Conversation,
    description:
      'Closes the open conversation: the visitor its own, an agent the one assigned to it (or a queued one). The visitor may be invited to rate.',
    args: { visitorId: t.arg.string({ description: 'The visitor uid (agents only).' }) },
    resolve: async (_root, args, ctx) => closeConversation(ctx.deps, await chatViewer(ctx), defined(args)),
  }),
);

builder.mutationField('pinConversation', (t) =>
  t.field({
    type: Conversation,
    description: 'Pins (or with `pinned: false` unpins) an active conversation of the agent.',
    args: {
      visitorId: t.arg.string({ required: true, description: 'The visitor uid.' }),
      pinned: t.arg.boolean({ description: 'True (default) to pin, false to unpin.' }),
    },
    resolve: async (_root, args, ctx) => pinConversation(ctx.deps, await ctx.agent(), defined(args)),
  }),
);

builder.mutationField('rateConversation', (t) =>
  t.field({
    type: Conversation,
    description:
      'The visitor rates a closed conversation once (its latest unless conversationId is given), while the merchant’s session_invite_rating switch is on.',
    args: {
      conversationId: t.arg.string({ description: 'A closed conversation of the visitor (the latest by default).' }),
      score: t.arg.int({ required: true, description: '1 to 5.' }),
      resolved: t.arg.boolean({ description: 'Whether the problem was resolved (needs session_invite_resolved on).' }),
      comment: t.arg.string({ description: 'Free text, at most 1000 characters.' }),
    },
    resolve: async (_root, args, ctx) => rateConversation(ctx.deps, await ctx.visitor(), defined(args)),
  }),
);
