import { asc, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../db/client.js';
import { eventOutbox } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { type EventData, type EventName, toWire } from './event-catalog.js';
import { nudgeWebhooks } from './integration/webhooks/dispatcher.js';
import {
  createDeliveries,
  isWebhookOutboxRow,
  WEBHOOK_CHANNEL_PREFIX,
  type WebhookEndpointRef,
} from './integration/webhooks/events.js';

/**
 * Publish after commit, through the `event_outbox` table (docs/chat.md "Publication").
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
 * A send skips the round (`publishClaimed`, "owned publication" below): when no earlier row of its
 * key is pending, its rows are written claimed and it publishes them itself after its commit;
 * rounds and drains leave a key while a claim on it stands (`claimed_until`).
 *
 * On the embedded database (one instance, one connection) a key's exclusion is this process's
 * alone, and no transaction is held while publishing: the rows are read, published, then deleted.
 * Rows on a `webhook:` channel are not published: the same round turns them into webhook
 * deliveries (src/resolvers/integration/webhooks/events.ts), which the dispatcher sends.
 */

export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/** An arbitrary constant naming the outbox's per-key advisory locks (the two-key form: this, hashtext(key)). */
export const OUTBOX_LOCK_SPACE = 7302;
/** Rows of one key published per round. */
const BATCH = 200;
/** Keys a drain or a full publication takes per pass. */
const KEYS_PER_PASS = 100;
/** How long a publisher may hold a key (see above). */
export const OUTBOX_LEASE_MS = 5000;
/** A publisher stops this long before its lease ends: what it has not sent by then, another sends. */
const LEASE_MARGIN_MS = 1000;

/** The order key of everything about a visitor's conversations. */
export const visitorKey = (visitorId: string) => `visitor:${visitorId}`;
/** The order key of a merchant's own events (business hours). */
export const merchantKey = (merchantId: string) => `merchant:${merchantId}`;

/** Writes an event to the outbox inside `tx` under `key`; it is published once `tx` has committed. */
export async function enqueueEvent<N extends EventName>(
  tx: Tx,
  key: string,
  channel: string,
  name: N,
  data: EventData<N>,
) {
  await tx.insert(eventOutbox).values(outboxRow(key, channel, name, data));
}

/** The outbox row of an event on a channel, under `key` (several rows go in one insert with `enqueueRows`). */
export const outboxRow = <N extends EventName>(
  key: string,
  channel: string,
  name: N,
  data: EventData<N>,
): OutboxRow => ({
  orderKey: key,
  channel,
  event: name,
  data: toWire(name, data) as object,
});
export type OutboxRow = typeof eventOutbox.$inferInsert;

/** Writes several outbox rows in one statement, in the given order (their ids follow it). */
export async function enqueueRows(tx: Tx, rows: OutboxRow[]) {
  if (rows.length > 0) await tx.insert(eventOutbox).values(rows);
}

/** `db.execute()` answers `{rows}` on PGlite and an array on postgres.js. */
export const rowsOf = <T>(result: unknown): T[] =>
  Array.isArray(result) ? (result as T[]) : ((result as { rows: T[] }).rows ?? []);

/** A `json_agg` column: parsed by PGlite, a string from postgres.js through drizzle, null when empty. */
const jsonRows = <T>(value: unknown): T[] => (typeof value === 'string' ? JSON.parse(value) : (value ?? [])) as T[];

interface PendingRow {
  id: number;
  channel: string;
  event: string;
  data: unknown;
}

type Round = 'busy' | { published: number; more: boolean };

/** Publishes `rows` in order per channel (channels at once); stops when the lease is about over. */
async function publishRows(deps: Deps, rows: PendingRow[], began: number) {
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
async function lockedRound(deps: Deps, key: string): Promise<Round> {
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
async function localRound(deps: Deps, key: string): Promise<Round> {
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
const keyStates = new WeakMap<object, Map<string, { tail: Promise<number>; queued?: Promise<number> }>>();

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

/**
 * OWNED PUBLICATION: the rows a send wrote with a claim (`claimedRows`), published by the sending
 * instance right after its commit, without a publication round. The send's transaction claimed
 * them only when no earlier row of their key was pending, read under the conversation's row lock:
 * nothing of the key waits before them, and every other publisher (a round on any instance, the
 * drain) leaves the key while the claim stands. So: after commit (called once committed), in
 * order (the key's earlier rows are out; its later rows wait for the claim, or for this
 * instance's chain of the key), at least once (the rows are deleted only once published; on a
 * failure the claim is released and a round or the drain publishes them). `began` is when the
 * send took its claim: like a round's lease, nothing is sent past `began + OUTBOX_LEASE_MS -
 * LEASE_MARGIN_MS`, when another publisher may take the key over.
 */
export interface ClaimedRow {
  id: number;
  channel: string;
  event: string;
  data: unknown;
}

export function publishClaimed(deps: Deps, key: string, rows: readonly ClaimedRow[], began: number): Promise<void> {
  let states = keyStates.get(deps.db);
  if (!states) {
    states = new Map();
    keyStates.set(deps.db, states);
  }
  const state = states.get(key) ?? { tail: Promise.resolve(0) };
  const run = publishClaimedRows(deps, rows, began);
  // A later call of the key on this instance runs after this one (its rows wait for the claim).
  const tail = Promise.all([state.tail, run]).then(() => 0);
  state.tail = tail;
  state.queued = undefined;
  states.set(key, state);
  const settled = states;
  void tail.then(() => {
    if (state.tail === tail) settled.delete(key);
  });
  return run;
}

async function publishClaimedRows(deps: Deps, rows: readonly ClaimedRow[], began: number) {
  const ids = sql.join(
    rows.map((r) => sql`${r.id}`),
    sql`, `,
  );
  try {
    await publishRows(deps, rows as PendingRow[], began);
  } catch (error) {
    deps.metrics.eventDropped('publish_failed');
    deps.log.warn({ err: (error as Error).message }, 'outbox: publish failed, left for the next round');
    // Released: the next round of the key (any instance's, or the drain) publishes them.
    await deps.db
      .execute(sql`update event_outbox set claimed_until = null where id in (${ids})`)
      .catch(() => undefined);
    return;
  }
  try {
    const webhooks = rows.filter(isWebhookOutboxRow);
    if (webhooks.length === 0) {
      await deps.db.execute(sql`delete from event_outbox where id in (${ids})`);
      return;
    }
    // No enabled endpoint for the merchant (the usual case): the rows go, in one statement.
    const merchants = sql.join(
      [...new Set(webhooks.map((r) => r.channel.slice(WEBHOOK_CHANNEL_PREFIX.length)))].map((m) => sql`${m}`),
      sql`, `,
    );
    const [gone] = rowsOf<{ n: number }>(
      await deps.db.execute(sql`
        with gone as (
          delete from event_outbox where id in (${ids}) and not exists (
            select 1 from webhook_endpoints where merchant_id in (${merchants}) and not disabled)
          returning id)
        select count(*)::int as n from gone`),
    );
    if (Number(gone?.n ?? 0) > 0) return;
    // Endpoints to deliver to: the webhook rows become deliveries in the commit that deletes them.
    let deliveries = 0;
    await deps.db.transaction(async (tx) => {
      const taken = rowsOf<PendingRow>(
        await tx.execute(sql`delete from event_outbox where id in (${ids}) returning id, channel, event, data`),
      ).sort((a, b) => Number(a.id) - Number(b.id));
      const hooks = taken.filter(isWebhookOutboxRow);
      if (hooks.length > 0) deliveries = await createDeliveries(tx, hooks, deps.now());
    });
    if (deliveries > 0) nudgeWebhooks(deps);
  } catch (error) {
    // Published, not deleted: once the claim ends, a round publishes them again (clients dedupe).
    deps.log.warn({ err: (error as Error).message }, 'outbox: published rows not deleted, left for the drain');
  }
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
