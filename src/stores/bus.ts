import type { Redis } from 'ioredis';
import { compareIds, type EventId } from './event-id.js';

export interface ChannelEvent {
  /** Monotonic within the channel (`<ms>-<seq>`). */
  id: EventId;
  channel: string;
  event: string;
  data: unknown;
  /** ISO-8601 time of publication. */
  at: string;
}

/** The event a resuming subscriber gets first when events it missed were already dropped. */
export const HISTORY_GAP = 'history.gap';

export interface EventBus {
  publish(channel: string, event: string, data: unknown): Promise<ChannelEvent>;
  /**
   * Live events of `channel`. With `since`, first the kept events after it, in order, then live
   * ones, with no gap and no duplicate; a `history.gap` event first when some were dropped.
   * Ends when `signal` aborts.
   */
  subscribe(channel: string, opts?: { since?: EventId; signal?: AbortSignal }): AsyncGenerator<ChannelEvent>;
  close(): Promise<void>;
}

/** What a concrete store provides; the subscribe algorithm above it is shared. */
interface HistoryBackend {
  append(channel: string, event: string, data: unknown, at: string): Promise<ChannelEvent>;
  /** Kept events with id > `after`, oldest first. */
  range(channel: string, after: EventId): Promise<ChannelEvent[]>;
  /** True when events after `since` have been dropped (trimmed or expired). */
  lostSince(channel: string, since: EventId): Promise<boolean>;
  /** Starts live delivery of a channel to this instance. */
  listen(channel: string): Promise<void>;
  unlisten(channel: string): Promise<void>;
  close(): Promise<void>;
}

/** What the shared part gives a backend: where live events go, and what was delivered last. */
interface LocalHubs {
  deliver(event: ChannelEvent): void;
  /** The channels listened to on this instance, with the last event id delivered on each. */
  cursors(): Iterable<[channel: string, lastId: EventId | undefined]>;
}

type Listener = (event: ChannelEvent) => void;

function createBus(makeBackend: (hubs: LocalHubs) => HistoryBackend): EventBus {
  // One hub a channel with local listeners; `lastId` drops duplicates (replays after reconnects).
  const hubs = new Map<string, { listeners: Set<Listener>; lastId?: EventId; ready: Promise<void> }>();
  const deliver = (event: ChannelEvent) => {
    const hub = hubs.get(event.channel);
    if (!hub) return;
    if (hub.lastId && compareIds(event.id, hub.lastId) <= 0) return;
    hub.lastId = event.id;
    for (const listener of hub.listeners) listener(event);
  };
  const backend = makeBackend({
    deliver,
    *cursors() {
      for (const [channel, hub] of hubs) yield [channel, hub.lastId];
    },
  });

  async function join(channel: string, listener: Listener) {
    let hub = hubs.get(channel);
    if (!hub) {
      hub = { listeners: new Set(), ready: backend.listen(channel) };
      hubs.set(channel, hub);
      hub.ready.catch(() => hubs.delete(channel));
    }
    hub.listeners.add(listener);
    try {
      await hub.ready;
    } catch (error) {
      hub.listeners.delete(listener);
      throw error;
    }
  }

  function leave(channel: string, listener: Listener) {
    const hub = hubs.get(channel);
    if (!hub) return;
    hub.listeners.delete(listener);
    if (hub.listeners.size === 0) {
      hubs.delete(channel);
      backend.unlisten(channel).catch(() => {});
    }
  }

  return {
    publish: (channel, event, data) => backend.append(channel, event, data, new Date().toISOString()),

    async *subscribe(channel, { since, signal } = {}) {
      const queue: ChannelEvent[] = [];
      let wake: (() => void) | undefined;
      const listener: Listener = (event) => {
        queue.push(event);
        wake?.();
      };
      const onAbort = () => wake?.();
      signal?.addEventListener('abort', onAbort);
      // Listen before reading history, so nothing published in between is missed.
      await join(channel, listener);
      try {
        let cursor = since;
        if (since) {
          if (await backend.lostSince(channel, since)) {
            yield { id: since, channel, event: HISTORY_GAP, data: { since }, at: new Date().toISOString() };
          }
          for (const event of await backend.range(channel, since)) {
            yield event;
            cursor = event.id;
          }
        }
        while (!signal?.aborted) {
          const event = queue.shift();
          if (!event) {
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
            wake = undefined;
            continue;
          }
          if (cursor && compareIds(event.id, cursor) <= 0) continue;
          cursor = event.id;
          yield event;
        }
      } finally {
        signal?.removeEventListener('abort', onAbort);
        leave(channel, listener);
      }
    },

    close: () => backend.close(),
  };
}

/** In-process bus: a ring buffer of `historySize` events per channel. */
export function memoryEventBus(opts: { historySize: number }): EventBus {
  return createBus(({ deliver }) => {
    const channels = new Map<string, { events: ChannelEvent[]; lastId?: EventId; droppedUpTo?: EventId }>();
    const nextId = (last: EventId | undefined) => {
      const now = Date.now();
      const [ms = 0, seq = 0] = (last ?? '0-0').split('-').map(Number);
      return now > ms ? `${now}-0` : `${ms}-${seq + 1}`;
    };
    return {
      async append(channel, event, data, at) {
        const state = channels.get(channel) ?? { events: [] };
        channels.set(channel, state);
        const id = nextId(state.lastId);
        state.lastId = id;
        const entry = { id, channel, event, data, at };
        state.events.push(entry);
        if (state.events.length > opts.historySize) state.droppedUpTo = state.events.shift()?.id;
        deliver(entry);
        return entry;
      },
      async range(channel, after) {
        return (channels.get(channel)?.events ?? []).filter((e) => compareIds(e.id, after) > 0);
      },
      async lostSince(channel, since) {
        const state = channels.get(channel);
        if (!state) return true; // a since id for a channel we know nothing of: its history is gone
        return state.droppedUpTo !== undefined && compareIds(since, state.droppedUpTo) < 0;
      },
      listen: async () => {},
      unlisten: async () => {},
      close: async () => channels.clear(),
    };
  });
}

/**
 * Redis bus: each channel's history is a Stream capped at about `historySize` entries and kept
 * `historyTtlSeconds` after the last event; live delivery is Redis pub/sub. XADD and PUBLISH run
 * in one script so every instance sees events in stream order.
 */
export function redisEventBus(opts: {
  redis: Redis;
  /** A second connection for SUBSCRIBE (a subscribed connection can run nothing else). */
  subscriber: Redis;
  prefix: string;
  historySize: number;
  historyTtlSeconds?: number;
}): EventBus {
  const { redis, subscriber, prefix } = opts;
  const ttlMs = (opts.historyTtlSeconds ?? 86_400) * 1000;
  const streamKey = (channel: string) => `stream:${channel}`; // the client's keyPrefix is added
  const topic = (channel: string) => `${prefix}events:${channel}`;
  const channelOf = (t: string) => t.slice(`${prefix}events:`.length);

  return createBus(({ deliver, cursors }) => {
    const decode = (channel: string, id: string, json: string): ChannelEvent => {
      const { event, data, at } = JSON.parse(json) as { event: string; data: unknown; at: string };
      return { id, channel, event, data, at };
    };
    const fromStream = (channel: string, entries: [string, string[]][]) =>
      entries.map(([id, fields]) => decode(channel, id, fields[1] ?? '{}'));
    const onMessage = (t: string, message: string) => {
      const space = message.indexOf(' ');
      deliver(decode(channelOf(t), message.slice(0, space), message.slice(space + 1)));
    };
    // While the subscriber connection is down pub/sub delivers nothing: when it is back, fetch
    // the missed events from the streams (the hubs drop any duplicate).
    let downSince: number | undefined;
    const onClose = () => {
      downSince ??= Date.now();
    };
    const onReady = async () => {
      if (downSince === undefined) return;
      const fallback = `${downSince - 2000}-0`;
      downSince = undefined;
      for (const [channel, lastId] of cursors()) {
        const after = lastId ?? fallback;
        const entries = await redis.xrange(streamKey(channel), `(${after}`, '+').catch(() => []);
        for (const e of fromStream(channel, entries)) deliver(e);
      }
    };
    subscriber.on('message', onMessage);
    subscriber.on('close', onClose);
    subscriber.on('ready', onReady);

    return {
      async append(channel, event, data, at) {
        const payload = JSON.stringify({ event, data, at });
        const id = (await redis.eval(
          `local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[2])
           redis.call('PEXPIRE', KEYS[1], ARGV[3])
           redis.call('PUBLISH', ARGV[4], id .. ' ' .. ARGV[2])
           return id`,
          1,
          streamKey(channel),
          String(opts.historySize),
          payload,
          String(ttlMs),
          topic(channel),
        )) as string;
        return { id, channel, event, data, at };
      },
      async range(channel, after) {
        return fromStream(channel, await redis.xrange(streamKey(channel), `(${after}`, '+'));
      },
      async lostSince(channel, since) {
        const info = (await redis.call('XINFO', 'STREAM', `${prefix}${streamKey(channel)}`).catch(() => null)) as
          | (string | number)[]
          | null;
        if (!info) return true; // no stream: expired, or never existed for this since id
        const field = info.indexOf('max-deleted-entry-id');
        const maxDeleted = field >= 0 ? String(info[field + 1]) : '0-0';
        return compareIds(since, maxDeleted) < 0;
      },
      async listen(channel) {
        await subscriber.subscribe(topic(channel));
      },
      async unlisten(channel) {
        await subscriber.unsubscribe(topic(channel));
      },
      async close() {
        subscriber.off('message', onMessage);
        subscriber.off('close', onClose);
        subscriber.off('ready', onReady);
      },
    };
  });
}
