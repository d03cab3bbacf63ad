import type { Deps } from '../deps.js';
import { closeIdleConversations } from './conversations/closing.js';
import { drainAllQueues } from './conversations/queue.js';
import { handOffOverdueBots } from './integration/bots/handoff.js';
import { drainOutbox } from './outbox/publish.js';

/**
 * The chat's background work on one instance, started and stopped by the composition root:
 * the outbox drain (publishes what a crashed or failed writer left), the idle-close sweep and the
 * queue-drain retry (the safety net behind the drains triggered by closes and presence changes),
 * and the bots' answer-deadline sweep (docs/integration.md "Bots").
 * Every instance runs it; each job is safe to run concurrently on several instances.
 */
export interface ChatService {
  start(): void;
  /** Stops the timers and waits for a job in progress. */
  stop(): Promise<void>;
}

export interface ChatServiceOptions {
  /** @default 1000 */
  outboxDrainMs?: number;
  /** @default 30000 */
  idleSweepMs?: number;
  /** @default 5000 */
  queueRetryMs?: number;
  /** @default 5000 */
  botSweepMs?: number;
}

export function createChatService(deps: Deps, opts: ChatServiceOptions = {}): ChatService {
  const timers: NodeJS.Timeout[] = [];
  const running = new Set<Promise<unknown>>();
  const every = (ms: number, what: string, job: () => Promise<unknown>) => {
    let busy = false;
    const timer = setInterval(() => {
      if (busy) return; // a slow run is not stacked
      busy = true;
      const run = job()
        .catch((error: unknown) => deps.log.warn({ err: (error as Error).message }, `chat: ${what} failed`))
        .finally(() => {
          busy = false;
          running.delete(run);
        });
      running.add(run);
    }, ms);
    timer.unref();
    timers.push(timer);
  };
  return {
    start() {
      if (timers.length) return;
      every(opts.outboxDrainMs ?? 1000, 'outbox drain', () => drainOutbox(deps));
      every(opts.idleSweepMs ?? 30_000, 'idle sweep', () => closeIdleConversations(deps));
      every(opts.queueRetryMs ?? 5000, 'queue drain', () => drainAllQueues(deps));
      every(opts.botSweepMs ?? 5000, 'bot hand-off sweep', () => handOffOverdueBots(deps));
    },
    async stop() {
      for (const timer of timers.splice(0)) clearInterval(timer);
      await Promise.allSettled([...running]);
    },
  };
}
