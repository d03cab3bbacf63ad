import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { agents } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { publishSessionEnded, sessionFingerprint } from '../events.js';
import { parseInput, required } from '../inputs.js';
import { agentSessionsKey, type SessionDirectory } from '../session.js';
import { type AgentViewer, requireAdmin } from '../viewer.js';
import { auditedAgent, recordAudit } from './audit.js';

/**
 * An agent's login Sessions (docs/desk.md "Sessions"): every agent lists and ends its own, an
 * admin any agent's of its merchant. A Session is named by `<agentId>:<fingerprint>`, never by
 * its ID (the ID is the login secret). Ending one destroys it and announces `session.ended`, so
 * its sockets close with 4401 on every instance.
 */

export interface AgentSession {
  /** `<agentId>:<fingerprint of the Session ID>`. */
  id: string;
  agentId: string;
  /** The User-Agent it was last used with over HTTP ('' when unknown). */
  device: string;
  /** The client address it was last used from ('' when unknown). */
  address: string;
  createdAt: Date | null;
  /** Last use over HTTP (refreshed at most once a minute); null when unknown. */
  lastSeenAt: Date | null;
  /** Whether it is the Session of this very request. */
  current: boolean;
}

export const listSessionsInput = z.object({ agentId: required(64).optional() });
export type ListSessionsInput = z.input<typeof listSessionsInput>;
export const endSessionInput = z.object({ id: required(200) });
export type EndSessionInput = z.input<typeof endSessionInput>;

/** The agent whose Sessions `viewer` may manage: itself, or (admins) an agent of its merchant. */
async function manageable(deps: Deps, viewer: AgentViewer, agentId: string | undefined): Promise<string> {
  if (agentId === undefined || agentId === viewer.agentId) return viewer.agentId;
  requireAdmin(viewer);
  const [row] = await deps.db
    .select({ id: agents.id })
    .from(agents)
    .where(and(eq(agents.id, agentId), eq(agents.merchantId, viewer.merchantId)));
  if (!row) throw new DomainError('NOT_FOUND', 'No such agent');
  return row.id;
}

/** The live Sessions of an agent (its own by default; an admin names another of its merchant's agents). */
export async function listSessions(
  deps: Deps,
  viewer: AgentViewer,
  raw: ListSessionsInput,
  sessions: SessionDirectory,
): Promise<AgentSession[]> {
  const input = parseInput(listSessionsInput, raw);
  const agentId = await manageable(deps, viewer, input.agentId);
  const key = agentSessionsKey(agentId);
  const found: AgentSession[] = [];
  for (const sid of await deps.kv.members(key)) {
    const state = await sessions.peek(sid);
    if (!state || state.agent?.agentId !== agentId) {
      await deps.kv.removeFromSet(key, sid); // expired: the index forgets it
      continue;
    }
    found.push({
      id: `${agentId}:${sessionFingerprint(sid)}`,
      agentId,
      device: state.seen?.device ?? '',
      address: state.seen?.address ?? '',
      createdAt: state.createdAt ? new Date(state.createdAt) : null,
      lastSeenAt: state.seen ? new Date(state.seen.at) : null,
      current: sid === viewer.session.id,
    });
  }
  return found.sort((a, b) => (b.lastSeenAt?.getTime() ?? 0) - (a.lastSeenAt?.getTime() ?? 0));
}

/**
 * Ends one Session (the caller's own, or as an admin any of its merchant's agents'): destroyed,
 * dropped from the index, announced (its sockets close with 4401 everywhere) and audited.
 * Ending an unknown or already ended Session is NOT_FOUND.
 */
export async function endAgentSession(
  deps: Deps,
  viewer: AgentViewer,
  raw: EndSessionInput,
  sessions: SessionDirectory,
): Promise<boolean> {
  const input = parseInput(endSessionInput, raw);
  const split = input.id.lastIndexOf(':');
  const notFound = new DomainError('NOT_FOUND', 'No such Session');
  if (split <= 0) throw notFound;
  const agentId = await manageable(deps, viewer, input.id.slice(0, split));
  const fingerprint = input.id.slice(split + 1);
  const key = agentSessionsKey(agentId);
  const sid = (await deps.kv.members(key)).find((s) => sessionFingerprint(s) === fingerprint);
  if (!sid) throw notFound;
  const state = await sessions.peek(sid);
  await sessions.destroy(sid);
  await deps.kv.removeFromSet(key, sid);
  const own = agentId === viewer.agentId;
  await publishSessionEnded(deps, agentId, [sid], own ? 'ended' : 'ended_by_admin');
  await recordAudit(deps.db, {
    ...auditedAgent(viewer),
    action: 'session.ended',
    target: { type: 'session', id: input.id },
    // What the Session list showed of it (never the Session ID, the login secret).
    before: {
      agentId,
      device: state?.seen?.device ?? '',
      address: state?.seen?.address ?? '',
      createdAt: state?.createdAt ? new Date(state.createdAt).toISOString() : null,
    },
    after: null,
  });
  return true;
}

/** Destroys every Session in the agent's index and announces their end; returns how many. */
export async function endAllSessions(
  deps: Deps,
  sessions: Pick<SessionDirectory, 'destroy'>,
  agentId: string,
  reason: string,
) {
  const key = agentSessionsKey(agentId);
  const ids = await deps.kv.members(key);
  for (const id of ids) {
    await sessions.destroy(id);
    await deps.kv.removeFromSet(key, id);
  }
  if (ids.length > 0) await publishSessionEnded(deps, agentId, ids, reason);
  return ids.length;
}
