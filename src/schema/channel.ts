import { DomainError } from '../errors.js';
import { chargeHistoryReplay } from '../resolvers/budgets/history-replays.js';
import { authorizeChannel } from '../resolvers/channels.js';
import { eventNames } from '../resolvers/event-catalog.js';
import { channelName, eventId, parseInput } from '../resolvers/inputs.js';
import { setAgentState } from '../resolvers/presence.js';
import { loadAgentProfile } from '../resolvers/workbench.js';
import type { ChannelEvent } from '../stores/bus.js';
import { globalEventId, positionOfSince } from '../stores/event-id.js';
import { builder } from './builder.js';
import { EventPayloadRef, typedPayload } from './event-payloads.js';
import { AgentRef, AgentStateEnum } from './workbench.js';

const ChannelEventRef = builder.objectRef<ChannelEvent>('ChannelEvent').implement({
  description: 'One event of a real-time channel.',
  fields: (t) => ({
    id: t.string({
      description:
        'Unique across every channel (`<channel>:<position>`), so caches that key objects by id never mix events of two channels. Accepted as `since` too.',
      resolve: (event) => globalEventId(event),
    }),
    position: t.exposeString('id', {
      description:
        'The resume position within the channel (`<ms>-<seq>`, increasing): pass the last one seen as `since` to resume.',
    }),
    channel: t.exposeString('channel', { description: 'The channel name.' }),
    event: t.exposeString('event', {
      description: `Event name: one of the gateway's (${eventNames.map((n) => `\`${n}\``).join(', ')}; see docs/realtime.md "Events the gateway publishes"), or one posted to POST /internal/events.`,
    }),
    data: t.expose('data', { type: 'JSON', description: 'Event payload (see docs/realtime.md).' }),
    payload: t.field({
      type: EventPayloadRef,
      nullable: true,
      description:
        'The same payload typed, with camelCase fields (`... on MessageCreatedPayload { message { seq content } }`); null for events posted to POST /internal/events.',
      resolve: (event) => typedPayload(event),
    }),
    at: t.exposeString('at', { description: 'ISO-8601 publication time.' }),
  }),
});

builder.subscriptionField('channel', (t) =>
  t.field({
    type: ChannelEventRef,
    description:
      'Events of a channel: a visitor its own `channel`; an agent `agent-{agentId}` and `global-{bid}`; an admin also `admin-{bid}` (every `message.created` of its merchant). With `since`, the missed events are replayed first (a `history.gap` event first if some were dropped). An agent subscription ends with `session.ended` when its Session ends.',
    args: {
      name: t.arg.string({ required: true, description: 'Channel name, exactly as the bootstrap gives it.' }),
      since: t.arg.string({
        description: 'The `position` (or the `id`) of the last event seen on this channel: resume after it.',
      }),
    },
    subscribe: async (_root, args, ctx) => {
      const name = parseInput(channelName, args.name);
      const since =
        args.since == null ? undefined : parseInput(eventId, positionOfSince(name, args.since) ?? args.since);
      const viewer = ctx.identity === 'visitor' ? await ctx.visitor() : await ctx.agent();
      authorizeChannel(viewer, name);
      // Counted before the fan-out reads any history (RATE_LIMITED on this subscription past it).
      if (since) await chargeHistoryReplay(ctx.deps, viewer, ctx.clientIp);
      // Delivered by the instance's fan-out (one execution and serialization per event), which
      // only sockets reach; HTTP subscriptions are refused before execution (subscription-transport.ts).
      if (!ctx.openChannel) throw new DomainError('BAD_USER_INPUT', 'Subscriptions are served over WebSocket only');
      return ctx.openChannel(viewer, name, since);
    },
    resolve: (event) => event,
  }),
);

builder.mutationField('setAgentState', (t) =>
  t.field({
    type: AgentRef,
    description:
      'Chooses the agent state shown while connected: `busy` or `away`; `online` or null returns to the automatic state (online while a socket is connected). `offline` cannot be chosen. The change is published as `agent.state` on `global-{bid}`.',
    args: { state: t.arg({ type: AgentStateEnum, description: 'busy, away, or online/null for automatic.' }) },
    resolve: async (_root, args, ctx) => {
      const agent = await setAgentState(ctx.deps, await ctx.agent(), args.state);
      return loadAgentProfile(ctx.deps, agent);
    },
  }),
);
