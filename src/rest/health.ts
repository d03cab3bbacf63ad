import { Router } from 'express';
import type { Deps } from '../deps.js';

/** Liveness (`/healthz`) and readiness (`/readyz`: the database and, when configured, Redis answer). */
export function healthRoutes(deps: Deps): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const check = async (probe: () => Promise<unknown>) => {
      try {
        await probe();
        return 'ok';
      } catch {
        return 'unavailable';
      }
    };
    const { redis } = deps;
    const [database, redisState] = await Promise.all([
      check(() => deps.database.ping(2000)),
      redis ? check(() => redis.ping()) : Promise.resolve('not configured'),
    ]);
    const ready = database === 'ok' && redisState !== 'unavailable';
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'unavailable', database, redis: redisState });
  });
  return router;
}
