import { asc, inArray, lt, sql } from 'drizzle-orm';
import type { Db } from '../db/client.js';
import { eventOutbox } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { type EventData, type EventName, toWire } from './event-catalog.js';
import { nudgeWebhooks } from './integration/webhooks/dispatcher.js';
import { createDeliveries, isWebhookOutboxRow } from './integration/webhooks/events.js';

/**
 * Publish after commit, through the `event_outbox` table. A chat operation writes its events
 * as outbox rows in the transaction that changes the rows they describe (`enqueueEvent`), then,
 * once committed, calls `publishOutbox`: under a cluster-wide advisory lock it publishes the
 * pending rows in id order and deletes them in the same transaction. So an event is never seen
 * before its rows are committed, events of one conversation go out in commit (= seq) order on
 * every channel, and a crash between commit and publish leaves the rows for the next drain of
 * any instance (the chat service drains periodically) — at least once, in order; a row published
 * but not yet deleted when an instance dies is published again (clients dedupe by `seq` / id).
 * Rows on a `webhook:` channel are not published: the same round turns them into webhook
 * deliveries (src/resolvers/integration/webhooks/events.ts), which the dispatcher sends.
 */

export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/** An arbitrary constant naming the outbox publisher among PostgreSQL advisory locks. */
const OUTBOX_LOCK_ID = 7_302_104_222;
/** Rows published per locked round. */
const BATCH = 200;

/** The outbox row of an event on a channel (several rows go in one insert with `enqueueRows`). */
export const outboxRow = <N extends EventName>(channel: string, name: N, data: EventData<N>): OutboxRow => ({
  channel,
  event: name,
  data: toWire(name, data) as object,
});
export type OutboxRow = typeof eventOutbox.$inferInsert;

/** Writes an event to the outbox inside `tx`; it is published once `tx` has committed. */
export async function enqueueEvent<N extends EventName>(tx: Tx, channel: string, name: N, data: EventData<N>) {
  await tx.insert(eventOutbox).values(outboxRow(channel, name, data));
}

/** Writes several outbox rows in one statement, in the given order (their ids follow it). */
export async function enqueueRows(tx: Tx, rows: OutboxRow[]) {
  if (rows.length > 0) await tx.insert(eventOutbox).values(rows);
}

/** `db.execute()` answers `{rows}` on PGlite and an array on postgres.js. */
export const rowsOf = <T>(result: unknown): T[] =>
  Array.isArray(result) ? (result as T[]) : ((result as { rows: T[] }).rows ?? []);

/**
 * One locked round: publishes up to BATCH pending rows in order and deletes them. `busy` when
 * another publisher holds the lock (its round will or did publish what is committed).
 */
async function publishRound(deps: Deps, minAgeMs: number): Promise<'busy' | number> {
  let deliveries = 0;
  const result = await deps.db.transaction(async (tx): Promise<'busy' | number> => {
    const [lock] = rowsOf<{ ok: boolean }>(
      await tx.execute(sql`select pg_try_advisory_xact_lock(${OUTBOX_LOCK_ID}) as ok`),
    );
    if (!lock?.ok) return 'busy';
    const rows = await tx
      .select()
      .from(eventOutbox)
      .where(minAgeMs > 0 ? lt(eventOutbox.createdAt, new Date(deps.now() - minAgeMs)) : undefined)
      .orderBy(asc(eventOutbox.id))
      .limit(BATCH);
    if (rows.length === 0) return 0;
    // Deliveries first: a database failure there must not follow publishes already made.
    const webhooks = rows.filter(isWebhookOutboxRow);
    if (webhooks.length > 0) deliveries = await createDeliveries(tx, webhooks, deps.now());
    // A failed publish throws: the transaction rolls back and the rows wait for the next drain.
    for (const row of rows) if (!isWebhookOutboxRow(row)) await deps.bus.publish(row.channel, row.event, row.data);
    await tx.delete(eventOutbox).where(
      inArray(
        eventOutbox.id,
        rows.map((r) => r.id),
      ),
    );
    return rows.length;
  });
  // Committed: this instance's dispatcher sends them now (the others find them on their poll).
  if (deliveries > 0) nudgeWebhooks(deps);
  return result;
}

/**
 * Per instance, one publisher at a time: a call that arrives while a round runs joins the single
 * round that starts after it (its rows are committed before it calls, so that round sees them).
 * Without this, concurrent sends on one instance took turns at the advisory lock, each polling
 * until the others were done, and published one by one instead of in batches.
 */
const publishers = new WeakMap<Deps, { running?: Promise<void>; next?: Promise<void> }>();

/**
 * Publishes every committed outbox row (the caller's included). Waits while another instance
 * holds the lock, up to `waitMs`; what is left then is published by the periodic drain.
 */
export function publishOutbox(deps: Deps, opts: { waitMs?: number } = {}): Promise<void> {
  const state = publishers.get(deps) ?? {};
  publishers.set(deps, state);
  const start = () => {
    const run = publishPending(deps, opts.waitMs ?? 2000).finally(() => {
      if (state.running === run) state.running = undefined;
    });
    state.running = run;
    return run;
  };
  if (!state.running) return start();
  state.next ??= state.running.then(() => {
    state.next = undefined;
    return start();
  });
  return state.next;
}

async function publishPending(deps: Deps, waitMs: number): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    let result: 'busy' | number;
    try {
      result = await publishRound(deps, 0);
    } catch (error) {
      deps.metrics.eventDropped('publish_failed');
      deps.log.warn({ err: (error as Error).message }, 'outbox: publish failed, left for the drain');
      return;
    }
    if (result === 'busy') {
      if (Date.now() > deadline) return;
      await new Promise((resolve) => setTimeout(resolve, 5));
      continue;
    }
    if (result < BATCH) return;
  }
}

/**
 * The drain every instance runs periodically: publishes rows older than `minAgeMs` (those whose
 * writer crashed or failed to publish). Returns how many it published.
 */
export async function drainOutbox(deps: Deps, minAgeMs = 1000): Promise<number> {
  let total = 0;
  for (;;) {
    const result = await publishRound(deps, minAgeMs);
    if (result === 'busy') return total;
    total += result;
    if (result < BATCH) return total;
  }
}
