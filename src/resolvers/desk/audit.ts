import type { Db } from '../../db/client.js';
import { type AuditActorKind, auditLog } from '../../db/schema.js';
import type { Tx } from '../outbox.js';
import type { AgentViewer } from '../viewer.js';

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
