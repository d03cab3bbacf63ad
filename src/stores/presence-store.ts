import type { Redis } from 'ioredis';

/**
 * Where agents' live connections and their last published state are kept: every connection
 * (socket) is a member with an expiry time — pushed forward by its instance's heartbeat, set to
 * "now + grace" when it closes — so an agent counts as online while any expiry is in the future,
 * and a crashed instance's connections simply run out. Redis when configured (shared by every
 * instance), a process-local map otherwise.
 */
export interface PresenceStore {
  /** Records `connection` of `agentId` as alive until `until` (ms); true when it was not recorded. */
  touch(agentId: string, connection: string, until: number): Promise<boolean>;
  /**
   * Atomically: forgets connections expired at `now`, then stores the agent's state as
   * `ifOnline` when any remains (or, when `ifOnline` is null, keeps the stored state, `online`
   * if there is none) and `offline` when none does. Returns the stored state before and after,
   * so of several instances settling the same change exactly one sees it happen.
   */
  settle(
    agentId: string,
    bid: string,
    now: number,
    ifOnline: string | null,
  ): Promise<{ before: string; after: string }>;
  isOnline(agentId: string, now: number): Promise<boolean>;
  /** The state last settled (and published) for the agent; `offline` when none. */
  stateOf(agentId: string): Promise<string>;
  /** Agents whose stored state is not offline, with their merchant's bid: the ones to re-check. */
  tracked(): Promise<{ agentId: string; bid: string }[]>;
}

const OFFLINE = 'offline';

/**
 * KEYS: connections zset, state, tracked hash. ARGV: now, ifOnline ('' = keep), agentId, bid.
 * An offline agent has no state key and no tracked entry.
 */
const SETTLE_LUA = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local before = redis.call('GET', KEYS[2]) or 'offline'
local after = 'offline'
if redis.call('ZCARD', KEYS[1]) > 0 then
  if ARGV[2] ~= '' then after = ARGV[2] elseif before ~= 'offline' then after = before else after = 'online' end
end
if after == 'offline' then
  redis.call('DEL', KEYS[2])
  redis.call('HDEL', KEYS[3], ARGV[3])
else
  redis.call('SET', KEYS[2], after)
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
end
return {before, after}`;

/** How long a connection record outlives its last touch, so an abandoned key disappears. */
const KEY_TTL_SECONDS = 3600;

export function redisPresenceStore(redis: Redis): PresenceStore {
  const connections = (agentId: string) => `presence:conns:${agentId}`;
  const state = (agentId: string) => `presence:state:${agentId}`;
  const tracked = 'presence:tracked';
  if (!('parleyPresenceSettle' in redis))
    redis.defineCommand('parleyPresenceSettle', { numberOfKeys: 3, lua: SETTLE_LUA });
  const settle = (...args: string[]) =>
    (redis as unknown as { parleyPresenceSettle(...a: string[]): Promise<[string, string]> }).parleyPresenceSettle(
      ...args,
    );

  return {
    async touch(agentId, connection, until) {
      const [[, added] = []] =
        (await redis
          .multi()
          .zadd(connections(agentId), until, connection)
          .expire(connections(agentId), KEY_TTL_SECONDS)
          .exec()) ?? [];
      return added === 1;
    },
    async settle(agentId, bid, now, ifOnline) {
      const [before, after] = await settle(
        connections(agentId),
        state(agentId),
        tracked,
        String(now),
        ifOnline ?? '',
        agentId,
        bid,
      );
      return { before, after };
    },
    async isOnline(agentId, now) {
      return (await redis.zcount(connections(agentId), `(${now}`, '+inf')) > 0;
    },
    async stateOf(agentId) {
      return (await redis.get(state(agentId))) ?? OFFLINE;
    },
    async tracked() {
      const all = await redis.hgetall(tracked);
      return Object.entries(all).map(([agentId, bid]) => ({ agentId, bid }));
    },
  };
}

export function memoryPresenceStore(): PresenceStore {
  const connections = new Map<string, Map<string, number>>();
  const states = new Map<string, { state: string; bid: string }>();
  const live = (agentId: string, now: number) => {
    const conns = connections.get(agentId);
    if (!conns) return 0;
    for (const [id, until] of conns) if (until <= now) conns.delete(id);
    if (conns.size === 0) connections.delete(agentId);
    return conns.size;
  };
  return {
    async touch(agentId, connection, until) {
      const conns = connections.get(agentId) ?? new Map<string, number>();
      connections.set(agentId, conns);
      const added = !conns.has(connection);
      conns.set(connection, until);
      return added;
    },
    async settle(agentId, bid, now, ifOnline) {
      const before = states.get(agentId)?.state ?? OFFLINE;
      const after = live(agentId, now) === 0 ? OFFLINE : (ifOnline ?? (before !== OFFLINE ? before : 'online'));
      if (after === OFFLINE) states.delete(agentId);
      else states.set(agentId, { state: after, bid });
      return { before, after };
    },
    async isOnline(agentId, now) {
      return live(agentId, now) > 0;
    },
    async stateOf(agentId) {
      return states.get(agentId)?.state ?? OFFLINE;
    },
    async tracked() {
      return [...states].map(([agentId, { bid }]) => ({ agentId, bid }));
    },
  };
}
