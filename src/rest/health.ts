import { z } from 'zod';
import { type AnyRoute, rawRoute } from './route.js';

/** Liveness, readiness and metrics: plain JSON (not the envelope) for probes and scrapers. */

const probe = z.enum(['ok', 'unavailable']);
const readinessResult = z
  .object({
    status: z.enum(['ready', 'unavailable']),
    database: probe,
    redis: z.enum(['ok', 'unavailable', 'not configured']),
  })
  .strict()
  .openapi('Readiness');

/** The liveness answer (also written by the front door before express: src/http/front.ts, app.ts). */
export const HEALTHY = { status: 'ok' } as const;

async function check(probe: () => Promise<unknown>): Promise<'ok' | 'unavailable'> {
  try {
    await probe();
    return 'ok';
  } catch {
    return 'unavailable';
  }
}

export const operationsEndpoints: AnyRoute[] = [
  rawRoute({
    method: 'get',
    path: '/healthz',
    identity: 'public',
    tag: 'Operations',
    summary: 'Liveness',
    raw: {
      contentType: 'application/json',
      description: 'The process is alive.',
      schema: z.object({ status: z.literal('ok') }).strict(),
    },
    async handle({ res }) {
      res.json(HEALTHY);
    },
  }),
  rawRoute({
    method: 'get',
    path: '/readyz',
    identity: 'public',
    tag: 'Operations',
    summary: 'Readiness',
    description: 'Ready (200) when the database and (when configured) Redis answer, else 503 with the same shape.',
    raw: {
      contentType: 'application/json',
      description: 'Readiness: `status`, `database`, `redis`.',
      schema: readinessResult,
      statuses: [200, 503],
    },
    async handle({ deps, res }) {
      const { redis } = deps;
      const [database, redisState] = await Promise.all([
        check(() => deps.database.ping(2000)),
        redis ? check(() => redis.ping()) : Promise.resolve('not configured' as const),
      ]);
      const ready = database === 'ok' && redisState !== 'unavailable';
      const body: z.infer<typeof readinessResult> = {
        status: ready ? 'ready' : 'unavailable',
        database,
        redis: redisState,
      };
      res.status(ready ? 200 : 503).json(body);
    },
  }),
  rawRoute({
    method: 'get',
    path: '/metrics',
    identity: 'public',
    tag: 'Operations',
    summary: 'Prometheus metrics',
    description: 'The Prometheus text exposition. Absent (404) when METRICS_ENABLED is off.',
    enabled: (config) => config.metricsEnabled,
    raw: { contentType: 'text/plain', description: 'Metrics.' },
    async handle({ deps, res }) {
      const body = await deps.metrics.render();
      res.set({ 'Content-Type': deps.metrics.contentType, 'Cache-Control': 'no-store' }).send(body);
    },
  }),
];
