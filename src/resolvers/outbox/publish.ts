import { eq, sql } from 'drizzle-orm';
import { eventOutbox } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { rowsOf } from './enqueue.js';
import { localRound, lockedRound, type Round } from './rounds.js';

/**
 * Publish after commit, through the `event_outbox` table (docs/chat.md "Publication"): enqueue.ts
 * writes the rows, rounds.ts publishes a key's round, claimed.ts a send's own rows, this file
 * the entry points (publishOutbox, drainOutbox).
 *
 * A chat operation writes its events as outbox rows in the transaction that changes the rows
 * they describe (`enqueueEvent`), each under an ORDER KEY: the visitor's for everything about its
 * conversations, the merchant's for its business hours, a webhook row's own order key. Once
 * committed it calls `publishOutbox` with its keys. A key is published by one publisher at a
 * time, cluster-wide: on PostgreSQL in a transaction holding the key's advisory lock
 * (`pg_try_advisory_xact_lock(OUTBOX_LOCK_SPACE, hashtext(key))`), which deletes the key's
 * pending rows, publishes them in `id` order and commits; keys are independent, so the
 * publication of one conversation never waits for another's, on this instance or any other.
 *
 * What holds:
 * - after commit: a publisher reads only committed rows;
 * - in order per key: rows of one key are written under the conversation's row lock, so their
 *   `id` order is their commit (= `seq`) order, and they leave in that order;
 * - at least once: a publish that fails rolls back, and an instance that dies mid-publication
 *   drops its connection, which rolls back too — the rows wait for the next publisher (the chat
 *   service drains rows older than a second on every instance). A row published and not yet
 *   deleted is published again (clients dedupe by `seq` / event id);
 * - a stalled instance does not hold a key for ever: PostgreSQL ends a session idle in the
 *   publisher's transaction for OUTBOX_LEASE_MS (then another instance publishes its rows), and a
 *   publisher that finds its lease over stops publishing before it sends anything more.
 *
 * A send skips the round (`publishClaimed`, "owned publication" in claimed.ts): when no earlier row of its
 * key is pending, its rows are written claimed and it publishes them itself after its commit;
 * rounds and drains leave a key while a claim on it stands (`claimed_until`).
 *
 * On the embedded database (one instance, one connection) a key's exclusion is this process's
 * alone, and no transaction is held while publishing: the rows are read, published, then deleted.
 * Rows on a `webhook:` channel are not published: the same round turns them into webhook
 * deliveries (src/resolvers/integration/webhooks/events.ts), which the dispatcher sends.
 */

/** Keys a drain or a full publication takes per pass. */
const KEYS_PER_PASS = 100;

/**
 * Rounds of `key` until its committed rows are out. While another instance holds the key, polls
 * up to `waitMs` (its round may have begun before this caller's commit); what is left then is
 * published by the drain. Never throws: a failure is counted and left to the drain.
 */
async function publishPending(deps: Deps, key: string, waitMs: number): Promise<number> {
  const deadline = Date.now() + waitMs;
  let total = 0;
  for (;;) {
    let round: Round;
    try {
      round = deps.database.kind === 'postgres' ? await lockedRound(deps, key) : await localRound(deps, key);
    } catch (error) {
      deps.metrics.eventDropped('publish_failed');
      deps.log.warn({ err: (error as Error).message }, 'outbox: publish failed, left for the drain');
      return total;
    }
    if (round === 'busy') {
      if (Date.now() >= deadline) return total;
      await new Promise((resolve) => setTimeout(resolve, 5));
      continue;
    }
    total += round.published;
    if (!round.more) return total;
  }
}

/**
 * Per database handle and key, one round at a time: a call that arrives while a round of its key
 * runs joins the single round that starts after it (its rows are committed before it calls, so
 * that round sees them). Keys never wait for each other.
 */
export const keyStates = new WeakMap<object, Map<string, { tail: Promise<number>; queued?: Promise<number> }>>();

function publishKey(deps: Deps, key: string, waitMs: number): Promise<number> {
  let states = keyStates.get(deps.db);
  if (!states) {
    states = new Map();
    keyStates.set(deps.db, states);
  }
  const known = states.get(key);
  if (known?.queued) return known.queued;
  const state = known ?? { tail: Promise.resolve(0) };
  const run: Promise<number> = state.tail.then(() => {
    state.queued = undefined; // started: a later call needs a round of its own
    return publishPending(deps, key, waitMs);
  });
  state.queued = run;
  state.tail = run;
  states.set(key, state);
  void run.then(() => {
    if (state.tail === run) states.delete(key);
  });
  return run;
}

/** Keys with pending rows (created before `before` when given), oldest first, `KEYS_PER_PASS` at most. */
async function pendingKeys(deps: Deps, before?: Date): Promise<string[]> {
  const rows = rowsOf<{ key: string }>(
    await deps.db.execute(sql`
      select order_key as key from event_outbox
      ${before ? sql`where created_at < ${before.toISOString()}` : sql``}
      group by order_key order by min(id) limit ${KEYS_PER_PASS}`),
  );
  return rows.map((r) => r.key);
}

/**
 * Publishes the committed outbox rows of `keys` (the caller's), each key on its own; without
 * keys, every pending key. Waits while another instance holds a key, up to `waitMs`; what is left
 * then is published by the periodic drain.
 */
export async function publishOutbox(
  deps: Deps,
  keys?: string | readonly string[],
  opts: { waitMs?: number } = {},
): Promise<void> {
  const waitMs = opts.waitMs ?? 2000;
  if (keys !== undefined) {
    await Promise.all((typeof keys === 'string' ? [keys] : [...new Set(keys)]).map((k) => publishKey(deps, k, waitMs)));
    return;
  }
  const seen = new Set<string>();
  for (;;) {
    const fresh = (await pendingKeys(deps)).filter((k) => !seen.has(k));
    if (fresh.length === 0) return;
    for (const k of fresh) seen.add(k);
    await Promise.all(fresh.map((k) => publishKey(deps, k, waitMs)));
  }
}

/**
 * The drain every instance runs periodically: publishes the keys with rows older than `minAgeMs`
 * (those whose writer crashed, stalled or failed to publish), skipping a key another publisher
 * holds. Returns how many rows it published.
 */
export async function drainOutbox(deps: Deps, minAgeMs = 1000): Promise<number> {
  let total = 0;
  const seen = new Set<string>();
  for (;;) {
    const keys = (await pendingKeys(deps, minAgeMs > 0 ? new Date(deps.now() - minAgeMs) : undefined)).filter(
      (k) => !seen.has(k),
    );
    if (keys.length === 0) return total;
    for (const k of keys) seen.add(k);
    const counts = await Promise.all(keys.map((k) => publishKey(deps, k, 0)));
    total += counts.reduce((a, b) => a + b, 0);
  }
}

/** Whether `key` has committed rows waiting (for tests and diagnostics). */
export async function pendingRows(deps: Deps, key: string): Promise<number> {
  const [row] = await deps.db
    .select({ n: sql<number>`count(*)::int` })
    .from(eventOutbox)
    .where(eq(eventOutbox.orderKey, key));
  return Number(row?.n ?? 0);
}
