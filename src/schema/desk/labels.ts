import {
  type ConversationLabelsView,
  createLabel,
  deleteLabel,
  type LabelView,
  labelConversation,
  labelsOfConversations,
  listLabels,
  MAX_LABEL_NAME,
  unlabelConversation,
} from '../../resolvers/desk/labels.js';
import { builder, type GraphQLContext } from '../builder.js';
import { Conversation } from '../conversation.js';

/** Labels in GraphQL: the domain of src/resolvers/desk/labels.ts (docs/desk.md). */

export const Label = builder.objectRef<LabelView>('Label').implement({
  description: 'A label of the merchant, put on conversations by its agents.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Label id.' }),
    name: t.exposeString('name', { description: 'Unique (case-insensitively) within the merchant.' }),
    color: t.exposeString('color', { description: '`#rrggbb`.' }),
    createdAt: t.exposeFloat('createdAt', { description: 'Unix milliseconds.' }),
  }),
});

const ConversationLabels = builder.objectRef<ConversationLabelsView>('ConversationLabels').implement({
  description: 'A conversation’s labels after a change.',
  fields: (t) => ({
    conversationId: t.exposeString('conversationId', { description: 'The conversation labelled.' }),
    visitorId: t.exposeString('visitorId', { description: 'Its visitor.' }),
    labels: t.field({ type: [Label], resolve: (c) => c.labels, description: 'Its labels, by name.' }),
  }),
});

const CreateLabelInput = builder.inputType('CreateLabelInput', {
  description: 'A new label.',
  fields: (t) => ({
    name: t.string({ required: true, description: `At most ${MAX_LABEL_NAME} characters, one line.` }),
    color: t.string({ description: '`#rrggbb` (a grey by default).' }),
  }),
});

builder.queryField('labels', (t) =>
  t.field({
    type: [Label],
    description: 'The merchant’s labels, by name (agents).',
    resolve: async (_root, _args, ctx) => listLabels(ctx.deps, await ctx.agent()),
  }),
);

builder.mutationField('createLabel', (t) =>
  t.field({
    type: Label,
    description: 'Creates a label of the merchant (any agent; at most 100 per merchant: LIMIT_REACHED).',
    args: { input: t.arg({ type: CreateLabelInput, required: true, description: 'The label.' }) },
    resolve: async (_root, { input }, ctx) =>
      createLabel(ctx.deps, await ctx.agent(), { name: input.name, ...(input.color ? { color: input.color } : {}) }),
  }),
);

builder.mutationField('deleteLabel', (t) =>
  t.field({
    type: Label,
    description: 'Deletes a label and takes it off every conversation (administrators; audited).',
    args: { id: t.arg.id({ required: true, description: 'The label.' }) },
    resolve: async (_root, { id }, ctx) => deleteLabel(ctx.deps, await ctx.agent(), { id: String(id) }),
  }),
);

const labelArgs = (t: Parameters<Parameters<typeof builder.mutationField>[1]>[0]) => ({
  visitorId: t.arg.id({ required: true, description: 'The visitor uid: its open conversation, else its latest.' }),
  labelId: t.arg.id({ required: true, description: 'A label of the merchant.' }),
});

builder.mutationField('labelConversation', (t) =>
  t.field({
    type: ConversationLabels,
    description: 'Puts a label on a visitor’s conversation (idempotent; at most 20 per conversation).',
    args: labelArgs(t),
    resolve: async (_root, args, ctx) =>
      labelConversation(ctx.deps, await ctx.agent(), {
        visitorId: String(args.visitorId),
        labelId: String(args.labelId),
      }),
  }),
);

builder.mutationField('unlabelConversation', (t) =>
  t.field({
    type: ConversationLabels,
    description: 'Takes a label off a visitor’s conversation (idempotent).',
    args: labelArgs(t),
    resolve: async (_root, args, ctx) =>
      unlabelConversation(ctx.deps, await ctx.agent(), {
        visitorId: String(args.visitorId),
        labelId: String(args.labelId),
      }),
  }),
);

/**
 * One query for the labels of every conversation an operation resolves (a page of `conversations`
 * asks for up to 100): the ids asked for before the next turn of the event loop are loaded
 * together, per operation (its context).
 */
interface LabelBatch {
  merchantId: string;
  waiting: Map<string, { resolve(labels: LabelView[]): void; reject(error: unknown): void }[]>;
}
const labelBatches = new WeakMap<GraphQLContext, LabelBatch>();

function labelsOf(ctx: GraphQLContext, merchantId: string, conversationId: string): Promise<LabelView[]> {
  let batch = labelBatches.get(ctx);
  if (!batch || batch.merchantId !== merchantId) {
    const fresh: LabelBatch = { merchantId, waiting: new Map() };
    batch = fresh;
    labelBatches.set(ctx, fresh);
    // After every resolver of this turn has asked (each awaits the viewer first).
    setImmediate(() => {
      if (labelBatches.get(ctx) === fresh) labelBatches.delete(ctx);
      labelsOfConversations(ctx.deps, merchantId, [...fresh.waiting.keys()]).then(
        (found) => {
          for (const [id, waiters] of fresh.waiting) for (const w of waiters) w.resolve(found.get(id) ?? []);
        },
        (error) => {
          for (const waiters of fresh.waiting.values()) for (const w of waiters) w.reject(error);
        },
      );
    });
  }
  const waiting = batch.waiting;
  return new Promise((resolve, reject) => {
    const waiters = waiting.get(conversationId) ?? [];
    waiters.push({ resolve, reject });
    waiting.set(conversationId, waiters);
  });
}

builder.objectField(Conversation, 'labels', (t) =>
  t.field({
    type: [Label],
    description: 'The labels agents put on it, by name (agents; empty for a visitor).',
    resolve: async (c, _args, ctx) => {
      // A visitor never sees the desk's labels.
      if (ctx.identity === 'visitor') return [];
      const viewer = await ctx.agent();
      return labelsOf(ctx, viewer.merchantId, c.conversationId);
    },
  }),
);
