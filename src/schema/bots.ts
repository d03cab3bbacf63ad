import { type BotView, listBots, setBotDisabled } from '../resolvers/integration/bots/bots.js';
import { type HandoffResult, requestHuman } from '../resolvers/integration/bots/handoff.js';
import { builder } from './builder.js';
import { ConversationStateEnum } from './conversation.js';

/**
 * Bots in GraphQL (docs/integration.md "Bots"): the admins' management, the visitor's request
 * for a human, and the bot's own sends and hand-offs; the same domain functions as
 * /agent/bot/*, /visitor/chat/human and /bot/*.
 */

export const BotRef = builder.objectRef<BotView>('Bot').implement({
  description: 'A bot of the merchant: a participant acting through its API key.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Bot id (the `sender_id` of its messages).' }),
    name: t.exposeString('name', { description: 'Shown to visitors and agents.' }),
    groupId: t.exposeID('groupId', {
      nullable: true,
      description: 'The group whose new conversations it answers first; null: all the merchant’s.',
    }),
    apiKeyId: t.exposeID('apiKeyId', { description: 'Its API key (revoke it to silence the bot).' }),
    disabled: t.exposeBoolean('disabled', {
      description: 'Disabled: routing skips it, its requests are refused, its conversations were handed off.',
    }),
    createdAt: t.exposeFloat('createdAt', { description: 'Unix ms.' }),
  }),
});

export const HandoffResultRef = builder.objectRef<HandoffResult>('HandoffResult').implement({
  description: 'The outcome of a hand-off to the agents.',
  fields: (t) => ({
    conversationId: t.exposeID('conversationId', { description: 'The conversation.' }),
    handedOff: t.exposeBoolean('handedOff', {
      description: 'True for the one call that moved it from the bot to the agents; false when it already was.',
    }),
    state: t.expose('state', {
      type: ConversationStateEnum,
      description: '`queued` until routing gives it to an agent, then `active`.',
    }),
  }),
});

builder.queryField('bots', (t) =>
  t.field({
    type: [BotRef],
    description: 'The merchant’s bots, oldest first (admins only).',
    resolve: async (_root, _args, ctx) => listBots(ctx.deps, await ctx.agent()),
  }),
);

builder.mutationField('setBotDisabled', (t) =>
  t.field({
    type: BotRef,
    description:
      'Disables a bot (routing skips it, its requests are refused, the conversations it holds are handed off, reason `disabled`) or enables it (admins only).',
    args: {
      botId: t.arg.id({ required: true, description: 'The bot.' }),
      disabled: t.arg.boolean({ required: true, description: 'true disables, false enables.' }),
    },
    resolve: async (_root, args, ctx) =>
      setBotDisabled(ctx.deps, await ctx.agent(), { botId: String(args.botId), disabled: args.disabled }),
  }),
);

builder.mutationField('requestHuman', (t) =>
  t.field({
    type: HandoffResultRef,
    description:
      'The visitor asks for a human: a bot that holds its conversation hands it off to the agents (`conversation.handed_off`, reason `visitor`); without a bot nothing changes (`handedOff` false).',
    resolve: async (_root, _args, ctx) => requestHuman(ctx.deps, await ctx.visitor()),
  }),
);
