import { runStatement } from '../../db/statement.js';
import type { Deps } from '../../deps.js';
import { nudgeWebhooks } from '../integration/webhooks/dispatcher.js';
import { createDeliveries, isWebhookOutboxRow, WEBHOOK_CHANNEL_PREFIX } from '../integration/webhooks/events.js';
import { keyStates } from './publish.js';
import { type PendingRow, publishRows } from './rounds.js';

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

/**
 * The claimed rows ($1) deleted unless a merchant of their webhook rows ($2) has an enabled
 * endpoint; answers how many went. Statements of fixed text, prepared once (db/statement.ts).
 */
const DELETE_UNLESS_ENDPOINTS = `
  with gone as (
    delete from event_outbox where id = any($1::bigint[]) and not exists (
      select 1 from webhook_endpoints where merchant_id = any($2::text[]) and not disabled)
    returning id)
  select count(*)::int as n from gone`;

async function publishClaimedRows(deps: Deps, rows: readonly ClaimedRow[], began: number) {
  const ids = rows.map((r) => r.id);
  try {
    await publishRows(deps, rows as PendingRow[], began);
  } catch (error) {
    deps.metrics.eventDropped('publish_failed');
    deps.log.warn({ err: (error as Error).message }, 'outbox: publish failed, left for the next round');
    // Released: the next round of the key (any instance's, or the drain) publishes them.
    await runStatement(deps.db, 'update event_outbox set claimed_until = null where id = any($1::bigint[])', [
      ids,
    ]).catch(() => undefined);
    return;
  }
  try {
    const webhooks = rows.filter(isWebhookOutboxRow);
    if (webhooks.length === 0) {
      await runStatement(deps.db, 'delete from event_outbox where id = any($1::bigint[])', [ids]);
      return;
    }
    // No enabled endpoint for the merchant (the usual case): the rows go, in one statement.
    const merchants = [...new Set(webhooks.map((r) => r.channel.slice(WEBHOOK_CHANNEL_PREFIX.length)))];
    const [gone] = await runStatement<{ n: number }>(deps.db, DELETE_UNLESS_ENDPOINTS, [ids, merchants]);
    if (Number(gone?.n ?? 0) > 0) return;
    // Endpoints to deliver to: the webhook rows become deliveries in the commit that deletes them.
    let deliveries = 0;
    await deps.db.transaction(async (tx) => {
      const taken = (
        await runStatement<PendingRow>(
          tx,
          'delete from event_outbox where id = any($1::bigint[]) returning id, channel, event, data',
          [ids],
        )
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
