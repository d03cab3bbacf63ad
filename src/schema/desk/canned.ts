import {
  type CannedResponseView,
  createCannedResponse,
  deleteCannedResponse,
  listCannedResponses,
  MAX_CANNED_CONTENT,
  MAX_MERCHANT_CANNED,
  MAX_PERSONAL_CANNED,
  MAX_SHORTCUT,
  updateCannedResponse,
} from '../../resolvers/desk/canned.js';
import { builder } from '../builder.js';

/** Canned responses in GraphQL: the domain of src/resolvers/desk/canned.ts (docs/desk.md). */

/** GraphQL gives absent optional arguments as null; the domain's inputs want them absent. */
const defined = <T extends Record<string, unknown>>(args: T) =>
  Object.fromEntries(Object.entries(args).filter(([, v]) => v !== null && v !== undefined)) as {
    [K in keyof T]: Exclude<T[K], null>;
  };

const CannedScopeEnum = builder.enumType('CannedScope', {
  description: 'Whose a canned response is.',
  values: {
    merchant: { description: 'The merchant’s: every agent may insert it; administrators manage it (audited).' },
    personal: { description: 'An agent’s own: only that agent sees and manages it.' },
  } as const,
});

export const CannedResponse = builder.objectRef<CannedResponseView>('CannedResponse').implement({
  description: 'A canned response an agent inserts by its shortcut (`/shortcut` in the workbench).',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Canned response id.' }),
    scope: t.expose('scope', { type: CannedScopeEnum, description: '`merchant` or `personal`.' }),
    agentId: t.exposeString('agentId', {
      nullable: true,
      description: 'The owner of a personal response; null for the merchant’s.',
    }),
    shortcut: t.exposeString('shortcut', { description: 'Unique (case-insensitively) within its owner.' }),
    content: t.exposeString('content', { description: 'The text inserted.' }),
    createdAt: t.exposeFloat('createdAt', { description: 'Unix milliseconds.' }),
    updatedAt: t.exposeFloat('updatedAt', { description: 'Unix milliseconds.' }),
  }),
});

const CreateInput = builder.inputType('CreateCannedResponseInput', {
  description: 'A new canned response.',
  fields: (t) => ({
    shortcut: t.string({
      required: true,
      description: `1–${MAX_SHORTCUT} letters, digits, _ or -; unique within its owner.`,
    }),
    content: t.string({ required: true, description: `At most ${MAX_CANNED_CONTENT} characters.` }),
    scope: t.field({
      type: CannedScopeEnum,
      description: `\`personal\` by default; \`merchant\` for administrators. At most ${MAX_MERCHANT_CANNED} per merchant and ${MAX_PERSONAL_CANNED} per agent (LIMIT_REACHED).`,
    }),
  }),
});

const UpdateInput = builder.inputType('UpdateCannedResponseInput', {
  description: 'A change to a canned response: its shortcut and/or content.',
  fields: (t) => ({
    id: t.id({ required: true, description: 'The response.' }),
    shortcut: t.string({ description: 'A new shortcut.' }),
    content: t.string({ description: 'A new content.' }),
  }),
});

builder.queryField('cannedResponses', (t) =>
  t.field({
    type: [CannedResponse],
    description:
      'The canned responses the agent may insert (the merchant’s and its own), by shortcut. `search` matches the start of a shortcut (a leading `/` is ignored) or any part of the content.',
    args: {
      search: t.arg.string({ description: 'Shortcut prefix or text.' }),
      scope: t.arg({ type: CannedScopeEnum, description: 'Only the merchant’s or only the agent’s own.' }),
    },
    resolve: async (_root, args, ctx) => listCannedResponses(ctx.deps, await ctx.agent(), defined(args)),
  }),
);

builder.mutationField('createCannedResponse', (t) =>
  t.field({
    type: CannedResponse,
    description: 'Creates a canned response: the agent’s own, or the merchant’s (administrators; audited).',
    args: { input: t.arg({ type: CreateInput, required: true, description: 'The response.' }) },
    resolve: async (_root, { input }, ctx) => createCannedResponse(ctx.deps, await ctx.agent(), defined(input)),
  }),
);

builder.mutationField('updateCannedResponse', (t) =>
  t.field({
    type: CannedResponse,
    description: 'Changes a canned response (the merchant’s: administrators, audited).',
    args: { input: t.arg({ type: UpdateInput, required: true, description: 'The change.' }) },
    resolve: async (_root, { input }, ctx) =>
      updateCannedResponse(ctx.deps, await ctx.agent(), { ...defined(input), id: String(input.id) }),
  }),
);

builder.mutationField('deleteCannedResponse', (t) =>
  t.field({
    type: CannedResponse,
    description: 'Deletes a canned response and answers what it was (the merchant’s: administrators, audited).',
    args: { id: t.arg.id({ required: true, description: 'The response.' }) },
    resolve: async (_root, { id }, ctx) => deleteCannedResponse(ctx.deps, await ctx.agent(), { id: String(id) }),
  }),
);
