import type { Redis } from 'ioredis';
import { DomainError } from '../errors.js';
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

/** The event a resuming subscriber gets when events after its `since` were already dropped. */
export const HISTORY_GAP = 'history.gap';

/**
 * The first event of a subscription without `since`: its id is the channel's current position,
 * so a client that has seen nothing else yet can still resume with `since` after a drop and
 * miss nothing published meanwhile. It carries no data and is not a published event.
 */
export const SUBSCRIBED = 'subscribed';

/** Undelivered live events one subscription may hold before it is ended as a slow consumer. */
export const DEFAULT_MAX_QUEUED_EVENTS = 500;

/** How many kept events a resuming subscriber reads at a time (bounds the memory of a replay). */
const REPLAY_PAGE = 100;

/**
 * Thrown by a subscription whose consumer fell more than `maxQueued` live events behind: its
 * queue is dropped rather than grown. The client resumes with `since` and reads from history.
 * A RATE_LIMITED DomainError, so adapters report it as such (the WebSocket adapter closes 1013).
 */
export class SlowConsumerError extends DomainError {
  constructor(readonly channel: string) {
    super('RATE_LIMITED', 'Too many undelivered events: this consumer is too slow; resume with since');
    this.name = 'SlowConsumerError';
  }
}

/** A publication that reached the bus after its `notAfter`: not sent. */
export class PublicationTooLate extends Error {
  constructor(readonly channel: string) {
    super(`publication on ${channel} refused: past its deadline`);
    this.name = 'PublicationTooLate';
  }
}

export interface EventBus {
  /**
   * Appends an event to the channel's history and delivers it live. `ephemeral`: delivered live
   * with an id in the channel's order, but kept out of the history a resume reads (typing
   * indicators: no use after the fact, and a flood of them must not push real events out).
   * `notAfter` (epoch ms): refused (throws PublicationTooLate) when the bus gets to it later —
   * the outbox's lease: a publisher that stalled past it must not send what another has taken over.
   */
  publish(
    channel: string,
    event: string,
    data: unknown,
    opts?: { ephemeral?: boolean; notAfter?: number },
  ): Promise<ChannelEvent>;
  /**
   * Live events of `channel`. With `since`, first the kept events after it, in order, then live
   * ones, with no gap and no duplicate; a `history.gap` event first when some were dropped.
   * Without `since`, first a `subscribed` event whose id is the position to resume from.
   * Ends when `signal` aborts (promptly, even while waiting); throws SlowConsumerError when the
   * consumer lets more than `maxQueued` live events pile up. With `replayOnly`, ends after the
   * kept events (or the `subscribed` event) without listening: the caller listens on its own.
   */
  subscribe(
    channel: string,
    opts?: { since?: EventId; signal?: AbortSignal; maxQueued?: number; replayOnly?: boolean },
  ): AsyncGenerator<ChannelEvent>;
  close(): Promise<void>;
}

/** What a concrete store provides; the subscribe algorithm above it is shared. */
interface HistoryBackend {
  append(channel: string, event: string, data: unknown, at: string, ephemeral: boolean): Promise<ChannelEvent>;
  /**
   * Up to `limit` kept events with id > `after`, oldest first, read atomically with whether
   * any event after `after` was dropped (trimmed, expired, or from before this history began).
   */
  page(channel: string, after: EventId, limit: number): Promise<{ events: ChannelEvent[]; lost: boolean }>;
  /**
   * The id of the channel's newest event; for a channel with no history, a position just before
   * now, recorded as its floor so that resuming from it later counts nothing as lost.
   */
  cursor(channel: string): Promise<EventId>;
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

/**
 * History bookkeeping shared by both stores: each channel remembers its `floor`, the newest id
 * that may have been dropped. A history that starts afresh (first event, or after expiry) puts
 * its floor at its first id, so a `since` from before it counts as lost. Events after `since`
 * are lost exactly when `since < floor`.
 */
const isLost = (since: EventId, floor: EventId | null | undefined) => !floor || compareIds(since, floor) < 0;

type Listener = (event: ChannelEvent) => void;

/** What both stores take besides their own settings. */
interface BusOptions {
  maxQueued?: number;
  /** Called for each read of a channel's kept history that reaches the store (after coalescing). */
  onHistoryRead?: () => void;
}

function createBus(
  makeBackend: (hubs: LocalHubs) => HistoryBackend,
  defaults: { maxQueued: number; onHistoryRead?: () => void },
): EventBus {
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

  // Concurrent reads of the same page (a reconnect storm: every tab of a conversation resuming
  // from the event they all saw last) share one read of the store.
  const pagesInFlight = new Map<string, ReturnType<HistoryBackend['page']>>();
  function page(channel: string, after: EventId, limit: number) {
    const key = `${channel}\u0000${after}\u0000${limit}`;
    let read = pagesInFlight.get(key);
    if (!read) {
      defaults.onHistoryRead?.();
      read = backend.page(channel, after, limit).finally(() => pagesInFlight.delete(key));
      pagesInFlight.set(key, read);
    }
    return read;
  }

  async function join(channel: string, listener: Listener) {
    let hub = hubs.get(channel);
    if (!hub) {
      const created = { listeners: new Set<Listener>(), ready: backend.listen(channel) };
      hub = created;
      hubs.set(channel, created);
      created.ready.catch(() => {
        if (hubs.get(channel) === created) hubs.delete(channel);
      });
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
    if (!hub?.listeners.delete(listener)) return;
    if (hub.listeners.size === 0) {
      hubs.delete(channel);
      backend.unlisten(channel).catch(() => {});
    }
  }

  return {
    publish: (channel, event, data, opts) => {
      if (opts?.notAfter !== undefined && Date.now() > opts.notAfter)
        return Promise.reject(new PublicationTooLate(channel));
      return backend.append(channel, event, data, new Date().toISOString(), opts?.ephemeral === true);
    },

    async *subscribe(channel, { since, signal, maxQueued = defaults.maxQueued, replayOnly = false } = {}) {
      // Live events wait here until the consumer pulls them; past `maxQueued` the queue is
      // dropped and the subscription ends, so a stalled consumer costs bounded memory.
      let queue: ChannelEvent[] = [];
      let overflowed = false;
      let wake: (() => void) | undefined;
      const listener: Listener = (event) => {
        if (overflowed) return;
        if (queue.length >= maxQueued) {
          overflowed = true;
          queue = [];
        } else {
          queue.push(event);
        }
        wake?.();
      };
      const onAbort = () => wake?.();
      signal?.addEventListener('abort', onAbort);
      // Listen before reading history, so nothing published in between is missed.
      if (!replayOnly) await join(channel, listener);
      try {
        let cursor = since;
        if (!cursor) {
          cursor = await backend.cursor(channel);
          yield { id: cursor, channel, event: SUBSCRIBED, data: {}, at: new Date().toISOString() };
        } else {
          // Replay page by page; each page says whether events after the cursor were dropped.
          while (!signal?.aborted) {
            const { events, lost } = await page(channel, cursor, REPLAY_PAGE);
            if (lost) {
              yield { id: cursor, channel, event: HISTORY_GAP, data: { since: cursor }, at: new Date().toISOString() };
            }
            for (const event of events) {
              yield event;
              cursor = event.id;
            }
            if (events.length < REPLAY_PAGE) break;
          }
        }
        while (!signal?.aborted && !replayOnly) {
          if (overflowed) throw new SlowConsumerError(channel);
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
      const nextId = (last: EventId | undefined) => {
        const now = Date.now();
        const [ms = 0, seq = 0] = (last ?? '0-0').split('-').map(Number);
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

/** A Lua script registered once on a client (EVALSHA, keys prefixed by the client's keyPrefix). */
function script(redis: Redis, name: string, numberOfKeys: number, lua: string) {
  if (!(name in redis)) redis.defineCommand(name, { numberOfKeys, lua });
  const client = redis as unknown as Record<string, (...args: string[]) => Promise<unknown>>;
  return (...args: string[]) => (client[name] as (...args: string[]) => Promise<unknown>).call(redis, ...args);
}

/**
 * XADD, trim to exactly ARGV[1] entries recording the newest dropped id as the floor, refresh
 * both keys' TTL, and PUBLISH — in one script, so every instance sees events in stream order.
 * An ephemeral event (ARGV[5] = 1) is deleted again at once: the stream keeps its id as the last
 * one handed out (ids stay in order) but not the entry, so it neither replays nor trims.
 * KEYS: stream, floor. ARGV: history size, payload, ttl ms, pub/sub topic, ephemeral.
 */
const APPEND_LUA = `
local fresh = redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[2]) == 0
local id = redis.call('XADD', KEYS[1], '*', 'e', ARGV[2])
if fresh then redis.call('SET', KEYS[2], id) end
if ARGV[5] == '1' then redis.call('XDEL', KEYS[1], id) end
local excess = redis.call('XLEN', KEYS[1]) - tonumber(ARGV[1])
if excess > 0 then
  local dropped = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', excess)
  redis.call('XTRIM', KEYS[1], 'MAXLEN', ARGV[1])
  redis.call('SET', KEYS[2], dropped[#dropped][1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[4], id .. ' ' .. ARGV[2])
return id`;

/**
 * The newest id of the stream; for an empty channel, a position just before Redis's own clock
 * (stream ids come from it), stored as the floor until the first event keeps it alive.
 * KEYS: stream, floor. ARGV: ttl ms.
 */
const CURSOR_LUA = `
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last > 0 then return last[1][1] end
local floor = redis.call('GET', KEYS[2])
if floor then return floor end
local t = redis.call('TIME')
local id = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - 1) .. '-0'
redis.call('SET', KEYS[2], id, 'PX', ARGV[1])
return id`;

/**
 * Redis bus: each channel's history is a Stream of the last `historySize` entries, kept
 * `historyTtlSeconds` after the last event, beside a small key holding its floor; live delivery
 * is Redis pub/sub. Keys go through the client's keyPrefix; pub/sub topics are prefixed here
 * (the subscriber connection has no keyPrefix, and topics are not keys).
 */
export function redisEventBus(
  opts: BusOptions & {
    redis: Redis;
    /** A second connection for SUBSCRIBE (a subscribed connection can run nothing else). */
    subscriber: Redis;
    prefix: string;
    historySize: number;
    historyTtlSeconds?: number;
  },
): EventBus {
  const { redis, subscriber, prefix } = opts;
  const ttlMs = (opts.historyTtlSeconds ?? 86_400) * 1000;
  const streamKey = (channel: string) => `stream:${channel}`;
  const floorKey = (channel: string) => `stream-floor:${channel}`;
  const topic = (channel: string) => `${prefix}events:${channel}`;
  const channelOf = (t: string) => t.slice(`${prefix}events:`.length);
  const append = script(redis, 'parleyBusAppend', 2, APPEND_LUA);
  const cursorOf = script(redis, 'parleyBusCursor', 2, CURSOR_LUA);

  return createBus(
    ({ deliver, cursors }) => {
      const decode = (channel: string, id: string, json: string): ChannelEvent => {
        const { event, data, at } = JSON.parse(json) as { event: string; data: unknown; at: string };
        return { id, channel, event, data, at };
      };
      const fromStream = (channel: string, entries: [string, string[]][]) =>
        entries.map(([id, fields]) => decode(channel, id, fields[1] ?? '{}'));
      const onMessage = (t: string, message: string) => {
        if (!t.startsWith(`${prefix}events:`)) return;
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
        async append(channel, event, data, at, ephemeral) {
          const payload = JSON.stringify({ event, data, at });
          const id = (await append(
            streamKey(channel),
            floorKey(channel),
            String(opts.historySize),
            payload,
            String(ttlMs),
            topic(channel),
            ephemeral ? '1' : '0',
          )) as string;
          return { id, channel, event, data, at };
        },
        async page(channel, after, limit) {
          // One transaction, so no trim can fall between reading the floor and the entries.
          const replies = await redis
            .multi()
            .get(floorKey(channel))
            .xrange(streamKey(channel), `(${after}`, '+', 'COUNT', limit)
            .exec();
          const [floorReply, rangeReply] = replies ?? [];
          if (!floorReply || !rangeReply || floorReply[0] || rangeReply[0]) {
            throw floorReply?.[0] ?? rangeReply?.[0] ?? new Error('Redis transaction aborted');
          }
          const floor = floorReply[1] as string | null;
          return { events: fromStream(channel, rangeReply[1] as [string, string[]][]), lost: isLost(after, floor) };
        },
        cursor: async (channel) => (await cursorOf(streamKey(channel), floorKey(channel), String(ttlMs))) as string,
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
    },
    { maxQueued: opts.maxQueued ?? DEFAULT_MAX_QUEUED_EVENTS, onHistoryRead: opts.onHistoryRead },
  );
}
