import { addNote, listNotes, MAX_NOTE } from '../../resolvers/desk/notes.js';
import type { NoteView } from '../../resolvers/event-catalog.js';
import { builder } from '../builder.js';

/** Internal notes in GraphQL: the domain of src/resolvers/desk/notes.ts (docs/desk.md). */

export const Note = builder.objectRef<NoteView>('Note').implement({
  description:
    'An internal note on a conversation: for the merchant’s agents only, never shown to the visitor. It takes no seq: show it after the message whose seq is `afterSeq`.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Note id.' }),
    conversationId: t.exposeString('conversationId', { description: 'Its conversation.' }),
    visitorId: t.exposeString('visitorId', { description: 'The visitor of the conversation.' }),
    agentId: t.exposeString('agentId', { nullable: true, description: 'The author; null once deleted.' }),
    agentNickname: t.exposeString('agentNickname', { description: 'The author’s nickname (empty once deleted).' }),
    afterSeq: t.exposeInt('afterSeq', {
      description: 'The conversation’s last seq when it was written (0: before any message).',
    }),
    content: t.exposeString('content', { description: 'The text.' }),
    createdAt: t.exposeFloat('createdAt', { description: 'Unix milliseconds.' }),
  }),
});

builder.queryField('notes', (t) =>
  t.field({
    type: [Note],
    description:
      'The internal notes of a visitor’s conversations, in history order (conversation, `afterSeq`, time). Agents only.',
    args: { visitorId: t.arg.id({ required: true, description: 'The visitor uid.' }) },
    resolve: async (_root, { visitorId }, ctx) =>
      listNotes(ctx.deps, await ctx.agent(), { visitorId: String(visitorId) }),
  }),
);

builder.mutationField('addNote', (t) =>
  t.field({
    type: Note,
    description: `Writes an internal note on the visitor’s open conversation (else its latest): \`note.created\` goes to agent channels only, never to the visitor. At most ${MAX_NOTE} characters.`,
    args: {
      visitorId: t.arg.id({ required: true, description: 'The visitor uid.' }),
      content: t.arg.string({ required: true, description: 'The note.' }),
    },
    resolve: async (_root, { visitorId, content }, ctx) =>
      addNote(ctx.deps, await ctx.agent(), { visitorId: String(visitorId), content }),
  }),
);
