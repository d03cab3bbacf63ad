import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { connectRedis, redisReady } from '../../src/stores/redis.js';
import { freePort, hasRedisServer, type PrivateService, startPrivateRedis } from './private-services.js';

/**
 * A Redis for a test file that checks Redis code directly: REDIS_URL, or else a private
 * redis-server when the machine has one, so that code is tested (and mutated) in the embedded mode
 * too. Registers the file's beforeAll/afterAll; every client made here is closed after the file.
 */
export function useTestRedis() {
  const privateRedis = !process.env.REDIS_URL && hasRedisServer();
  let server: PrivateService | undefined;
  const clients: Redis[] = [];
  beforeAll(async () => {
    if (privateRedis) server = await startPrivateRedis();
  });
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await server?.destroy();
  });
  const url = () => process.env.REDIS_URL ?? (server as PrivateService).url;
  /** `client`, closed after the file. */
  const kept = (client: Redis) => {
    clients.push(client);
    return client;
  };
  return {
    /** Whether there is a Redis (else the file's Redis tests are skipped). */
    available: Boolean(process.env.REDIS_URL) || privateRedis,
    url,
    kept,
    /** A ready client of a key prefix of its own, so runs and parallel files never meet. */
    async client(): Promise<Redis> {
      const client = kept(connectRedis(url(), { keyPrefix: `parley-test:${randomBytes(6).toString('hex')}:` }));
      await redisReady(client);
      return client;
    },
    /** A client of a port nobody listens on: every command fails. */
    async dead(opts: { lazy?: boolean } = {}): Promise<Redis> {
      return kept(connectRedis(`redis://127.0.0.1:${await freePort()}`, opts));
    },
  };
}
