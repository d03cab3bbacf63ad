import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { and, eq, sql } from 'drizzle-orm';
import { webhookDeliveries, webhookEndpoints } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { rowsOf, type Tx } from '../../outbox/enqueue.js';
import { checkedLookup, isPrivateAddress, PrivateAddressError } from './addresses.js';
import { webhookHeaders } from './signing.js';

/**
 * One attempt of one delivery, on any instance. `claimDeliveries` takes due rows with
 * `FOR UPDATE SKIP LOCKED`, only the oldest pending row of each (endpoint, order key) — so a
 * conversation's events go out in order per endpoint while other conversations and endpoints
 * proceed — within each endpoint's concurrency and circuit; a claimed row's `next_attempt_at`
 * moves past the attempt's timeout (its lease), so if the instance dies the row is due again.
 * `attemptDelivery` sends it outside any transaction and `recordAttempt` writes the outcome.
 */

/** Failed attempts in a row that open an endpoint's circuit. */
export const CIRCUIT_THRESHOLD = 5;
/** The longest pause of an open circuit. */
const CIRCUIT_MAX_MS = 5 * 60_000;
/** The longest wait a `Retry-After` may ask for. */
const RETRY_AFTER_MAX_MS = 24 * 3600_000;
/** Bytes of a receiver's answer kept for the log. */
const ERROR_BODY_MAX = 200;

export interface ClaimedDelivery {
  seq: number;
  id: string;
  endpointId: string;
  url: string;
  body: string;
  attempts: number;
  secrets: string[];
}

/** Claims up to `limit` due deliveries for this instance to send. */
export async function claimDeliveries(deps: Deps, limit: number): Promise<ClaimedDelivery[]> {
  const now = deps.now();
  const nowIso = new Date(now).toISOString();
  // The lease outlasts the attempt's timeout: a row is taken again only when its sender is gone.
  const lease = new Date(now + 2 * deps.config.webhooks.timeoutMs + 1000);
  const { concurrency } = deps.config.webhooks;
  return deps.db.transaction(async (tx) => {
    const due = await lockDueDeliveries(tx, nowIso, concurrency, limit * 4);
    if (due.length === 0) return [];
    const endpoints = await lockEndpoints(tx, [...new Set(due.map((d) => d.endpoint_id))].sort(), nowIso);
    const room = new Map(
      endpoints.map((e) => {
        // A circuit that was open lets one probe through before the endpoint gets its full concurrency.
        const max = e.consecutive_failures >= CIRCUIT_THRESHOLD ? 1 : concurrency;
        return [e.id, { endpoint: e, free: max - Number(e.in_flight) }];
      }),
    );
    const taken: number[] = [];
    for (const d of due) {
      const slot = room.get(d.endpoint_id);
      if (!slot || slot.free <= 0 || taken.length >= limit) continue;
      slot.free -= 1;
      taken.push(Number(d.seq));
    }
    if (taken.length === 0) return [];
    const claimed = await tx
      .update(webhookDeliveries)
      .set({ attempts: sql`${webhookDeliveries.attempts} + 1`, leasedUntil: lease, nextAttemptAt: lease })
      .where(
        sql`${webhookDeliveries.seq} in (${sql.join(
          taken.map((s) => sql`${s}`),
          sql`, `,
        )})`,
      )
      .returning();
    return claimed
      .sort((a, b) => a.seq - b.seq)
      .map((d) => {
        const e = room.get(d.endpointId)?.endpoint;
        return {
          seq: d.seq,
          id: d.id,
          endpointId: d.endpointId,
          url: e?.url ?? '',
          body: d.body,
          attempts: d.attempts,
          secrets: e ? signingSecrets(e, now) : [],
        };
      });
  });
}

/**
 * The due rows, locked: the oldest pending one of each (endpoint, order key), of endpoints with a
 * free slot and a closed circuit, oldest first.
 */
async function lockDueDeliveries(tx: Tx, nowIso: string, concurrency: number, limit: number) {
  return rowsOf<{ seq: string | number; endpoint_id: string }>(
    await tx.execute(sql`
      with flying as (
        select endpoint_id, count(*) as n from webhook_deliveries
        where leased_until is not null and leased_until > ${nowIso} group by endpoint_id),
      -- Endpoints with a free slot first: one at its concurrency (a hanging receiver) or with
      -- its circuit open costs no scan of its backlog.
      free_endpoints as (
        select e.id from webhook_endpoints e left join flying on flying.endpoint_id = e.id
        where not e.disabled and (e.circuit_open_until is null or e.circuit_open_until <= ${nowIso})
          and coalesce(flying.n, 0) < case when e.consecutive_failures >= ${CIRCUIT_THRESHOLD} then 1 else ${concurrency} end)
      select d.seq, d.endpoint_id from webhook_deliveries d
      join free_endpoints f on f.id = d.endpoint_id
      where d.state = 'pending' and d.next_attempt_at <= ${nowIso}
        and not exists (
          select 1 from webhook_deliveries p
          where p.endpoint_id = d.endpoint_id and p.order_key = d.order_key
            and p.state = 'pending' and p.seq < d.seq)
      order by d.seq
      limit ${limit}
      for update of d skip locked`),
  );
}

type LockedEndpoint = {
  id: string;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: string | Date | null;
  consecutive_failures: number;
  in_flight: string | number;
};

/** The endpoints with their attempts in flight, locked so that two instances claiming for one count them one after the other. */
async function lockEndpoints(tx: Tx, endpointIds: string[], nowIso: string) {
  return rowsOf<LockedEndpoint>(
    await tx.execute(sql`
      select e.id, e.url, e.secret, e.previous_secret, e.previous_secret_until, e.consecutive_failures,
        (select count(*) from webhook_deliveries f
          where f.endpoint_id = e.id and f.leased_until is not null and f.leased_until > ${nowIso}) as in_flight
      from webhook_endpoints e
      where e.id in (${sql.join(
        endpointIds.map((id) => sql`${id}`),
        sql`, `,
      )})
      order by e.id
      for update of e`),
  );
}

/** The secrets an attempt is signed with: the current one, and the previous one while it overlaps. */
function signingSecrets(e: LockedEndpoint, now: number): string[] {
  const overlap = e.previous_secret && e.previous_secret_until && new Date(e.previous_secret_until).getTime() > now;
  return overlap && e.previous_secret ? [e.secret, e.previous_secret] : [e.secret];
}

export interface AttemptOutcome {
  /** HTTP status, or null when no answer came (network error, timeout, refused address). */
  status: number | null;
  latencyMs: number;
  error: string | null;
  /** Milliseconds the receiver asked to wait (`Retry-After`). */
  retryAfterMs: number | null;
}

/** Sends one attempt: signed now, to a checked address, within the timeout. Never throws. */
export function attemptDelivery(deps: Deps, d: ClaimedDelivery): Promise<AttemptOutcome> {
  const started = performance.now();
  const { timeoutMs, allowPrivate } = deps.config.webhooks;
  const done = (status: number | null, error: string | null, retryAfterMs: number | null = null): AttemptOutcome => ({
    status,
    latencyMs: Math.round(performance.now() - started),
    error,
    retryAfterMs,
  });
  return new Promise((resolve) => {
    let url: URL;
    try {
      url = new URL(d.url);
    } catch {
      resolve(done(null, 'invalid url'));
      return;
    }
    // A literal address never reaches `lookup`: it is checked here.
    const literal = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(literal) && !allowPrivate && isPrivateAddress(literal)) {
      resolve(done(null, new PrivateAddressError(literal).message));
      return;
    }
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(url, {
      method: 'POST',
      lookup: checkedLookup(allowPrivate) as never,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'Parley-Webhooks/1',
        ...webhookHeaders(d.secrets, d.id, deps.now(), d.body),
      },
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (error) => {
      clearTimeout(timer);
      const message = error instanceof PrivateAddressError ? error.message : error.message || String(error);
      resolve(done(null, message.slice(0, ERROR_BODY_MAX)));
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (text.length < ERROR_BODY_MAX) text += chunk;
      });
      res.on('error', () => {});
      res.on('end', () => {
        clearTimeout(timer);
        const status = res.statusCode ?? 0;
        const ok = status >= 200 && status < 300;
        resolve(
          done(
            status,
            ok ? null : `HTTP ${status} ${text.slice(0, ERROR_BODY_MAX)}`.trim(),
            retryAfter(res.headers['retry-after'], deps.now()),
          ),
        );
      });
    });
    req.end(d.body);
  });
}

/** `Retry-After` in seconds or as an HTTP date, in ms from now (capped at a day). */
export function retryAfter(header: string | undefined, now: number): number | null {
  if (!header) return null;
  const seconds = Number(header);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(header) - now;
  if (!Number.isFinite(ms) || ms < 0) return null;
  return Math.min(ms, RETRY_AFTER_MAX_MS);
}

/** 2xx delivers; other 4xx than 408, 409, 425 and 429 are final; anything else is retried. */
export function classifyStatus(status: number | null): 'delivered' | 'final' | 'retry' {
  if (status !== null && status >= 200 && status < 300) return 'delivered';
  if (status !== null && status >= 400 && status < 500 && ![408, 409, 425, 429].includes(status)) return 'final';
  return 'retry';
}

/** A retry's wait is its schedule's entry, give or take this share. */
export const RETRY_JITTER = 0.1;

/** The wait before retry `n` (1-based) from the schedule, with ±10 % jitter; null when exhausted. */
export function retryDelayMs(schedule: readonly number[], n: number, random = Math.random): number | null {
  const seconds = schedule[n - 1];
  if (seconds === undefined) return null;
  return Math.round(seconds * 1000 * (1 - RETRY_JITTER + random() * 2 * RETRY_JITTER));
}

/**
 * Writes an attempt's outcome, if the row is still this attempt's (a lease that expired and was
 * taken again belongs to the newer attempt), and updates the endpoint's circuit.
 */
export async function recordAttempt(deps: Deps, d: ClaimedDelivery, outcome: AttemptOutcome): Promise<void> {
  const now = deps.now();
  const verdict = classifyStatus(outcome.status);
  const delay = verdict === 'retry' ? retryDelayMs(deps.config.webhooks.retrySchedule, d.attempts) : null;
  const state = verdict === 'delivered' ? 'delivered' : verdict === 'final' || delay === null ? 'failed' : 'pending';
  const wait = Math.max(delay ?? 0, outcome.retryAfterMs ?? 0);
  await deps.db.transaction(async (tx) => {
    const [row] = await tx
      .update(webhookDeliveries)
      .set({
        state,
        leasedUntil: null,
        nextAttemptAt: new Date(now + wait),
        lastStatus: outcome.status,
        lastError: outcome.error,
        lastLatencyMs: outcome.latencyMs,
        lastAttemptAt: new Date(now),
        finishedAt: state === 'pending' ? null : new Date(now),
      })
      .where(and(eq(webhookDeliveries.seq, d.seq), eq(webhookDeliveries.attempts, d.attempts)))
      .returning({ seq: webhookDeliveries.seq });
    if (!row) return;
    // An endpoint that answers (even a final 4xx) is alive; no answer, 5xx, 408, 429… count against it.
    const alive = verdict !== 'retry';
    await tx
      .update(webhookEndpoints)
      .set(
        alive
          ? { consecutiveFailures: 0, circuitOpenUntil: null }
          : {
              consecutiveFailures: sql`${webhookEndpoints.consecutiveFailures} + 1`,
              circuitOpenUntil: sql`case when ${webhookEndpoints.consecutiveFailures} + 1 >= ${CIRCUIT_THRESHOLD}
                then ${new Date(now + circuitPauseMs(deps.config.webhooks.retrySchedule, outcome.retryAfterMs)).toISOString()}::timestamptz
                else null end`,
            },
      )
      .where(eq(webhookEndpoints.id, d.endpointId));
  });
}

/** How long an open circuit pauses an endpoint: the schedule's first wait (or Retry-After), at most 5 minutes. */
const circuitPauseMs = (schedule: readonly number[], retryAfterMs: number | null) =>
  Math.min(Math.max((schedule[0] ?? 5) * 1000, retryAfterMs ?? 0), CIRCUIT_MAX_MS);
