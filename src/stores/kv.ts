import type { Redis } from 'ioredis';

/**
 * Small short-lived values shared by every instance: captcha answers, session indexes.
 * Redis when configured, a process-local map otherwise.
 */
export interface KeyValueStore {
  set(key: string, value: string, ttlSeconds: number): Promise<void>;
  get(key: string): Promise<string | null>;
  /** Sets `key` only when it does not exist (one atomic step); true when this call set it. */
  setIfAbsent(key: string, value: string, ttlSeconds: number): Promise<boolean>;
  /** Reads and deletes in one atomic step: of several callers, exactly one gets the value. */
  take(key: string): Promise<string | null>;
  del(key: string): Promise<void>;
  /** Set membership, for indexes such as "the sessions of agent X". */
  addToSet(key: string, member: string, ttlSeconds: number): Promise<void>;
  removeFromSet(key: string, member: string): Promise<void>;
  members(key: string): Promise<string[]>;
}

export function redisKeyValueStore(redis: Redis): KeyValueStore {
  return {
    async set(key, value, ttl) {
      await redis.set(key, value, 'EX', ttl);
    },
    get: (key) => redis.get(key),
    async setIfAbsent(key, value, ttl) {
      return (await redis.set(key, value, 'EX', ttl, 'NX')) === 'OK';
    },
    take: (key) => redis.getdel(key),
    async del(key) {
      await redis.del(key);
    },
    async addToSet(key, member, ttl) {
      await redis.multi().sadd(key, member).expire(key, ttl).exec();
    },
    async removeFromSet(key, member) {
      await redis.srem(key, member);
    },
    members: (key) => redis.smembers(key),
  };
}

export function memoryKeyValueStore(now: () => number = Date.now): KeyValueStore {
  const values = new Map<string, { value: string; expiresAt: number }>();
  const sets = new Map<string, { members: Set<string>; expiresAt: number }>();
  const live = <T extends { expiresAt: number }>(map: Map<string, T>, key: string): T | undefined => {
    const entry = map.get(key);
    if (entry && entry.expiresAt <= now()) {
      map.delete(key);
      return undefined;
    }
    return entry;
  };
  // Expired entries are dropped when read and swept every minute, so the map cannot grow for ever.
  const sweep = setInterval(() => {
    for (const key of values.keys()) live(values, key);
    for (const key of sets.keys()) live(sets, key);
  }, 60_000);
  sweep.unref();
  return {
    async set(key, value, ttl) {
      values.set(key, { value, expiresAt: now() + ttl * 1000 });
    },
    async get(key) {
      return live(values, key)?.value ?? null;
    },
    async setIfAbsent(key, value, ttl) {
      if (live(values, key)) return false;
      values.set(key, { value, expiresAt: now() + ttl * 1000 });
      return true;
    },
    async take(key) {
      const entry = live(values, key);
      values.delete(key);
      return entry?.value ?? null;
    },
    async del(key) {
      values.delete(key);
    },
    async addToSet(key, member, ttl) {
      const entry = live(sets, key) ?? { members: new Set<string>(), expiresAt: 0 };
      entry.members.add(member);
      entry.expiresAt = now() + ttl * 1000;
      sets.set(key, entry);
    },
    async removeFromSet(key, member) {
      live(sets, key)?.members.delete(member);
    },
    async members(key) {
      return [...(live(sets, key)?.members ?? [])];
    },
  };
}
