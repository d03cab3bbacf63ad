import type { Redis } from 'ioredis';
import {
  type BusOptions,
  type ChannelEvent,
  createBus,
  DEFAULT_MAX_QUEUED_EVENTS,
  type EventBus,
  isLost,
} from './bus.js';

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
