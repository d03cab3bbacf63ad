import { z } from 'zod';
import {
  type CannedResponseView,
  cannedCreateInput,
  cannedDeleteInput,
  cannedListInput,
  cannedUpdateInput,
  createCannedResponse,
  deleteCannedResponse,
  listCannedResponses,
  MAX_CANNED_CONTENT,
  MAX_SHORTCUT,
  updateCannedResponse,
} from '../resolvers/desk/canned.js';
import {
  type ConversationLabelsView,
  conversationLabels,
  createLabel,
  createLabelInput,
  deleteLabel,
  deleteLabelInput,
  type LabelView,
  labelConversation,
  listLabels,
  unlabelConversation,
} from '../resolvers/desk/labels.js';
import { addNote, listNotes, MAX_NOTE } from '../resolvers/desk/notes.js';
import { noteWire, toNoteWire } from '../resolvers/event-catalog.js';
import { type AnyRoute, jsonRoute } from './route.js';

/**
 * The desk's everyday tools over legacy REST (docs/desk.md): canned responses, labels and
 * internal notes. Only the legacy key map lives here; the rules and budgets are the domain's.
 */

// ---- legacy shapes -----------------------------------------------------------------------------

const cannedData = z
  .object({
    id: z.string(),
    scope: z.enum(['merchant', 'personal']),
    agent_id: z.string().nullable().openapi({ description: 'The owner of a personal response; null: the merchant’s.' }),
    shortcut: z.string().openapi({ description: 'Typed as `/shortcut` in the workbench.' }),
    content: z.string(),
    created_at: z.number().int().openapi({ description: 'Unix milliseconds.' }),
    updated_at: z.number().int().openapi({ description: 'Unix milliseconds.' }),
  })
  .strict();
const legacyCanned = (c: CannedResponseView): z.input<typeof cannedData> => ({
  id: c.id,
  scope: c.scope,
  agent_id: c.agentId,
  shortcut: c.shortcut,
  content: c.content,
  created_at: c.createdAt,
  updated_at: c.updatedAt,
});
const exampleCanned = {
  id: 'canned_4b1d9e2a70',
  scope: 'merchant' as const,
  agent_id: null,
  shortcut: 'hello',
  content: 'Hello! How can I help you today?',
  created_at: 1700000000000,
  updated_at: 1700000000000,
};

const labelData = z
  .object({
    id: z.string(),
    name: z.string(),
    color: z.string().openapi({ description: '`#rrggbb`.' }),
    created_at: z.number().int().openapi({ description: 'Unix milliseconds.' }),
  })
  .strict();
const legacyLabel = (l: LabelView): z.input<typeof labelData> => ({
  id: l.id,
  name: l.name,
  color: l.color,
  created_at: l.createdAt,
});
const exampleLabel = { id: 'label_9c2e1f0a3b', name: 'VIP', color: '#2563eb', created_at: 1700000000000 };

const conversationLabelsData = z
  .object({ conversation_id: z.string(), visitor_id: z.string(), labels: z.array(labelData) })
  .strict();
const legacyConversationLabels = (c: ConversationLabelsView): z.input<typeof conversationLabelsData> => ({
  conversation_id: c.conversationId,
  visitor_id: c.visitorId,
  labels: c.labels.map(legacyLabel),
});

const exampleNote = {
  id: 'note_7a3c9d1e2f',
  conversation_id: 'c_8e1f0a9b2c',
  visitor_id: 'v_demo_lily',
  agent_id: 'a_alice',
  agent_nickname: 'Alice',
  after_seq: 2,
  content: 'Regular customer: offer free shipping.',
  created_at: 1700000000000,
};

// ---- inputs: the legacy key map ----------------------------------------------------------------

// Canned responses and label creation use the domain's own names: its contracts serve as they are.
const str = z.string();
const labelConversationFields = z
  .object({ visitor_id: str, label_id: str })
  .transform((i) => ({ visitorId: i.visitor_id, labelId: i.label_id }));
const noteAddFields = z
  .object({ visitor_id: str, content: str })
  .transform((i) => ({ visitorId: i.visitor_id, content: i.content }));
const visitorFields = z.object({ visitor_id: str }).transform((i) => ({ visitorId: i.visitor_id }));

// ---- declarations ------------------------------------------------------------------------------

const CANNED = 'Desk: canned responses';
const LABELS = 'Desk: labels';
const NOTES = 'Desk: internal notes';

export const deskEndpoints: AnyRoute[] = [
  jsonRoute({
    method: 'get',
    path: '/agent/canned/list',
    identity: 'agent',
    tag: CANNED,
    summary: 'Canned responses the agent may insert',
    description:
      'The merchant’s and the agent’s own, by shortcut. search: the start of a shortcut (a leading / is ignored) or any part of the content; scope: merchant or personal.',
    input: cannedListInput,
    requestExample: { search: 'hel' },
    output: z.object({ list: z.array(cannedData) }).strict(),
    example: { list: [exampleCanned] },
    async handle({ deps, viewer, input }) {
      return { list: (await listCannedResponses(deps, viewer, input)).map(legacyCanned) };
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/canned/create',
    identity: 'agent',
    tag: CANNED,
    summary: 'Create a canned response',
    description: `scope personal (default: the agent’s own) or merchant (administrators, audited). shortcut: 1–${MAX_SHORTCUT} letters, digits, _ or -, unique within its owner; content at most ${MAX_CANNED_CONTENT} characters. Budgets: 500 per merchant, 200 per agent (1409 beyond).`,
    input: cannedCreateInput,
    requestExample: { shortcut: 'hello', content: 'Hello! How can I help you today?', scope: 'personal' },
    output: cannedData,
    example: exampleCanned,
    errors: { 409: 'The budget of canned responses is used up (1409).' },
    async handle({ deps, viewer, input }) {
      return legacyCanned(await createCannedResponse(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/canned/update',
    identity: 'agent',
    tag: CANNED,
    summary: 'Change a canned response',
    description: 'Its shortcut and/or content; the merchant’s responses are for administrators (audited).',
    input: cannedUpdateInput,
    requestExample: { id: 'canned_4b1d9e2a70', content: 'Hi! What can I do for you?' },
    output: cannedData,
    example: exampleCanned,
    async handle({ deps, viewer, input }) {
      return legacyCanned(await updateCannedResponse(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/canned/delete',
    identity: 'agent',
    tag: CANNED,
    summary: 'Delete a canned response',
    description: 'Answers what was deleted; the merchant’s responses are for administrators (audited).',
    input: cannedDeleteInput,
    requestExample: { id: 'canned_4b1d9e2a70' },
    output: cannedData,
    example: exampleCanned,
    async handle({ deps, viewer, input }) {
      return legacyCanned(await deleteCannedResponse(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'get',
    path: '/agent/label/list',
    identity: 'agent',
    tag: LABELS,
    summary: 'The merchant’s labels',
    output: z.object({ list: z.array(labelData) }).strict(),
    example: { list: [exampleLabel] },
    async handle({ deps, viewer }) {
      return { list: (await listLabels(deps, viewer)).map(legacyLabel) };
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/label/create',
    identity: 'agent',
    tag: LABELS,
    summary: 'Create a label',
    description: 'Any agent; names (at most 32 characters) are unique case-insensitively; at most 100 per merchant.',
    input: createLabelInput,
    requestExample: { name: 'VIP', color: '#2563eb' },
    output: labelData,
    example: exampleLabel,
    errors: { 409: 'The merchant already keeps 100 labels (1409).' },
    async handle({ deps, viewer, input }) {
      return legacyLabel(await createLabel(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/label/delete',
    identity: 'agent',
    tag: LABELS,
    summary: 'Delete a label (administrators)',
    description: 'Takes it off every conversation; audited.',
    input: deleteLabelInput,
    requestExample: { id: 'label_9c2e1f0a3b' },
    output: labelData,
    example: exampleLabel,
    async handle({ deps, viewer, input }) {
      return legacyLabel(await deleteLabel(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'get',
    path: '/agent/label/get',
    identity: 'agent',
    tag: LABELS,
    summary: 'The labels of a visitor’s conversation',
    description: 'Its open conversation, else its latest.',
    input: visitorFields,
    requestExample: { visitor_id: 'v_demo_lily' },
    output: conversationLabelsData,
    example: { conversation_id: 'c_8e1f0a9b2c', visitor_id: 'v_demo_lily', labels: [exampleLabel] },
    async handle({ deps, viewer, input }) {
      return legacyConversationLabels(await conversationLabels(deps, viewer, input));
    },
  }),
  ...(
    [
      ['add', 'Label a conversation', labelConversation],
      ['remove', 'Take a label off a conversation', unlabelConversation],
    ] as const
  ).map(([action, summary, run]) =>
    jsonRoute({
      method: 'post',
      path: `/agent/label/${action}`,
      identity: 'agent',
      tag: LABELS,
      summary,
      description:
        'The visitor’s open conversation, else its latest; idempotent. Answers the conversation’s labels (at most 20).',
      input: labelConversationFields,
      requestExample: { visitor_id: 'v_demo_lily', label_id: 'label_9c2e1f0a3b' },
      output: conversationLabelsData,
      example: { conversation_id: 'c_8e1f0a9b2c', visitor_id: 'v_demo_lily', labels: [exampleLabel] },
      async handle({ deps, viewer, input }) {
        return legacyConversationLabels(await run(deps, viewer, input));
      },
    }),
  ),
  jsonRoute({
    method: 'post',
    path: '/agent/note/add',
    identity: 'agent',
    tag: NOTES,
    summary: 'Write an internal note',
    description: `On the visitor’s open conversation, else its latest. For the merchant’s agents only: never on a visitor channel, in the visitor’s history or to a bot; published as note.created to agent channels. At most ${MAX_NOTE} characters; 200 notes per conversation.`,
    input: noteAddFields,
    requestExample: { visitor_id: 'v_demo_lily', content: 'Regular customer: offer free shipping.' },
    output: noteWire,
    example: exampleNote,
    async handle({ deps, viewer, input }) {
      return toNoteWire(await addNote(deps, viewer, input));
    },
  }),
  jsonRoute({
    method: 'get',
    path: '/agent/note/list',
    identity: 'agent',
    tag: NOTES,
    summary: 'The internal notes of a visitor’s conversations',
    description:
      'In history order (conversation, then after_seq, then time): show each after the message whose seq is its after_seq.',
    input: visitorFields,
    requestExample: { visitor_id: 'v_demo_lily' },
    output: z.object({ list: z.array(noteWire) }).strict(),
    example: { list: [exampleNote] },
    async handle({ deps, viewer, input }) {
      return { list: (await listNotes(deps, viewer, input)).map(toNoteWire) };
    },
  }),
];
