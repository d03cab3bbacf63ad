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
import { managerViewer } from '../args.js';
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
 * asks for up to 100): graphql-js calls the `labels` resolvers of a list's items in one go, so
 * the ids asked for before the next turn of the event loop are loaded together, per operation.
 * The ids are collected before anything is awaited: a resolver that awaited the viewer first
 * would ask after the batch was sent.
 */
type LabelWaiter = { resolve(labels: LabelView[]): void; reject(error: unknown): void };
const labelBatches = new WeakMap<GraphQLContext, Map<string, LabelWaiter[]>>();

function labelsOf(ctx: GraphQLContext, conversationId: string): Promise<LabelView[]> {
  let waiting = labelBatches.get(ctx);
  if (!waiting) {
    const batch = new Map<string, LabelWaiter[]>();
    waiting = batch;
    labelBatches.set(ctx, batch);
    setImmediate(async () => {
      labelBatches.delete(ctx);
      try {
        const viewer = await managerViewer(ctx);
        const found = await labelsOfConversations(ctx.deps, viewer.merchantId, [...batch.keys()]);
        for (const [id, waiters] of batch) for (const w of waiters) w.resolve(found.get(id) ?? []);
      } catch (error) {
        for (const waiters of batch.values()) for (const w of waiters) w.reject(error);
      }
    });
  }
  const batch = waiting;
  return new Promise((resolve, reject) => {
    batch.set(conversationId, [...(batch.get(conversationId) ?? []), { resolve, reject }]);
  });
}

builder.objectField(Conversation, 'labels', (t) =>
  t.field({
    type: [Label],
    description: 'The labels agents put on it, by name (agents; empty for a visitor).',
    // A visitor never sees the desk's labels.
    resolve: (c, _args, ctx) => (ctx.identity === 'visitor' ? [] : labelsOf(ctx, c.conversationId)),
  }),
);
