import { z } from 'zod';
import { declare } from './declaration.js';

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

/** A conversation's messages, their read receipts and typing. */
export const messageEvents = {
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
} as const;
