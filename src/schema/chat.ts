import {
  type AssignResult,
  assignAgent,
  type ConversationView,
  claimConversation,
  closeConversation,
  listConversations,
  loadConversation,
  pinConversation,
  rateConversation,
  transferConversation,
} from '../resolvers/conversations.js';
import type { AgentBrief, AttachmentView, MessageView } from '../resolvers/event-catalog.js';
import {
  listMessages,
  MAX_PAGE,
  MAX_TEXT,
  type MessagePage,
  markRead,
  type ReadResult,
  type SendResult,
  sendMessage,
  setTyping,
} from '../resolvers/messages.js';
import { builder, type GraphQLContext } from './builder.js';

/**
 * The chat in GraphQL: the same domain functions as the legacy REST endpoints (README "Chat").
 * Fields that both sides use act for whoever calls: a request with a visitor bearer token is the
 * visitor (its own conversation), otherwise the agent of the Session, who names the visitor.
 */

const chatViewer = (ctx: GraphQLContext) => (ctx.identity === 'visitor' ? ctx.visitor() : ctx.agent());

/** GraphQL gives absent optional arguments as null; the domain's inputs want them absent. */
const defined = <T extends Record<string, unknown>>(args: T) =>
  Object.fromEntries(Object.entries(args).filter(([, v]) => v !== null && v !== undefined)) as {
    [K in keyof T]: Exclude<T[K], null>;
  };

const ConversationStateEnum = builder.enumType('ConversationState', {
  description: 'Where a conversation is in its life.',
  values: {
    queued: { description: 'Waiting for an agent (in its group’s queue).' },
    active: { description: 'An agent is assigned.' },
    closed: { description: 'Closed: history.' },
  } as const,
});

const SenderTypeEnum = builder.enumType('SenderType', {
  description: 'Who wrote a message.',
  values: {
    visitor: { description: 'The visitor.' },
    agent: { description: 'An agent.' },
    system: { description: 'The system: assigned, transferred, closed, rated (see `meta.event`).' },
  } as const,
});

const MessageTypeEnum = builder.enumType('MessageType', {
  description: 'What a message carries.',
  values: {
    text: { description: 'Text only.' },
    image: { description: 'An image attachment.' },
    file: { description: 'A file attachment.' },
    voice: { description: 'A voice attachment.' },
    video: { description: 'A video attachment.' },
    system: { description: 'A system message (never sent by a client).' },
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

const MessageAttachment = builder.objectRef<AttachmentView>('MessageAttachment').implement({
  description: 'The attachment a message carries (README "Attachments").',
  fields: (t) => ({
    attachmentId: t.exposeString('attachmentId', { description: 'Attachment id.' }),
    kind: t.exposeString('kind', { description: '`image`, `file`, `video` or `voice`.' }),
    mime: t.exposeString('mime', { description: 'MIME type, decided from the bytes.' }),
    size: t.exposeFloat('size', { description: 'Bytes.' }),
    name: t.exposeString('name', { description: 'Original file name (sanitised).' }),
    url: t.exposeString('url', { description: 'Where to download it.' }),
    thumbnailUrl: t.exposeString('thumbnailUrl', { nullable: true, description: 'An image thumbnail, if any.' }),
  }),
});

const Message = builder.objectRef<MessageView>('Message').implement({
  description: 'A stored message; the `message.created` event carries the same fields in snake_case.',
  fields: (t) => ({
    id: t.exposeString('id', { description: 'Server id.' }),
    conversationId: t.exposeString('conversationId', { description: 'Its conversation.' }),
    visitorId: t.exposeString('visitorId', { description: 'The visitor of the conversation.' }),
    seq: t.exposeInt('seq', {
      description: 'Position in its conversation: 1, 2, 3… without holes. Order by it, never by time.',
    }),
    senderType: t.expose('senderType', { type: SenderTypeEnum, description: 'Who wrote it.' }),
    senderId: t.exposeString('senderId', { description: 'The visitor uid or agent id; empty for system messages.' }),
    clientMsgId: t.exposeString('clientMsgId', {
      nullable: true,
      description: 'The sender’s idempotency key; null for system messages.',
    }),
    type: t.expose('type', { type: MessageTypeEnum, description: 'What it carries.' }),
    content: t.exposeString('content', { description: 'The text (a caption for attachments).' }),
    attachment: t.field({
      type: MessageAttachment,
      nullable: true,
      resolve: (m) => m.attachment,
      description: 'The attachment, for image, file, voice and video messages.',
    }),
    meta: t.expose('meta', {
      type: 'JSON',
      nullable: true,
      description: 'Detail of a system message: `{event: assigned|transferred|closed|rated, …}`.',
    }),
    createdAt: t.exposeFloat('createdAt', { description: 'Unix milliseconds.' }),
    recalled: t.exposeBoolean('recalled', { description: 'Whether it was recalled (its content is then empty).' }),
  }),
});

const MessagePageRef = builder.objectRef<MessagePage>('MessagePage').implement({
  description: 'A page of messages, oldest first within the page.',
  fields: (t) => ({
    messages: t.field({ type: [Message], resolve: (p) => p.messages, description: 'The messages, oldest first.' }),
    hasMore: t.exposeBoolean('hasMore', {
      description: 'Whether more exist in the direction asked (older ones for `before` or the first page).',
    }),
    startCursor: t.exposeString('startCursor', {
      nullable: true,
      description: 'Pass as `before` for the previous (older) page.',
    }),
    endCursor: t.exposeString('endCursor', { nullable: true, description: 'Pass as `after` for what follows.' }),
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
  }),
});

const SendResultRef = builder.objectRef<SendResult>('SendMessageResult').implement({
  description: 'The stored message (a retry with the same clientMsgId gets the same one).',
  fields: (t) => ({
    message: t.field({ type: Message, resolve: (r) => r.message, description: 'The stored message.' }),
    conversationState: t.expose('conversationState', {
      type: ConversationStateEnum,
      description:
        'The conversation’s state: `queued` tells the visitor nobody has it yet (the message waits for them).',
    }),
    duplicate: t.exposeBoolean('duplicate', {
      description: 'True when this clientMsgId was already stored: nothing new was published.',
    }),
  }),
});

const ReadResultRef = builder.objectRef<ReadResult>('ReadResult').implement({
  description: 'The caller’s read position after `markRead`.',
  fields: (t) => ({
    conversationId: t.exposeString('conversationId', { description: 'Conversation id.' }),
    readSeq: t.exposeInt('readSeq', { description: 'Read up to this seq (never moves back).' }),
    unreadCount: t.exposeInt('unreadCount', { description: 'Messages of the other side still unread.' }),
  }),
});

const TypingResult = builder.objectRef<{ published: boolean }>('TypingResult').implement({
  description: 'Whether the typing event went out.',
  fields: (t) => ({
    published: t.exposeBoolean('published', {
      description: 'False when throttled (one `typing: true` per 2 s per sender) or nobody is on the other side yet.',
    }),
  }),
});

// ---- queries ---------------------------------------------------------------------------------

builder.queryField('conversation', (t) =>
  t.field({
    type: Conversation,
    nullable: true,
    description:
      'A visitor’s conversation: its open one, else its latest; null before the first. Agents name the visitor; a visitor gets its own.',
    args: {
      visitorId: t.arg.string({ description: 'The visitor uid (agents only).' }),
    },
    resolve: async (_root, args, ctx) => loadConversation(ctx.deps, await chatViewer(ctx), defined(args)),
  }),
);

builder.queryField('conversations', (t) =>
  t.field({
    type: ConversationConnection,
    description: 'Conversations of the agent’s merchant, one page (agents only; refused to ticket agents).',
    args: {
      scope: t.arg({ type: ScopeEnum, description: 'Which conversations; `mine` by default.' }),
      after: t.arg.string({ description: 'The `endCursor` of the previous page.' }),
      first: t.arg.int({ description: 'Page size, 1–100 (20 by default).' }),
      labelId: t.arg.string({ description: 'Only the conversations carrying this label of the merchant.' }),
    },
    resolve: async (_root, args, ctx) => listConversations(ctx.deps, await ctx.agent(), defined(args)),
  }),
);

builder.queryField('messages', (t) =>
  t.field({
    type: MessagePageRef,
    description: `Messages of a visitor across its conversations, newest page first: without before/after the newest \`first\`; \`before\` the older page; \`after\` what follows (fill a seq hole). Agents name the visitor (under \`history_only_mine\` only conversations they were assigned); a visitor reads its own. At most ${MAX_PAGE} per page.`,
    args: {
      visitorId: t.arg.string({ description: 'The visitor uid (agents only).' }),
      before: t.arg.string({ description: 'A page cursor, or a seq of the latest conversation.' }),
      after: t.arg.string({ description: 'A page cursor, or a seq of the latest conversation.' }),
      first: t.arg.int({ description: `Page size, 1–${MAX_PAGE} (20 by default).` }),
    },
    resolve: async (_root, { first, ...args }, ctx) =>
      listMessages(ctx.deps, await chatViewer(ctx), defined({ ...args, limit: first })),
  }),
);

// ---- mutations -------------------------------------------------------------------------------

builder.mutationField('assignAgent', (t) =>
  t.field({
    type: AssignResultRef,
    description:
      'The spec’s step 2 (visitors): the open conversation, or a new one routed to the least busy online agent of the group under capacity, else queued. Idempotent.',
    args: {
      groupId: t.arg.string({ description: 'An agent group of the merchant (the default group otherwise).' }),
      agentId: t.arg.string({ description: 'A specific agent of the merchant, preferred when available.' }),
    },
    resolve: async (_root, args, ctx) => assignAgent(ctx.deps, await ctx.visitor(), defined(args)),
  }),
);

builder.mutationField('sendMessage', (t) =>
  t.field({
    type: SendResultRef,
    description:
      'Sends a message, exactly once per clientMsgId. A visitor writes into its open conversation (a new one after a close); an agent into the active conversation assigned to it.',
    args: {
      visitorId: t.arg.string({ description: 'The visitor uid (agents only).' }),
      clientMsgId: t.arg.string({ required: true, description: 'The client’s idempotency key (1–64 characters).' }),
      type: t.arg({ type: MessageTypeEnum, description: '`text` by default; `system` is refused.' }),
      content: t.arg.string({ description: `Text, at most ${MAX_TEXT} characters (required for text).` }),
      attachmentId: t.arg.string({ description: 'An upload of the sender, for image, file, voice and video.' }),
    },
    resolve: async (_root, args, ctx) => sendMessage(ctx.deps, await chatViewer(ctx), defined(args)),
  }),
);

builder.mutationField('markRead', (t) =>
  t.field({
    type: ReadResultRef,
    description: 'Marks the conversation read up to `seq`; the other side gets a `message.read` receipt.',
    args: {
      visitorId: t.arg.string({ description: 'The visitor uid (agents only).' }),
      seq: t.arg.int({ required: true, description: 'The last seq read.' }),
    },
    resolve: async (_root, args, ctx) => markRead(ctx.deps, await chatViewer(ctx), defined(args)),
  }),
);

builder.mutationField('setTyping', (t) =>
  t.field({
    type: TypingResult,
    description: 'Tells the other side the caller is typing (or stopped): a `typing` event, throttled, never stored.',
    args: {
      visitorId: t.arg.string({ description: 'The visitor uid (agents only).' }),
      typing: t.arg.boolean({ description: 'True (default) while typing, false when stopped.' }),
    },
    resolve: async (_root, args, ctx) => setTyping(ctx.deps, await chatViewer(ctx), defined(args)),
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
