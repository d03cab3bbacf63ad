import { z } from 'zod';
import { declare } from './declaration.js';

/** The public face of an agent in chat events and answers. */
export const agentBriefWire = z.object({ agent_id: z.string(), nickname: z.string(), avatar: z.string() }).strict();
export interface AgentBrief {
  agentId: string;
  nickname: string;
  avatar: string;
}
export const toAgentBriefWire = (a: AgentBrief) => ({ agent_id: a.agentId, nickname: a.nickname, avatar: a.avatar });

/** What every conversation event says about its conversation. */
export const conversationRef = {
  conversation_id: z.string(),
  visitor_id: z.string(),
  state: z.enum(['queued', 'active', 'closed']),
};
export interface ConversationRef {
  conversationId: string;
  visitorId: string;
  state: 'queued' | 'active' | 'closed';
}
export const toConversationRef = (c: ConversationRef) => ({
  conversation_id: c.conversationId,
  visitor_id: c.visitorId,
  state: c.state,
});

/** A waiting conversation's place: `conversation.queued` and `conversation.queue_position` carry the same payload. */
const queuePlace = {
  payload: z.object({ ...conversationRef, group_id: z.string().nullable(), queue_position: z.number().int() }).strict(),
  toWire: (d: ConversationRef & { groupId: string | null; queuePosition: number }) => ({
    ...toConversationRef(d),
    group_id: d.groupId,
    queue_position: d.queuePosition,
  }),
};

/** A conversation's life with the agents: queued, assigned, transferred, requeued, closed, invited to rate. */
export const conversationEvents = {
  'conversation.queued': declare({
    audiences: ['global', 'visitor'],
    description: 'A conversation waits for an agent (new, or transferred back to a queue); `queue_position` from 1.',
    ...queuePlace,
  }),
  'conversation.queue_position': declare({
    audiences: ['visitor'],
    description:
      'The visitor’s place in its group’s queue moved (conversations ahead were served, closed or claimed, or went ahead of it): `queue_position` from 1, pushed after the change by the queue’s drain, once per new position.',
    ...queuePlace,
  }),
  'conversation.assigned': declare({
    webhook: 1,
    audiences: ['global', 'agent', 'visitor'],
    description: 'An agent took a conversation (routing, a claim or the queue draining).',
    payload: z.object({ ...conversationRef, agent: agentBriefWire, by: z.enum(['routing', 'claim']) }).strict(),
    toWire: (d: ConversationRef & { agent: AgentBrief; by: 'routing' | 'claim' }) => ({
      ...toConversationRef(d),
      agent: toAgentBriefWire(d.agent),
      by: d.by,
    }),
  }),
  'conversation.transferred': declare({
    webhook: 1,
    audiences: ['global', 'agent', 'visitor'],
    description: 'A conversation moved to another agent (`to` set) or back to a group’s queue (`to` null).',
    payload: z
      .object({
        ...conversationRef,
        from_agent_id: z.string(),
        to: agentBriefWire.nullable(),
        group_id: z.string().nullable(),
      })
      .strict(),
    toWire: (d: ConversationRef & { fromAgentId: string; to: AgentBrief | null; groupId: string | null }) => ({
      ...toConversationRef(d),
      from_agent_id: d.fromAgentId,
      to: d.to && toAgentBriefWire(d.to),
      group_id: d.groupId,
    }),
  }),
  'conversation.requeued': declare({
    audiences: ['global', 'agent', 'visitor'],
    description:
      'Its agent went offline beyond the presence grace: the conversation is back at the front of its group’s queue (`conversation.queued` follows with the position).',
    payload: z
      .object({
        ...conversationRef,
        from_agent_id: z.string(),
        group_id: z.string().nullable(),
        reason: z.enum(['agent_offline']),
      })
      .strict(),
    toWire: (d: ConversationRef & { fromAgentId: string; groupId: string | null; reason: 'agent_offline' }) => ({
      ...toConversationRef(d),
      from_agent_id: d.fromAgentId,
      group_id: d.groupId,
      reason: d.reason,
    }),
  }),
  'conversation.closed': declare({
    webhook: 1,
    audiences: ['global', 'agent', 'visitor'],
    description: 'A conversation was closed by the visitor, its agent or the idle timeout (`closed_by`).',
    payload: z
      .object({ ...conversationRef, agent_id: z.string().nullable(), closed_by: z.enum(['visitor', 'agent', 'idle']) })
      .strict(),
    toWire: (d: ConversationRef & { agentId: string | null; closedBy: 'visitor' | 'agent' | 'idle' }) => ({
      ...toConversationRef(d),
      agent_id: d.agentId,
      closed_by: d.closedBy,
    }),
  }),
  'conversation.rating_invited': declare({
    audiences: ['visitor'],
    description: 'The closed conversation may be rated (`rating`) and/or marked resolved (`resolved`).',
    payload: z.object({ conversation_id: z.string(), rating: z.boolean(), resolved: z.boolean() }).strict(),
    toWire: (d: { conversationId: string; rating: boolean; resolved: boolean }) => ({
      conversation_id: d.conversationId,
      rating: d.rating,
      resolved: d.resolved,
    }),
  }),
} as const;
