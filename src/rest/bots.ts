import { z } from 'zod';
import { required } from '../resolvers/inputs.js';
import { type BotView, listBots, setBotDisabled } from '../resolvers/integration/bots/bots.js';
import { type HandoffResult, requestHuman } from '../resolvers/integration/bots/handoff.js';
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

const tag = 'Bots (admin)';
const adminOnly = { 403: 'Not an admin of the merchant (1403).' };

export const botAdminEndpoints: AnyRoute[] = [
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
