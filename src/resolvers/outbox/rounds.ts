import { asc, eq, inArray, sql } from 'drizzle-orm';
import { eventOutbox } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { nudgeWebhooks } from '../integration/webhooks/dispatcher.js';
import {
  createDeliveries,
  isWebhookOutboxRow,
  WEBHOOK_CHANNEL_PREFIX,
  type WebhookEndpointRef,
} from '../integration/webhooks/events.js';
import { rowsOf, type Tx } from './enqueue.js';

/** A publication round of one key (publish.ts): on PostgreSQL under the key's lock and lease, or on the embedded database. */

/** An arbitrary constant naming the outbox's per-key advisory locks (the two-key form: this, hashtext(key)). */
export const OUTBOX_LOCK_SPACE = 7302;
/** Rows of one key published per round. */
const BATCH = 200;
/** How long a publisher may hold a key (see above). */
export const OUTBOX_LEASE_MS = 5000;
/** A publisher stops this long before its lease ends: what it has not sent by then, another sends. */
export const LEASE_MARGIN_MS = 1000;

/** A `json_agg` column: parsed by PGlite, a string from postgres.js through drizzle, null when empty. */
const jsonRows = <T>(value: unknown): T[] => (typeof value === 'string' ? JSON.parse(value) : (value ?? [])) as T[];

export interface PendingRow {
  id: number;
  channel: string;
  event: string;
  data: unknown;
}

export type Round = 'busy' | { published: number; more: boolean };

/** Publishes `rows` in order per channel (channels at once); stops when the lease is about over. */
export async function publishRows(deps: Deps, rows: PendingRow[], began: number) {
  const notAfter = began + OUTBOX_LEASE_MS - LEASE_MARGIN_MS;
  const byChannel = new Map<string, PendingRow[]>();
  for (const row of rows) {
    if (isWebhookOutboxRow(row)) continue;
    const list = byChannel.get(row.channel) ?? [];
    list.push(row);
    byChannel.set(row.channel, list);
  }
  const results = await Promise.allSettled(
    [...byChannel.values()].map(async (list) => {
      for (const row of list) await deps.bus.publish(row.channel, row.event, row.data, { notAfter });
    }),
  );
  // Every channel is done before the caller rolls back: nothing of this round is sent after it.
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}

/**
 * One round of `key` on PostgreSQL: lock, take and delete its pending rows, publish, commit.
 * When PostgreSQL ends the session under it (the lease), the transaction's promise rejects at
 * once while the round may still be stalled; the round then never finishes its callback, as
 * postgres.js would write the rollback on the closed socket and throw outside any promise.
 */
export async function lockedRound(deps: Deps, key: string): Promise<Round> {
  let deliveries = 0;
  let lost = false;
  const began = Date.now();
  const run = deps.db.transaction(async (tx): Promise<Round> => {
    const settled = await roundBody(tx).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    if (lost) return new Promise<never>(() => {});
    if ('error' in settled) throw settled.error;
    return settled.value;
  });
  run.catch(() => {
    lost = true;
  });
  const round = await run;
  // Committed: this instance's dispatcher sends them now (the others find them on their poll).
  if (deliveries > 0) nudgeWebhooks(deps);
  return round;

  async function roundBody(tx: Tx): Promise<Round> {
    // One statement: the key's lock, the lease (a session idle in this transaction that long is
    // ended by PostgreSQL, which releases the lock and restores the rows), and the rows. Rows a
    // concurrent publisher deleted and committed are skipped by the delete.
    const [taken] = rowsOf<{ ok: boolean; picked: number; rows: unknown; endpoints: unknown }>(
      await tx.execute(sql`
        with lease as materialized (
          select pg_try_advisory_xact_lock(${OUTBOX_LOCK_SPACE}::int, hashtext(${key})) as ok,
                 set_config('idle_in_transaction_session_timeout', ${String(OUTBOX_LEASE_MS)}, true) as timeout
        ), owned as materialized (
          select exists (
            select 1 from event_outbox where order_key = ${key} and claimed_until > clock_timestamp()
          ) as claimed
        ), picked as (
          select id from event_outbox
          where order_key = ${key} and (select ok from lease) and not (select claimed from owned)
          order by id limit ${BATCH}
        ), gone as (
          delete from event_outbox where id in (select id from picked) returning id, channel, event, data
        )
        select (select ok from lease) and not (select claimed from owned) as ok,
               (select count(*)::int from picked) as picked,
               (select json_agg(gone order by gone.id) from gone) as rows,
               (select json_agg(json_build_object('id', e.id, 'merchantId', e.merchant_id, 'events', e.events))
                  from webhook_endpoints e
                  where not e.disabled and e.merchant_id in (
                    select substr(g.channel, ${WEBHOOK_CHANNEL_PREFIX.length + 1}) from gone g
                    where starts_with(g.channel, ${WEBHOOK_CHANNEL_PREFIX}))) as endpoints`),
    );
    if (!taken?.ok) return 'busy';
    const rows = jsonRows<PendingRow>(taken.rows);
    // Deliveries first: a database failure there must not follow publishes already made.
    const webhooks = rows.filter(isWebhookOutboxRow);
    if (webhooks.length > 0)
      deliveries = await createDeliveries(tx, webhooks, deps.now(), jsonRows<WebhookEndpointRef>(taken.endpoints));
    // A failed publish throws: the transaction rolls back and the rows wait for the next round.
    await publishRows(deps, rows, began);
    return { published: rows.length, more: Number(taken.picked) === BATCH };
  }
}

/** One round of `key` on the embedded database: read, publish, then delete (one instance, one connection). */
export async function localRound(deps: Deps, key: string): Promise<Round> {
  const began = Date.now();
  const rows = await deps.db
    .select({
      id: eventOutbox.id,
      channel: eventOutbox.channel,
      event: eventOutbox.event,
      data: eventOutbox.data,
      claimed: sql<boolean>`${eventOutbox.claimedUntil} is not null and ${eventOutbox.claimedUntil} > clock_timestamp()`,
    })
    .from(eventOutbox)
    .where(eq(eventOutbox.orderKey, key))
    .orderBy(asc(eventOutbox.id))
    .limit(BATCH);
  if (rows.length === 0) return { published: 0, more: false };
  if (rows.some((r) => r.claimed)) return 'busy';
  await publishRows(deps, rows, began);
  const webhooks = rows.filter(isWebhookOutboxRow);
  let deliveries = 0;
  await deps.db.transaction(async (tx) => {
    if (webhooks.length > 0) deliveries = await createDeliveries(tx, webhooks, deps.now());
    await tx.delete(eventOutbox).where(
      inArray(
        eventOutbox.id,
        rows.map((r) => r.id),
      ),
    );
  });
  if (deliveries > 0) nudgeWebhooks(deps);
  return { published: rows.length, more: rows.length === BATCH };
}
