import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { BackendUnavailableError, DomainError } from '../errors.js';

export interface Limit {
  /** Counter name; keys are `<name>:<subject>`. */
  name: string;
  points: number;
  durationSeconds: number;
  /** Once exhausted, stay blocked this long (defaults to the rest of the window). */
  blockSeconds?: number;
}

export interface RateLimiter {
  /** Counts one attempt (or `points`, e.g. bytes); throws RATE_LIMITED with the wait when over the limit. */
  consume(subject: string, message: (waitSeconds: number) => string, points?: number): Promise<void>;
  /** Whether `subject` is currently over the limit, without counting. */
  isBlocked(subject: string): Promise<number>;
  reset(subject: string): Promise<void>;
  /** Gives back `points` counted earlier (an attempt that turned out not to count). */
  reward(subject: string, points?: number): Promise<void>;
}

/** A limiter's store failure as BackendUnavailableError (a DomainError goes through unchanged). */
const unavailable = (error: unknown) =>
  error instanceof DomainError || error instanceof BackendUnavailableError || !(error instanceof Error)
    ? error
    : new BackendUnavailableError('redis', { cause: error });

/** One point of `limit` counted on `subject`; `message` words its refusal (as `consume`'s). */
export interface Charge {
  limit: Limit;
  subject: string;
  message: (waitSeconds: number) => string;
}

export type RateLimiterFactory = ((limit: Limit) => RateLimiter) & {
  /**
   * Counts each charge in order as `consume` would, stopping at the first one refused (which is
   * counted, and thrown as RATE_LIMITED); the ones after it are not counted. On Redis the whole
   * list is one round trip (a send's three message budgets were three).
   */
  consumeInOrder(charges: readonly Charge[]): Promise<void>;
};

/**
 * rate-limiter-flexible's own count (its `rlflxIncr` script: a window that starts at the first
 * point and expires with its key), for each key in turn; the first count over its points stops
 * the list and is returned with its key's remaining ms. KEYS: the limiters' keys. ARGV: for each
 * key its window in seconds, then its points. Returns {0, 0} when none is over.
 */
const CONSUME_IN_ORDER_LUA = `
for i = 1, #KEYS do
  local seconds = ARGV[2 * i - 1]
  redis.call('set', KEYS[i], 0, 'EX', seconds, 'NX')
  local consumed = redis.call('incrby', KEYS[i], 1)
  local ttl = redis.call('pttl', KEYS[i])
  if ttl == -1 then
    redis.call('expire', KEYS[i], seconds)
    ttl = 1000 * seconds
  end
  if consumed > tonumber(ARGV[2 * i]) then return {i, ttl} end
end
return {0, 0}`;

const refusal = (message: Charge['message'], msBeforeNext: number) => {
  const wait = Math.max(1, Math.ceil(msBeforeNext / 1000));
  return new DomainError('RATE_LIMITED', message(wait), wait);
};

/** Limits on Redis (shared by every instance; the client's key prefix applies) or in memory. */
export function rateLimiterFactory(opts: { redis?: Redis }): RateLimiterFactory {
  // One limiter per limit: a memory limiter made afresh on every call would forget every count.
  const made = new Map<string, RateLimiter>();
  const storeFailure = (error: unknown) => (opts.redis ? unavailable(error) : error);
  const factory = (limit: Limit): RateLimiter => {
    const id = `${limit.name}:${limit.points}:${limit.durationSeconds}:${limit.blockSeconds ?? 0}`;
    const existing = made.get(id);
    if (existing) return existing;
    const options = {
      keyPrefix: `rl:${limit.name}`,
      points: limit.points,
      duration: limit.durationSeconds,
      blockDuration: limit.blockSeconds ?? 0,
    };
    const limiter = opts.redis
      ? new RateLimiterRedis({
          ...options,
          storeClient: opts.redis,
          useRedisPackage: false,
          rejectIfRedisNotReady: true,
        })
      : new RateLimiterMemory(options);
    const rateLimiter: RateLimiter = {
      async consume(subject, message, points = 1) {
        try {
          await limiter.consume(subject, points);
        } catch (error) {
          // Anything but a refusal is the store failing (e.g. "Redis connection is not ready").
          if (!(error instanceof RateLimiterRes)) throw storeFailure(error);
          throw refusal(message, error.msBeforeNext);
        }
      },
      async isBlocked(subject) {
        const res = await limiter.get(subject).catch((error: unknown) => Promise.reject(storeFailure(error)));
        if (!res || res.remainingPoints > 0) return 0;
        return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
      },
      async reset(subject) {
        await limiter.delete(subject).catch((error: unknown) => Promise.reject(storeFailure(error)));
      },
      async reward(subject, points = 1) {
        await limiter.reward(subject, points).catch((error: unknown) => Promise.reject(storeFailure(error)));
      },
    };
    made.set(id, rateLimiter);
    return rateLimiter;
  };
  const { redis } = opts;
  const oneByOne = chargingInOrder(factory);
  // In memory there is no round trip to save.
  if (!redis) return oneByOne;
  if (!('parleyConsumeInOrder' in redis)) redis.defineCommand('parleyConsumeInOrder', { lua: CONSUME_IN_ORDER_LUA });
  const consumeInOrder = async (charges: readonly Charge[]) => {
    // A limit that blocks once spent keeps rate-limiter-flexible's own path.
    if (charges.some((c) => c.limit.blockSeconds)) return oneByOne.consumeInOrder(charges);
    // The keys rate-limiter-flexible gives them (`<keyPrefix>:<subject>`), so `isBlocked`,
    // `reset` and `reward` of each limit see these counts.
    const keys = charges.map((c) => `rl:${c.limit.name}:${c.subject}`);
    const windows = charges.flatMap((c) => [String(c.limit.durationSeconds), String(c.limit.points)]);
    if (redis.status !== 'ready') throw storeFailure(new Error('Redis connection is not ready'));
    const run = (redis as unknown as Record<string, (...args: (string | number)[]) => Promise<[number, number]>>)
      .parleyConsumeInOrder as (...args: (string | number)[]) => Promise<[number, number]>;
    const [over, msBeforeNext] = await run.call(redis, keys.length, ...keys, ...windows).catch((error: unknown) => {
      throw storeFailure(error);
    });
    const refused = charges[over - 1];
    if (refused) throw refusal(refused.message, msBeforeNext);
  };
  return Object.assign(factory, { consumeInOrder });
}

/** A factory of limiters with `consumeInOrder` charge by charge (in memory, or a test's stand-in). */
export function chargingInOrder(make: (limit: Limit) => RateLimiter): RateLimiterFactory {
  return Object.assign((limit: Limit) => make(limit), {
    async consumeInOrder(charges: readonly Charge[]) {
      for (const c of charges) await make(c.limit).consume(c.subject, c.message);
    },
  });
}
