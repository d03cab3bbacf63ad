import type { Db } from '../../db/client.js';
import { eventOutbox } from '../../db/schema.js';
import { type EventData, type EventName, toWire } from '../event-catalog.js';

/** Writing events to the outbox, in the transaction of the change they describe (publish.ts publishes them). */

export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

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

/** The outbox rows of one event on several channels, in their order. */
export const outboxRows = <N extends EventName>(
  key: string,
  channels: Iterable<string>,
  name: N,
  data: EventData<N>,
): OutboxRow[] => [...channels].map((channel) => outboxRow(key, channel, name, data));

/** Writes several outbox rows in one statement, in the given order (their ids follow it). */
export async function enqueueRows(tx: Tx, rows: OutboxRow[]) {
  if (rows.length > 0) await tx.insert(eventOutbox).values(rows);
}

/** `db.execute()` answers `{rows}` on PGlite and an array on postgres.js. */
export const rowsOf = <T>(result: unknown): T[] =>
  Array.isArray(result) ? (result as T[]) : ((result as { rows: T[] }).rows ?? []);
