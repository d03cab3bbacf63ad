import { z } from 'zod';
import { required, text } from '../resolvers/inputs.js';
import { type BotView, createBot, listBots, setBotDisabled } from '../resolvers/integration/bots/bots.js';
import { botHandoff, type HandoffResult, handoffInput, requestHuman } from '../resolvers/integration/bots/handoff.js';
import { requireBot } from '../resolvers/integration/bots/viewer.js';
import { sendInput, sendMessage } from '../resolvers/messages/send.js';
import { exampleMessage, legacySend, sendData } from './chat-data.js';
import { legacyInput } from './legacy-input.js';
import { type AnyRoute, jsonRoute } from './route.js';

/**
 * Bots (docs/integration.md "Bots"): `/agent/bot/*` for the merchant's admins, `/bot/*` for a
 * bot with its API key, `/visitor/chat/human` for the visitor; the same domain functions as the
 * GraphQL fields.
 */

const id = required(64);

export const botData = z
  .object({
    id: z.string().openapi({ description: 'Bot id (the `sender_id` of its messages).' }),
    name: z.string(),
    group_id: z
      .string()
      .nullable()
      .openapi({ description: 'The group whose new conversations it answers first; null: all the merchant’s.' }),
    api_key_id: z.string(),
    disabled: z.boolean(),
    created_at: z.number().openapi({ description: 'Unix ms.' }),
  })
  .strict();
export const legacyBot = (b: BotView): z.input<typeof botData> => ({
  id: b.id,
  name: b.name,
  group_id: b.groupId,
  api_key_id: b.apiKeyId,
  disabled: b.disabled,
  created_at: b.createdAt,
});

export const handoffData = z
  .object({
    conversation_id: z.string(),
    handed_off: z.boolean().openapi({ description: 'True for the one call that moved it from the bot to the agents.' }),
    state: z.enum(['queued', 'active', 'closed']),
  })
  .strict();
export const legacyHandoff = (r: HandoffResult): z.input<typeof handoffData> => ({
  conversation_id: r.conversationId,
  handed_off: r.handedOff,
  state: r.state,
});

export const exampleBot: z.input<typeof botData> = {
  id: 'bot_5c2e9a0f1b3d4e6a7c8b',
  name: 'Robo',
  group_id: null,
  api_key_id: 'key_0a1b2c3d4e5f6a7b8c9d',
  disabled: false,
  created_at: 1764150000000,
};
export const exampleHandoff: z.input<typeof handoffData> = {
  conversation_id: 'c_8e1f0a9b2c',
  handed_off: true,
  state: 'queued',
};

const withKeyData = z
  .object({
    bot: botData,
    key: z.string().openapi({
      description: 'The bot’s API key (`prly_…`, scopes conversations:read and messages:write), shown once.',
    }),
  })
  .strict();

const botSendInput = legacyInput(
  sendInput,
  { visitor_id: 'visitorId', client_msg_id: 'clientMsgId', type: 'type', content: 'content' },
  { required: ['visitor_id'] },
);
const botHandoffInput = legacyInput(handoffInput, { visitor_id: 'visitorId' });

const tag = 'Bots (admin)';
const adminOnly = { 403: 'Not an admin of the merchant (1403).' };
const botTag = 'Bots (API key)';
const botErrors = { 403: 'The key belongs to no bot, or the bot is disabled (1403).' };

export const botAdminEndpoints: AnyRoute[] = [
  jsonRoute({
    method: 'post',
    path: '/agent/bot/create',
    identity: 'agent',
    tag,
    summary: 'Create a bot and its API key',
    description:
      'The bot answers its group’s (or, without `group_id`, all the merchant’s) new conversations first. Its key (scopes conversations:read and messages:write) is answered here only.',
    errors: adminOnly,
    input: z
      .object({ name: text(64), group_id: id.optional() })
      .transform((i) => ({ name: i.name, groupId: i.group_id })),
    requestExample: { name: 'Robo' },
    output: withKeyData,
    example: { bot: exampleBot, key: 'prly_hY3q0y1V2m5d9bX8cR7tL6kP4sN2wQ1eZ0aF3gJ5uT8' },
    async handle({ deps, viewer, input }) {
      const r = await createBot(deps, viewer, input);
      return { bot: legacyBot(r.bot), key: r.key };
    },
  }),
  jsonRoute({
    method: 'get',
    path: '/agent/bot/list',
    identity: 'agent',
    tag,
    summary: 'The merchant’s bots',
    errors: adminOnly,
    output: z.array(botData),
    example: [exampleBot],
    async handle({ deps, viewer }) {
      return (await listBots(deps, viewer)).map(legacyBot);
    },
  }),
  ...(['disable', 'enable'] as const).map((action) =>
    jsonRoute({
      method: 'post',
      path: `/agent/bot/${action}`,
      identity: 'agent',
      tag,
      summary: action === 'disable' ? 'Disable a bot' : 'Enable a bot',
      description:
        action === 'disable'
          ? 'Routing skips it, its requests are refused, and the conversations it holds are handed off to the agents (reason `disabled`).'
          : 'It answers new conversations again.',
      errors: adminOnly,
      input: z.object({ bot_id: id }).transform((i) => ({ botId: i.bot_id })),
      requestExample: { bot_id: exampleBot.id },
      output: botData,
      example: { ...exampleBot, disabled: action === 'disable' },
      async handle({ deps, viewer, input }) {
        return legacyBot(await setBotDisabled(deps, viewer, { ...input, disabled: action === 'disable' }));
      },
    }),
  ),
];

export const botVisitorEndpoints: AnyRoute[] = [
  jsonRoute({
    method: 'post',
    path: '/visitor/chat/human',
    identity: 'visitor',
    tag: 'Chat (visitor)',
    summary: 'Ask for a human',
    description:
      'A bot that holds the visitor’s conversation hands it off to the agents (`conversation.handed_off`, reason `visitor`); without a bot nothing changes (`handed_off` false).',
    output: handoffData,
    example: exampleHandoff,
    async handle({ deps, viewer }) {
      return legacyHandoff(await requestHuman(deps, viewer));
    },
  }),
];

export const botEndpoints: AnyRoute[] = [
  jsonRoute({
    method: 'post',
    path: '/bot/message/send',
    identity: 'apiKey',
    scope: 'messages:write',
    tag: botTag,
    summary: 'Send a message as the bot',
    description:
      'A text message into the conversation the bot holds: exactly once per client_msg_id (a retry answers the stored message, `duplicate` true), the next seq, sender_type `bot`. Refused with 1206 once the conversation was handed off.',
    errors: botErrors,
    input: botSendInput,
    requestExample: {
      visitor_id: 'v_k2m9q8x7',
      client_msg_id: 'bot-1700000000000-1',
      type: 'text',
      content: 'Hi! How can I help?',
    },
    output: sendData,
    example: {
      ...exampleMessage,
      sender_type: 'bot',
      sender_id: exampleBot.id,
      client_msg_id: 'bot-1700000000000-1',
      content: 'Hi! How can I help?',
      meta: { bot_name: 'Robo' },
      conversation_state: 'active',
      duplicate: false,
    },
    async handle({ deps, viewer, input }) {
      return legacySend(await sendMessage(deps, await requireBot(deps, viewer), input));
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/bot/chat/handoff',
    identity: 'apiKey',
    scope: 'messages:write',
    tag: botTag,
    summary: 'Hand the conversation off to the agents',
    description:
      'One transition however many calls race (`handed_off` true for that one, false after: idempotent); the conversation joins its group’s queue and agents get `conversation.handed_off`. 1206 for a conversation the bot never held.',
    errors: botErrors,
    input: botHandoffInput,
    requestExample: { visitor_id: 'v_k2m9q8x7' },
    output: handoffData,
    example: exampleHandoff,
    async handle({ deps, viewer, input }) {
      return legacyHandoff(await botHandoff(deps, await requireBot(deps, viewer), input));
    },
  }),
];
