import {
  type BusOptions,
  type ChannelEvent,
  createBus,
  DEFAULT_MAX_QUEUED_EVENTS,
  type EventBus,
  isLost,
} from './bus.js';
import { compareIds, type EventId } from './event-id.js';

/** Lower index of the first event with id > `after` (events are in id order). */
function firstAfter(events: ChannelEvent[], after: EventId): number {
  let lo = 0;
  let hi = events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareIds((events[mid] as ChannelEvent).id, after) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * In-process bus: the last `historySize` events per channel in memory; a channel idle for
 * `historyTtlSeconds` forgets its history (as a Redis stream expires).
 */
export function memoryEventBus(
  opts: BusOptions & {
    historySize: number;
    historyTtlSeconds?: number;
  },
): EventBus {
  const ttlMs = (opts.historyTtlSeconds ?? 86_400) * 1000;
  return createBus(
    ({ deliver }) => {
      const channels = new Map<string, { events: ChannelEvent[]; lastId: EventId; floor: EventId; touched: number }>();
      const sweep = setInterval(() => {
        const cutoff = Date.now() - ttlMs;
        for (const [name, state] of channels) if (state.touched < cutoff) channels.delete(name);
      }, 60_000);
      sweep.unref();
      // After `last`: this millisecond's first id, or `last`'s next when the clock has not passed it.
      const nextId = (last: EventId | undefined) => {
        const now = Date.now();
        if (last === undefined) return `${now}-0`;
        const [ms, seq] = last.split('-').map(Number) as [number, number];
        return now > ms ? `${now}-0` : `${ms}-${seq + 1}`;
      };
      return {
        async append(channel, event, data, at, ephemeral) {
          const existing = channels.get(channel);
          const id = nextId(existing?.lastId);
          const state = existing ?? { events: [], lastId: id, floor: id, touched: 0 };
          channels.set(channel, state);
          state.lastId = id;
          state.touched = Date.now();
          const entry = { id, channel, event, data, at };
          if (!ephemeral) state.events.push(entry);
          if (state.events.length > opts.historySize) state.floor = (state.events.shift() as ChannelEvent).id;
          deliver(entry);
          return entry;
        },
        async cursor(channel) {
          const existing = channels.get(channel);
          if (existing) return existing.lastId;
          const id = `${Date.now() - 1}-0`;
          channels.set(channel, { events: [], lastId: id, floor: id, touched: Date.now() });
          return id;
        },
        async page(channel, after, limit) {
          const state = channels.get(channel);
          if (!state) return { events: [], lost: true }; // nothing kept: forgotten, or from before a restart
          const start = firstAfter(state.events, after);
          return { events: state.events.slice(start, start + limit), lost: isLost(after, state.floor) };
        },
        listen: async () => {},
        unlisten: async () => {},
        close: async () => {
          clearInterval(sweep);
          channels.clear();
        },
      };
    },
    { maxQueued: opts.maxQueued ?? DEFAULT_MAX_QUEUED_EVENTS, onHistoryRead: opts.onHistoryRead },
  );
}
