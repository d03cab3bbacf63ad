import { afterAll, beforeAll } from 'vitest';
import { type PrivateService, startPrivateRedis } from './private-services.js';
import { freshStores, startTestApp, type TestApp, type TestStores } from './test-app.js';

/**
 * A gateway on fresh stores and a Redis server of its own, which the suite may stop and start
 * (the fault tests): started before the suite's tests, stopped and dropped after them.
 */
export function useAppOnPrivateRedis(use: (made: { redis: PrivateService; t: TestApp }) => void) {
  let redis: PrivateService | undefined;
  let stores: TestStores | undefined;
  let t: TestApp | undefined;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    stores = { ...(await freshStores()), redisUrl: redis.url };
    t = await startTestApp({ stores });
    use({ redis, t });
  });
  afterAll(async () => {
    await t?.stop();
    await stores?.drop().catch(() => {});
    await redis?.destroy();
  });
}
