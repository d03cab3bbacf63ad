import { and, desc, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Db } from '../../db/client.js';
import { type AuditActorKind, auditLog } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { parseInput, text } from '../inputs.js';
import type { Tx } from '../outbox/enqueue.js';
import { type AgentViewer, requireAdmin } from '../viewer.js';

/**
 * The audit log's write side: every privileged action (agent, group and settings changes, API
 * keys, webhooks, Session ends, exports) appends one row with who, what, when, from which
 * address, and before → after. Nothing here updates or deletes a row.
 */

/** Who acted, as the log names them. */
export interface AuditActor {
  kind: AuditActorKind;
  /** The agent id, the API key id, or a fixed name (`cli`, `parley`). */
  id: string;
  /** A display name kept as it was at the time (an agent's nickname). */
  name: string;
}

export interface AuditEntry {
  merchantId: string;
  actor: AuditActor;
  /** dot.case, `<subject>.<past participle>`: `agent.created`, `agent_group.updated`, `settings.updated`. */
  action: string;
  target: { type: string; id: string };
  /** The target's recorded fields before the change; null (or absent) when it did not exist. */
  before?: Record<string, unknown> | null;
  /** The same fields after it; null (or absent) when it no longer exists. */
  after?: Record<string, unknown> | null;
  /** The request's client address; null when no request is involved. */
  clientAddress: string | null;
}

/** dot.case: lowercase words of letters, digits and `_`, joined by dots (at least two). */
const ACTION = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;

/** The actor and address of an agent's action, as `recordAudit` takes them. */
export function auditedAgent(viewer: AgentViewer): Pick<AuditEntry, 'actor' | 'clientAddress' | 'merchantId'> {
  return {
    merchantId: viewer.merchantId,
    actor: { kind: 'agent', id: viewer.agentId, name: viewer.agent.nickname },
    clientAddress: viewer.clientAddress,
  };
}

/** The operator CLI as an actor (no request, no address). */
export const OPERATOR_ACTOR: AuditActor = { kind: 'operator', id: 'cli', name: 'operator' };
/** Parley itself (background jobs) as an actor. */
export const SYSTEM_ACTOR: AuditActor = { kind: 'system', id: 'parley', name: 'Parley' };

/**
 * Appends one audit row. Call it with the transaction that makes the change, so the change and
 * its record commit (or roll back) together: a change never goes unrecorded, and a failed
 * change leaves no record.
 */
export async function recordAudit(tx: Tx | Db, entry: AuditEntry): Promise<void> {
  if (!ACTION.test(entry.action)) throw new Error(`audit action must be dot.case: ${entry.action}`);
  await tx.insert(auditLog).values({
    merchantId: entry.merchantId,
    actorKind: entry.actor.kind,
    actorId: entry.actor.id,
    actorName: entry.actor.name,
    action: entry.action,
    targetType: entry.target.type,
    targetId: entry.target.id,
    before: entry.before ?? null,
    after: entry.after ?? null,
    clientAddress: entry.clientAddress,
  });
}

/** One row of the log as admins read it. */
export interface AuditLogEntry {
  /** The row id; also the cursor of the page that ends with it. */
  id: string;
  actor: AuditActor;
  action: string;
  target: { type: string; id: string };
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  clientAddress: string | null;
  createdAt: Date;
}

export interface AuditLogPage {
  entries: AuditLogEntry[];
  /** Give it as `after` for the next (older) page; null when there is none. */
  endCursor: string | null;
  hasNextPage: boolean;
}

export const MAX_AUDIT_PAGE = 100;

export const auditLogInput = z.object({
  first: z.number().int().min(1).max(MAX_AUDIT_PAGE).default(20),
  /** The `endCursor` of the previous page. */
  after: z
    .string()
    .regex(/^\d{1,18}$/, 'must be the endCursor of a previous page')
    .optional(),
  action: text(100).optional(),
  actorId: text(100).optional(),
  targetType: text(100).optional(),
  targetId: text(200).optional(),
});
export type AuditLogInput = z.input<typeof auditLogInput>;

/**
 * The merchant's audit log, newest first, filtered by action, actor or target (admins only). A
 * page continues after the row of `after` in the same order (time, then id), so rows written
 * meanwhile never shift it.
 */
export async function readAuditLog(deps: Deps, viewer: AgentViewer, raw: AuditLogInput): Promise<AuditLogPage> {
  requireAdmin(viewer);
  const input = parseInput(auditLogInput, raw);
  const cursor = input.after
    ? sql`(${auditLog.createdAt}, ${auditLog.id}) < (select c.created_at, c.id from ${auditLog} c where c.id = ${Number(input.after)} and c.merchant_id = ${viewer.merchantId})`
    : undefined;
  const rows = await deps.db
    .select()
    .from(auditLog)
    .where(
      and(
        eq(auditLog.merchantId, viewer.merchantId),
        cursor,
        input.action ? eq(auditLog.action, input.action) : undefined,
        input.actorId ? eq(auditLog.actorId, input.actorId) : undefined,
        input.targetType ? eq(auditLog.targetType, input.targetType) : undefined,
        input.targetId ? eq(auditLog.targetId, input.targetId) : undefined,
      ),
    )
    .orderBy(desc(auditLog.createdAt), desc(auditLog.id))
    .limit(input.first + 1);
  const page = rows.slice(0, input.first).map(
    (r): AuditLogEntry => ({
      id: String(r.id),
      actor: { kind: r.actorKind, id: r.actorId, name: r.actorName },
      action: r.action,
      target: { type: r.targetType, id: r.targetId },
      before: r.before ?? null,
      after: r.after ?? null,
      clientAddress: r.clientAddress,
      createdAt: r.createdAt,
    }),
  );
  const hasNextPage = rows.length > input.first;
  return { entries: page, endCursor: hasNextPage ? (page.at(-1)?.id ?? null) : null, hasNextPage };
}
