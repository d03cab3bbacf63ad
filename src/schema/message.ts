import type { AttachmentView, MessageView } from '../resolvers/event-catalog.js';
import { listMessages, MAX_PAGE, type MessagePage } from '../resolvers/messages/history.js';
import { markRead, type ReadResult } from '../resolvers/messages/read.js';
import { MAX_TEXT, type SendResult, sendMessage } from '../resolvers/messages/send.js';
import { setTyping } from '../resolvers/messages/typing.js';
import { chatViewer, defined, readerViewer } from './args.js';
import { builder } from './builder.js';
import { ConversationStateEnum } from './conversation.js';

/**
 * Messages in GraphQL: the same domain functions as the legacy REST endpoints (README "Chat");
 * the conversations are in conversation.ts.
 */

const SenderTypeEnum = builder.enumType('SenderType', {
  description: 'Who wrote a message.',
  values: {
    visitor: { description: 'The visitor.' },
    agent: { description: 'An agent.' },
    system: { description: 'The system: assigned, transferred, closed, rated, handoff (see `meta.event`).' },
    bot: { description: 'A bot of the merchant (`senderId` is the bot’s id, `meta.bot_name` its name).' },
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

const MessageAttachment = builder.objectRef<AttachmentView>('MessageAttachment').implement({
  description: 'The attachment a message carries (README "Attachments").',
  fields: (t) => ({
    id: t.exposeID('attachmentId', { description: 'Attachment id (the same as `attachmentId`).' }),
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

export const SendResultRef = builder.objectRef<SendResult>('SendMessageResult').implement({
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

builder.queryField('messages', (t) =>
  t.field({
    type: MessagePageRef,
    description: `Messages of a visitor across its conversations, newest page first: without before/after the newest \`first\`; \`before\` the older page; \`after\` what follows (fill a seq hole). Agents name the visitor (under \`history_only_mine\` only conversations they were assigned), and so do API keys with \`conversations:read\`; a visitor reads its own. At most ${MAX_PAGE} per page.`,
    args: {
      visitorId: t.arg.string({ description: 'The visitor uid (agents only).' }),
      before: t.arg.string({ description: 'A page cursor, or a seq of the latest conversation.' }),
      after: t.arg.string({ description: 'A page cursor, or a seq of the latest conversation.' }),
      first: t.arg.int({ description: `Page size, 1–${MAX_PAGE} (20 by default).` }),
    },
    resolve: async (_root, { first, ...args }, ctx) =>
      listMessages(ctx.deps, await readerViewer(ctx), defined({ ...args, limit: first })),
  }),
);

// ---- mutations -------------------------------------------------------------------------------

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
