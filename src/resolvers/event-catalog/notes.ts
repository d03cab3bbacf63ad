import { z } from 'zod';
import { declare } from './declaration.js';

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

/** Internal notes (docs/desk.md "Internal notes"). */
export const noteEvents = {
  'note.created': declare({
    audiences: ['agent'],
    description:
      'An agent wrote an internal note on a conversation: to the agents of the conversation only (its assigned agent and the author), never to a visitor channel. `after_seq` is the seq it follows; notes take no seq of their own.',
    payload: z.object({ note: noteWire }).strict(),
    toWire: (d: { note: NoteView }) => ({ note: toNoteWire(d.note) }),
  }),
} as const;
