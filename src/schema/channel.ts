import { subscribeChannel } from '../resolvers/channels.js';
import { channelName, eventId, parseInput } from '../resolvers/inputs.js';
import type { ChannelEvent } from '../stores/bus.js';
import { builder } from './builder.js';

const ChannelEventRef = builder.objectRef<ChannelEvent>('ChannelEvent').implement({
  description: 'One event of a real-time channel.',
  fields: (t) => ({
    id: t.exposeString('id', {
      description: 'Monotonic within the channel; pass the last one seen as `since` to resume.',
    }),
    channel: t.exposeString('channel', { description: 'The channel name.' }),
    event: t.exposeString('event', { description: 'Event name, e.g. `agent.login`, `history.gap`.' }),
    data: t.expose('data', { type: 'JSON', description: 'Event payload.' }),
    at: t.exposeString('at', { description: 'ISO-8601 publication time.' }),
  }),
});

builder.subscriptionField('channel', (t) =>
  t.field({
    type: ChannelEventRef,
    description:
      'Events of a channel: a visitor its own `channel`; an agent `agent-{agentId}` and `global-{bid}`. With `since`, the missed events are replayed first (a `history.gap` event first if some were dropped).',
    args: {
      name: t.arg.string({ required: true, description: 'Channel name, exactly as the bootstrap gives it.' }),
      since: t.arg.string({ description: 'Id of the last event seen.' }),
    },
    subscribe: async (_root, args, ctx) => {
      const name = parseInput(channelName, args.name);
      const since = args.since == null ? undefined : parseInput(eventId, args.since);
      const viewer = ctx.identity === 'visitor' ? await ctx.visitor() : await ctx.agent();
      return subscribeChannel(ctx.deps, viewer, name, { since });
    },
    resolve: (event) => event,
  }),
);
