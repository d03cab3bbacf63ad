import { DomainError } from '../../errors.js';

/**
 * A bounded pool of expensive work (image re-encoding): at most `slots` jobs at once on the
 * instance and `slotsPerTenant` per merchant, so one tenant's uploads can never occupy every
 * slot while another's wait. A job that finds no slot waits in line (first come, first served,
 * skipping a tenant already at its share) for at most `queueTimeoutMs`, and at most
 * `queuePerTenant` jobs of a tenant wait at once; past either, the job is refused with
 * SERVICE_UNAVAILABLE and a `Retry-After` (REST 503, code 1503): the server is busy, the request
 * was fine and can be sent again.
 */
export interface WorkPoolOptions {
  slots: number;
  slotsPerTenant: number;
  queuePerTenant: number;
  queueTimeoutMs: number;
  /** What the refusal says is busy, e.g. "Image processing". */
  what: string;
  /**
   * The refusal's code: SERVICE_UNAVAILABLE (503, 1503: the instance is busy) by default;
   * RATE_LIMITED (429, 1429) where the line is a tenant's own budget (chat sends).
   */
  refusal?: 'SERVICE_UNAVAILABLE' | 'RATE_LIMITED';
  /**
   * A tenant deferred now (chat sends: a merchant over its share of a busy instance) starts a job
   * only when no job of anyone runs: the others never wait behind its jobs, it gets what is left.
   */
  deferred?: (tenant: string) => boolean;
}

export interface WorkPool {
  /**
   * Runs `work` once a slot of the pool (and of `tenant`) is free; refuses when the line is too
   * long or too slow. A `signal` that aborts while the job waits takes it out of the line.
   */
  run<T>(tenant: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T>;
  /** Jobs running and waiting now (metrics, tests). */
  load(): { running: number; waiting: number };
}

interface Waiter {
  tenant: string;
  start: () => void;
  timer: NodeJS.Timeout;
}

export function createWorkPool(o: WorkPoolOptions): WorkPool {
  let running = 0;
  const runningOf = new Map<string, number>();
  const waitingOf = new Map<string, number>();
  const line: Waiter[] = [];
  const retryAfter = Math.max(1, Math.ceil(o.queueTimeoutMs / 1000));
  const busy = (why: string) =>
    new DomainError(
      o.refusal ?? 'SERVICE_UNAVAILABLE',
      `${o.what} is busy (${why}), retry in ${retryAfter} s`,
      retryAfter,
    );

  const fits = (tenant: string) =>
    running < o.slots && (runningOf.get(tenant) ?? 0) < o.slotsPerTenant && !(running > 0 && o.deferred?.(tenant));
  const take = (tenant: string) => {
    running++;
    addCount(runningOf, tenant, 1);
  };
  const release = (tenant: string) => {
    running--;
    addCount(runningOf, tenant, -1);
    // The oldest waiter whose tenant has room goes next (a tenant at its share does not block the line).
    for (let i = 0; i < line.length && running < o.slots; i++) {
      const w = line[i] as Waiter;
      if (!fits(w.tenant)) continue;
      line.splice(i, 1);
      i--;
      clearTimeout(w.timer);
      addCount(waitingOf, w.tenant, -1);
      take(w.tenant);
      w.start();
    }
  };

  return {
    async run<T>(tenant: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
      signal?.throwIfAborted();
      if (fits(tenant)) {
        take(tenant);
      } else {
        if ((waitingOf.get(tenant) ?? 0) >= o.queuePerTenant) throw busy(`${o.queuePerTenant} jobs already waiting`);
        await waitInLine({ line, waitingOf, tenant, signal }, o.queueTimeoutMs, () =>
          busy(`no slot within ${o.queueTimeoutMs} ms`),
        );
      }
      try {
        return await work();
      } finally {
        release(tenant);
      }
    },
    load: () => ({ running, waiting: line.length }),
  };
}

/** Adds `n` to a tenant's count; a tenant at zero is forgotten. */
function addCount(map: Map<string, number>, tenant: string, n: number) {
  const v = (map.get(tenant) ?? 0) + n;
  if (v === 0) map.delete(tenant);
  else map.set(tenant, v);
}

/**
 * Joins the line and resolves when a released slot starts it; leaves the line and rejects when
 * `timeoutMs` pass first (with `timedOut()`) or the signal aborts (with its reason).
 */
function waitInLine(
  {
    line,
    waitingOf,
    tenant,
    signal,
  }: { line: Waiter[]; waitingOf: Map<string, number>; tenant: string; signal?: AbortSignal },
  timeoutMs: number,
  timedOut: () => unknown,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const leave = (error: unknown) => {
      const at = line.indexOf(waiter);
      if (at < 0) return;
      line.splice(at, 1);
      clearTimeout(waiter.timer);
      addCount(waitingOf, tenant, -1);
      signal?.removeEventListener('abort', aborted);
      reject(error);
    };
    const aborted = () => leave(signal?.reason);
    const waiter: Waiter = {
      tenant,
      start: () => {
        signal?.removeEventListener('abort', aborted);
        resolve();
      },
      timer: setTimeout(() => leave(timedOut()), timeoutMs),
    };
    waiter.timer.unref();
    line.push(waiter);
    addCount(waitingOf, tenant, 1);
    signal?.addEventListener('abort', aborted, { once: true });
  });
}
