import type { Deps } from '../deps.js';
import { HISTORY_GAP } from '../stores/bus.js';
import { traceDatabase, traceRedis } from './tracing.js';

/**
 * Hooks the stores of `deps` into metrics (events published, history gaps, backend health
 * probed at every scrape) and, with OTEL_ENABLED, into tracing (database statements, Redis
 * commands). Called once by the composition root, right after the deps are built.
 */
export function instrumentDeps(deps: Deps) {
  const { metrics, bus, database, redis } = deps;
  metrics.addHealthProbe('postgres', () => database.ping(2000));
  if (redis) metrics.addHealthProbe('redis', () => redis.ping());

  deps.bus = {
    ...bus,
    async publish(channel, event, data) {
      const published = await bus.publish(channel, event, data);
      metrics.eventPublished();
      return published;
    },
    async *subscribe(channel, opts) {
      for await (const event of bus.subscribe(channel, opts)) {
        if (event.event === HISTORY_GAP) metrics.eventDropped('history_gap');
        yield event;
      }
    },
    close: () => bus.close(),
  };

  if (deps.config.otelEnabled) {
    traceDatabase(database);
    if (redis) traceRedis(redis);
  }
}
