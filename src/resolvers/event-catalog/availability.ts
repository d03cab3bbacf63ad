import { z } from 'zod';
import { type ConversationRef, conversationRef, toConversationRef } from './conversations.js';
import { declare } from './declaration.js';

/** Business hours and messages left (docs/availability.md). */
export const availabilityEvents = {
  'conversation.message_left': declare({
    webhook: 1,
    audiences: ['global', 'visitor'],
    description:
      'Nobody could answer (`reason` `closed`: out of business hours; `no_agent`: no agent of the group online): the conversation is kept as a message left for agents to take from `messagesLeft`; the visitor gets the `notice` it is shown. Webhook-deliverable.',
    payload: z
      .object({
        ...conversationRef,
        group_id: z.string().nullable(),
        reason: z.enum(['closed', 'no_agent']),
        next_open_at: z.number().int().nullable(),
        notice: z.string(),
      })
      .strict(),
    toWire: (
      d: ConversationRef & {
        groupId: string | null;
        reason: 'closed' | 'no_agent';
        nextOpenAt: number | null;
        notice: string;
      },
    ) => ({
      ...toConversationRef(d),
      group_id: d.groupId,
      reason: d.reason,
      next_open_at: d.nextOpenAt,
      notice: d.notice,
    }),
  }),
  'business_hours.changed': declare({
    audiences: ['global', 'agent', 'visitor'],
    description:
      'The merchant (`group_id` null) or a group opened or closed by its business hours, within a second of the boundary, or at once when an admin’s change flips it; `next_open_at` in Unix seconds.',
    payload: z
      .object({
        group_id: z.string().nullable(),
        open: z.boolean(),
        next_open_at: z.number().int().nullable(),
        timezone: z.string(),
      })
      .strict(),
    toWire: (d: { groupId: string | null; open: boolean; nextOpenAt: number | null; timezone: string }) => ({
      group_id: d.groupId,
      open: d.open,
      next_open_at: d.nextOpenAt,
      timezone: d.timezone,
    }),
  }),
} as const;
