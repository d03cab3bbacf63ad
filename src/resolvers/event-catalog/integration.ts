import { z } from 'zod';
import { type ConversationRef, conversationRef, toConversationRef } from './conversations.js';
import { declare } from './declaration.js';

/** What the merchant's systems are told: webhook events and the bots' hand-off (docs/integration.md). */
export const integrationEvents = {
  'conversation.created': declare({
    audiences: ['webhook'],
    webhook: 1,
    description:
      'A visitor started a conversation (before routing: `conversation.assigned` or a queue follows); `bot_id` set when the merchant’s bot took it at once (state `active`, docs/integration.md "Bots").',
    payload: z.object({ ...conversationRef, group_id: z.string().nullable(), bot_id: z.string().nullable() }).strict(),
    toWire: (d: ConversationRef & { groupId: string | null; botId?: string | null }) => ({
      ...toConversationRef(d),
      group_id: d.groupId,
      bot_id: d.botId ?? null,
    }),
  }),
  'conversation.handed_off': declare({
    audiences: ['global', 'visitor', 'webhook'],
    webhook: 1,
    description:
      'The bot that held a conversation handed it off to the agents (`reason`: `bot` its own call, `visitor` the visitor asked for a human, `timeout` the bot did not answer within BOT_HANDOFF_TIMEOUT_SECONDS, `disabled` the bot was disabled); the conversation waits in its group’s queue. Exactly one per hand-off.',
    payload: z
      .object({
        ...conversationRef,
        bot_id: z.string(),
        group_id: z.string().nullable(),
        reason: z.enum(['bot', 'visitor', 'timeout', 'disabled']),
      })
      .strict(),
    toWire: (
      d: ConversationRef & {
        botId: string;
        groupId: string | null;
        reason: 'bot' | 'visitor' | 'timeout' | 'disabled';
      },
    ) => ({ ...toConversationRef(d), bot_id: d.botId, group_id: d.groupId, reason: d.reason }),
  }),
  'conversation.rated': declare({
    audiences: ['webhook'],
    webhook: 1,
    description: 'The visitor rated a closed conversation (`score` 1–5, `resolved` and `comment` when given).',
    payload: z
      .object({
        ...conversationRef,
        score: z.number().int(),
        resolved: z.boolean().nullable(),
        comment: z.string().nullable(),
      })
      .strict(),
    toWire: (d: ConversationRef & { score: number; resolved: boolean | null; comment: string | null }) => ({
      ...toConversationRef(d),
      score: d.score,
      resolved: d.resolved,
      comment: d.comment,
    }),
  }),
  'visitor.created': declare({
    audiences: ['webhook'],
    webhook: 1,
    description:
      'A visitor was created (its first bootstrap or token); `external_user_id` is the merchant’s own id of an identified visitor.',
    payload: z
      .object({ visitor_id: z.string(), nickname: z.string(), external_user_id: z.string().nullable() })
      .strict(),
    toWire: (d: { visitorId: string; nickname: string; externalUserId: string | null }) => ({
      visitor_id: d.visitorId,
      nickname: d.nickname,
      external_user_id: d.externalUserId,
    }),
  }),
  'webhook.test': declare({
    audiences: ['webhook'],
    webhook: 1,
    description: 'A test ping an admin sent to one endpoint (`testWebhookEndpoint`); nothing happened in the chat.',
    payload: z.object({ endpoint_id: z.string() }).strict(),
    toWire: (d: { endpointId: string }) => ({ endpoint_id: d.endpointId }),
  }),
} as const;
