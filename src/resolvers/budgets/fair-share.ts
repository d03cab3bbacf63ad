import { DomainError } from '../../errors.js';

/**
 * Fairness between merchants on a busy instance (issue 27, flood fairness; docs/security.md
 * "chat floods"). Budgets bound what one merchant's visitors may store; they do not bound the
 * share of an instance those sends take when the instance cannot keep up (a slow machine, a
 * flood from many tokens within their budgets): then every request waits in one line, and
 * another merchant's send waits behind the flood (BENCHMARKS.md, chat flood). So, while the
 * instance is busy, a merchant whose visitors made more than an equal share of the recent sends
 * of the merchants sending is refused at once (RATE_LIMITED, retry in 1 s) before any store
 * work, and the others go on. An instance that keeps up never refuses anything here, and a
 * merchant alone on a busy instance is never refused by it (there is nobody to be fair to).
 */

/** Whether the instance is busy now: requests wait before they are even read. */
export interface LoadSignal {
  busy(): boolean;
  stop(): void;
}

/** Length of one bucket of the share window; the window is this bucket and the previous one. */
export const SHARE_BUCKET_MS = 1000;
/** How often the event loop's lateness is sampled. */
const PROBE_INTERVAL_MS = 50;
/** The lateness kept: the mean over this many recent samples (≈ 0.5 s). */
const PROBE_SAMPLES = 10;

/**
 * Busy when the event loop ran, on average over the last ≈ 0.5 s, at least `thresholdMs` late:
 * a request arriving now would wait that long before being read, whatever it asks. A threshold
 * of 0 is busy all the time (shares always enforced).
 */
export function eventLoopLoad(thresholdMs: number): LoadSignal {
  if (thresholdMs <= 0) return { busy: () => true, stop: () => {} };
  const samples: number[] = [];
  let expected = performance.now() + PROBE_INTERVAL_MS;
  const timer = setInterval(() => {
    const now = performance.now();
    samples.push(Math.max(0, now - expected));
    if (samples.length > PROBE_SAMPLES) samples.shift();
    expected = now + PROBE_INTERVAL_MS;
  }, PROBE_INTERVAL_MS);
  timer.unref();
  return {
    busy: () => samples.length > 0 && samples.reduce((a, b) => a + b, 0) / samples.length >= thresholdMs,
    stop: () => clearInterval(timer),
  };
}

export interface FairShare {
  /**
   * Refuses a request of `tenant` (RATE_LIMITED, `Retry-After: 1`) when the instance is busy and,
   * over the recent window, the tenant asked for more than it got and for more than an equal
   * share, and got at least an equal share of what was done; counts the request either way.
   * Stores nothing.
   */
  admit(tenant: string): void;
  /**
   * What `admit` would answer now, without counting anything: the refusal when the tenant is over
   * its share (an adapter refuses with it before reading a request's body, and counts it by
   * calling `admit`), else undefined.
   */
  refusal(tenant: string): DomainError | undefined;
  /** Counts one unit of work of `tenant` done (an admitted send about to be stored). */
  record(tenant: string): void;
  /**
   * Whether `tenant` is over its share of a busy instance: it asks for more than an equal share
   * of the recent asks (refused or not: sends waiting in its line are asks too). Its work then
   * waits for the others' (the send gate starts it only when no other send runs); a tenant asking
   * no more than an equal share never waits on this account.
   */
  overShare(tenant: string): boolean;
}

/** Counts per tenant over a sliding window of two buckets (the current one and the one before). */
function windowedCounts(now: () => number) {
  let bucketStart = 0;
  let current = new Map<string, number>();
  let previous = new Map<string, number>();
  const roll = () => {
    const t = now();
    if (t - bucketStart < SHARE_BUCKET_MS) return;
    previous = t - bucketStart < 2 * SHARE_BUCKET_MS ? current : new Map();
    current = new Map();
    bucketStart = t - ((t - bucketStart) % SHARE_BUCKET_MS);
  };
  return {
    add(tenant: string) {
      roll();
      current.set(tenant, (current.get(tenant) ?? 0) + 1);
    },
    of: (tenant: string) => (current.get(tenant) ?? 0) + (previous.get(tenant) ?? 0),
    /** The tenants counted in the window and their total. */
    all() {
      roll();
      const tenants = new Set([...current.keys(), ...previous.keys()]);
      let total = 0;
      for (const t of tenants) total += (current.get(t) ?? 0) + (previous.get(t) ?? 0);
      return { tenants: tenants.size, total };
    },
  };
}

/**
 * Max-min fairness, approximately: a tenant asking for no more than an equal share gets all it
 * asks; one asking for more than it gets (refused meanwhile, by a budget or its line) and more
 * than an equal share of the asks is refused whenever it already got as much as an equal share
 * of what the instance did. So a flood from one merchant gets about what the others get, and a
 * merchant that got everything it asked (one message at a time) is never refused on its account.
 */
export function createFairShare(o: { load: LoadSignal; now: () => number; what: string }): FairShare {
  const asked = windowedCounts(o.now);
  const done = windowedCounts(o.now);
  const refusal = (tenant: string) => {
    if (!o.load.busy()) return undefined;
    const demand = asked.all();
    if (demand.tenants < 2) return undefined; // alone: nobody to be fair to
    const asks = asked.of(tenant);
    if (asks * demand.tenants <= demand.total) return undefined; // asks no more than its share
    const got = done.of(tenant);
    if (got >= asks) return undefined; // got all it asked: a tenant never refused is never held back
    if (got === 0 || got * demand.tenants < done.all().total) return undefined; // got less than its share
    return new DomainError(
      'RATE_LIMITED',
      `The instance is busy and ${o.what} have more than their share of it: retry in 1 s`,
      1,
    );
  };
  return {
    admit(tenant) {
      // Judged on what came before this request, then counted whatever the answer.
      const refused = refusal(tenant);
      asked.add(tenant);
      if (refused) throw refused;
    },
    refusal,
    record: (tenant) => done.add(tenant),
    overShare(tenant) {
      if (!o.load.busy()) return false;
      const demand = asked.all();
      if (demand.tenants < 2) return false;
      return asked.of(tenant) * demand.tenants > demand.total;
    },
  };
}
