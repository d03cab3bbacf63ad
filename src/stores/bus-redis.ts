import type { Redis } from 'ioredis';
import {
  type BusOptions,
  createBus,
  DEFAULT_MAX_QUEUED_EVENTS,
  type EventBus,
  type HistoryBackend,
  isLost,
} from './bus.js';
import { followLiveEvents, fromStream, type RedisBusNames, redisBusNames } from './bus-redis-live.js';

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

/** The Redis bus's own settings, besides BusOptions. */
interface RedisBusOptions {
  redis: Redis;
  /** A second connection for SUBSCRIBE (a subscribed connection can run nothing else). */
  subscriber: Redis;
  prefix: string;
  historySize: number;
  historyTtlSeconds?: number;
}

/**
 * Redis bus: each channel's history is a Stream of the last `historySize` entries, kept
 * `historyTtlSeconds` after the last event, beside a small key holding its floor; live delivery
 * is Redis pub/sub (bus-redis-live.ts, with the key and topic names).
 */
export function redisEventBus(opts: BusOptions & RedisBusOptions): EventBus {
  const names = redisBusNames(opts.prefix);
  const history = redisHistory(opts, names);
  return createBus(
    (hubs) => {
      const stopFollowing = followLiveEvents({ ...opts, names }, hubs);
      return {
        ...history,
        async listen(channel) {
          await opts.subscriber.subscribe(names.topic(channel));
        },
        async unlisten(channel) {
          await opts.subscriber.unsubscribe(names.topic(channel));
        },
        async close() {
          stopFollowing();
        },
      };
    },
    { maxQueued: opts.maxQueued ?? DEFAULT_MAX_QUEUED_EVENTS, onHistoryRead: opts.onHistoryRead },
  );
}

/** The kept history of the channels: appends (which also publish), pages and cursors, each one round trip. */
function redisHistory(
  opts: RedisBusOptions,
  { streamKey, floorKey, topic }: RedisBusNames,
): Pick<HistoryBackend, 'append' | 'page' | 'cursor'> {
  const { redis } = opts;
  const ttlMs = (opts.historyTtlSeconds ?? 86_400) * 1000;
  const append = script(redis, 'parleyBusAppend', 2, APPEND_LUA);
  const cursorOf = script(redis, 'parleyBusCursor', 2, CURSOR_LUA);
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
  };
}
