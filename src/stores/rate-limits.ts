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

export type RateLimiterFactory = (limit: Limit) => RateLimiter;

/** Limits on Redis (shared by every instance; the client's key prefix applies) or in memory. */
export function rateLimiterFactory(opts: { redis?: Redis }): RateLimiterFactory {
  // One limiter per limit: a memory limiter made afresh on every call would forget every count.
  const made = new Map<string, RateLimiter>();
  const storeFailure = (error: unknown) => (opts.redis ? unavailable(error) : error);
  return (limit) => {
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
          const wait = Math.max(1, Math.ceil(error.msBeforeNext / 1000));
          throw new DomainError('RATE_LIMITED', message(wait), wait);
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
}
