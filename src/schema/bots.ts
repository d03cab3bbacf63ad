import { type BotView, createBot, listBots, setBotDisabled } from '../resolvers/integration/bots/bots.js';
import { botHandoff, type HandoffResult, requestHuman } from '../resolvers/integration/bots/handoff.js';
import { requireBot } from '../resolvers/integration/bots/viewer.js';
import { sendMessage } from '../resolvers/messages/send.js';
import { builder } from './builder.js';
import { ConversationStateEnum } from './conversation.js';
import { SendResultRef } from './message.js';

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

const BotWithKey = builder.objectRef<{ bot: BotView; key: string }>('BotWithKey').implement({
  description: 'A new bot and its API key, answered only at creation.',
  fields: (t) => ({
    bot: t.field({ type: BotRef, resolve: (r) => r.bot, description: 'The bot.' }),
    key: t.exposeString('key', {
      description:
        'The bot’s API key (`prly_…`, scopes conversations:read and messages:write), shown once: `Authorization: Bearer` on /bot/* and botSendMessage/botHandoff.',
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

builder.mutationField('createBot', (t) =>
  t.field({
    type: BotWithKey,
    description:
      'Creates a bot and its API key in one transaction (admins only); the key is answered here only. An enabled bot answers its group’s (without `groupId`, all the merchant’s) new conversations first.',
    args: {
      name: t.arg.string({ required: true, description: 'Shown to visitors and agents (1–64 characters).' }),
      groupId: t.arg.id({
        description: 'The group whose conversations it answers first; all the merchant’s when absent.',
      }),
    },
    resolve: async (_root, args, ctx) =>
      createBot(ctx.deps, await ctx.agent(), {
        name: args.name,
        groupId: args.groupId == null ? undefined : String(args.groupId),
      }),
  }),
);

builder.mutationField('botSendMessage', (t) =>
  t.field({
    type: SendResultRef,
    description:
      'The bot (its API key, scope messages:write) sends a text message into the conversation it holds, exactly once per `clientMsgId`; HANDED_OFF once the conversation was handed off.',
    args: {
      visitorId: t.arg.id({ required: true, description: 'The visitor of the conversation.' }),
      clientMsgId: t.arg.string({
        required: true,
        description: 'The bot’s idempotency key (a retry answers the stored message).',
      }),
      type: t.arg.string({ description: '`text` (the default; bots send text only).' }),
      content: t.arg.string({ required: true, description: 'The text.' }),
    },
    resolve: async (_root, args, ctx) =>
      sendMessage(ctx.deps, await requireBot(ctx.deps, await ctx.apiKey()), {
        visitorId: String(args.visitorId),
        clientMsgId: args.clientMsgId,
        type: args.type ?? undefined,
        content: args.content,
      }),
  }),
);

builder.mutationField('botHandoff', (t) =>
  t.field({
    type: HandoffResultRef,
    description:
      'The bot (its API key, scope messages:write) hands the visitor’s conversation off to the agents: one transition however many calls race (`handedOff` false after it).',
    args: { visitorId: t.arg.id({ required: true, description: 'The visitor of the conversation.' }) },
    resolve: async (_root, args, ctx) =>
      botHandoff(ctx.deps, await requireBot(ctx.deps, await ctx.apiKey()), { visitorId: String(args.visitorId) }),
  }),
);
