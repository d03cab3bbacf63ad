import { and, lt } from 'drizzle-orm';
import { webhookDeliveries } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { attemptDelivery, type ClaimedDelivery, claimDeliveries, RETRY_JITTER, recordAttempt } from './delivery.js';

/**
 * The instance's webhook sender, started and stopped by the composition root. Every instance
 * runs one; they share the work through the delivery table (claims skip each other's rows).
 * It claims due deliveries when nudged (an outbox drain created some, an attempt finished, a
 * retry fell due) and on a poll, sends each without waiting for the others — a receiver that
 * hangs holds only its endpoint's slots — and sweeps the delivery log past its retention.
 */
export interface WebhookDispatcher {
  start(): void;
  /** Stops claiming; attempts in flight get a moment to record, the rest are retried on lease expiry. */
  stop(): Promise<void>;
  /** Claims what is due now (called after the outbox created deliveries on this instance). */
  nudge(): void;
}

export interface WebhookDispatcherOptions {
  /** How often due deliveries are looked for without a nudge. @default 1000 */
  pollMs?: number;
  /** Attempts in flight on this instance. @default 64 */
  maxInFlight?: number;
  /** How often finished deliveries past the retention are deleted. @default 3600000 */
  sweepMs?: number;
}

const dispatchers = new WeakMap<Deps, WebhookDispatcher>();

/** Wakes the instance's dispatcher, if one runs over these deps. */
export const nudgeWebhooks = (deps: Deps) => dispatchers.get(deps)?.nudge();

export function createWebhookDispatcher(deps: Deps, opts: WebhookDispatcherOptions = {}): WebhookDispatcher {
  const maxInFlight = opts.maxInFlight ?? 64;
  const inFlight = new Set<Promise<void>>();
  const timers = createTimerSet();
  let stopped = true;
  let pumping: Promise<void> | undefined;
  let again = false;

  // A failed attempt wakes the dispatcher again when its retry may be due.
  const send = (d: ClaimedDelivery) => sendAndRecord(deps, d, () => timers.later(soonestRetryMs(deps), nudge));

  const pump = async () => {
    while (!stopped) {
      const room = maxInFlight - inFlight.size;
      if (room <= 0) return;
      let claimed: ClaimedDelivery[];
      try {
        claimed = await claimDeliveries(deps, room);
      } catch (error) {
        deps.log.warn({ err: (error as Error).message }, 'webhook: claim failed');
        return;
      }
      for (const d of claimed) {
        const run = send(d).finally(() => {
          inFlight.delete(run);
          nudge();
        });
        inFlight.add(run);
      }
      if (claimed.length < room) return;
    }
  };

  function nudge() {
    if (stopped) return;
    if (pumping) {
      again = true;
      return;
    }
    pumping = pump().finally(() => {
      pumping = undefined;
      if (again) {
        again = false;
        nudge();
      }
    });
  }

  let poll: NodeJS.Timeout | undefined;
  let sweeper: NodeJS.Timeout | undefined;
  const dispatcher: WebhookDispatcher = {
    start() {
      if (!stopped) return;
      stopped = false;
      dispatchers.set(deps, dispatcher);
      poll = setInterval(nudge, opts.pollMs ?? 1000);
      poll.unref();
      sweeper = setInterval(() => void sweepDeliveryLog(deps), opts.sweepMs ?? 3_600_000);
      sweeper.unref();
      void sweepDeliveryLog(deps);
      nudge();
    },
    async stop() {
      stopped = true;
      if (dispatchers.get(deps) === dispatcher) dispatchers.delete(deps);
      clearInterval(poll);
      clearInterval(sweeper);
      timers.clear();
      await pumping;
      const grace = new Promise((resolve) => setTimeout(resolve, 1000).unref());
      await Promise.race([Promise.allSettled([...inFlight]), grace]);
    },
    nudge,
  };
  return dispatcher;
}

/** One attempt, logged and recorded; `onFailure` when it did not succeed (no answer, or not 2xx). */
async function sendAndRecord(deps: Deps, d: ClaimedDelivery, onFailure: () => void) {
  const outcome = await attemptDelivery(deps, d);
  deps.log.debug(
    { delivery: d.id, endpoint: d.endpointId, attempt: d.attempts, status: outcome.status, ms: outcome.latencyMs },
    'webhook attempt',
  );
  try {
    await recordAttempt(deps, d, outcome);
  } catch (error) {
    // The lease runs out and the delivery is attempted again (at least once).
    deps.log.warn({ delivery: d.id, err: (error as Error).message }, 'webhook: attempt not recorded');
  }
  if (outcome.status === null || outcome.status >= 300) onFailure();
}

/** Deletes the finished deliveries past the log's retention. Never throws. */
async function sweepDeliveryLog(deps: Deps) {
  const cutoff = new Date(deps.now() - deps.config.webhooks.logRetentionDays * 86_400_000);
  await deps.db
    .delete(webhookDeliveries)
    .where(and(lt(webhookDeliveries.finishedAt, cutoff)))
    .catch((error: Error) => deps.log.warn({ err: error.message }, 'webhook: log sweep failed'));
}

/** One-shot timers that do not keep the process alive, all cleared at once on stop. */
function createTimerSet() {
  const timers = new Set<NodeJS.Timeout>();
  return {
    later(ms: number, job: () => void) {
      const timer = setTimeout(() => {
        timers.delete(timer);
        job();
      }, ms);
      timer.unref();
      timers.add(timer);
    },
    clear() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}

/** The first retry's wait: when a failed attempt's row is due again, even at the jitter's high end. */
const soonestRetryMs = (deps: Deps) =>
  Math.max(10, Math.ceil(Math.min(...deps.config.webhooks.retrySchedule, 1) * 1000 * (1 + RETRY_JITTER)));
