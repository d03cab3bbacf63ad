import { z } from 'zod';
import { declare, same } from './declaration.js';

/** Who is there: agents logging in and out, their state and Sessions, visitors arriving. */
export const presenceEvents = {
  'agent.login': declare({
    audiences: ['global'],
    description: 'An agent of the merchant logged in.',
    payload: z.object({ agent_id: z.string(), nickname: z.string() }).strict(),
    toWire: (d: { agentId: string; nickname: string }) => ({ agent_id: d.agentId, nickname: d.nickname }),
  }),
  'agent.logout': declare({
    audiences: ['global'],
    description: 'An agent logged out (one of its Sessions ended by logout).',
    payload: z.object({ agent_id: z.string() }).strict(),
    toWire: (d: { agentId: string }) => ({ agent_id: d.agentId }),
  }),
  'agent.state': declare({
    audiences: ['global'],
    description:
      'An agent’s state changed (`online`, `offline`, `busy`, `away`); `reason` is `connected`, `disconnected` or `manual`.',
    payload: z.object({ agent_id: z.string(), state: z.string(), reason: z.string() }).strict(),
    toWire: (d: { agentId: string; state: string; reason: string }) => ({
      agent_id: d.agentId,
      state: d.state,
      reason: d.reason,
    }),
  }),
  'agent.level_changed': declare({
    audiences: ['agent'],
    description:
      'An admin changed this agent’s level (`admin`, `agent`, `ticket_agent`): its open subscriptions are judged again by the new level, and those it no longer allows (an ex-admin’s `admin-{bid}`) end with `FORBIDDEN`.',
    payload: z.object({ agent_id: z.string(), level: z.string() }).strict(),
    toWire: (d: { agentId: string; level: string }) => ({ agent_id: d.agentId, level: d.level }),
  }),
  'session.ended': declare({
    audiences: ['agent', 'global'],
    description:
      'An agent Session ended (logout, disable, expiry): the last event of the subscriptions under it. `sessions` are public fingerprints of the Session IDs.',
    payload: z.object({ reason: z.string(), sessions: z.array(z.string()) }).strict(),
    toWire: same<{ reason: string; sessions: string[] }>,
  }),
  'visitor.online': declare({
    audiences: ['global'],
    description: 'A visitor opened the chat (its bootstrap), at most once per visitor per interval.',
    payload: z.object({ uid: z.string(), nickname: z.string() }).strict(),
    toWire: (d: { uid: string; nickname: string }) => ({ uid: d.uid, nickname: d.nickname }),
  }),
} as const;
