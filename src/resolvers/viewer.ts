import { createHash } from 'node:crypto';
import { and, eq, gt, isNull, sql } from 'drizzle-orm';
import { preparedQuery } from '../db/prepared.js';
import { type Agent, agents, merchants, visitors, visitorTokens } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { DomainError, notLoggedIn } from '../errors.js';
import { isApiKeyShaped } from '../ids.js';
import { visitorTokenFailures } from './budgets/failed-lookups.js';
import { publishSessionEnded } from './events.js';
import { agentSessionsKey, noteSessionSeen, type SessionPort } from './session.js';

export interface AgentViewer {
  kind: 'agent';
  agentId: string;
  merchantId: string;
  bid: string;
  level: string;
  agent: Agent;
  session: SessionPort;
  /**
   * The address of the request or socket this viewer came with (the adapter's `clientIp`, proxy
   * rules applied); null when the viewer was not built for a request (demo data, jobs). Privileged
   * actions record it in the audit log.
   */
  clientAddress: string | null;
}

export interface VisitorViewer {
  kind: 'visitor';
  visitorId: string;
  merchantId: string;
  bid: string;
  /** The visitor's own real-time channel, the only one it may subscribe to. */
  channel: string;
}

export const TICKET_AGENT = 'ticket_agent';

/**
 * What a long-lived connection or channel subscription keeps of an agent: the fields the channel
 * rules read (authorization, Session-end matching), not the agent row or the Session port, which
 * a socket would otherwise hold twice for its whole life (BENCHMARKS.md, idle subscribers).
 */
export interface HeldAgentViewer {
  kind: 'agent';
  agentId: string;
  merchantId: string;
  bid: string;
  level: string;
  session: { readonly id: string };
}

/** The part of a viewer a connection or subscription keeps (a visitor's viewer is already that small). */
export function heldViewer(viewer: AgentViewer | HeldAgentViewer | VisitorViewer): HeldAgentViewer | VisitorViewer {
  if (viewer.kind === 'visitor') return viewer;
  const { agentId, merchantId, bid, level, session } = viewer;
  return { kind: 'agent', agentId, merchantId, bid, level, session: { id: session.id } };
}

export const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

/**
 * The agent of a login Session, checked against the database on every request: a Session past
 * its absolute lifetime, of a deleted or moved agent, or of a disabled account ends here.
 */
export async function requireAgent(
  deps: Deps,
  session: SessionPort | undefined,
  clientAddress: string | null = null,
): Promise<AgentViewer> {
  const identity = session?.state.agent;
  if (!session || !identity) throw notLoggedIn();
  const age = deps.now() - (session.state.createdAt ?? 0);
  if (age > deps.config.sessionAbsoluteTtlSeconds * 1000) {
    await endSession(deps, session, identity.agentId, 'expired');
    throw notLoggedIn();
  }
  const [agent] = await agentById(deps.db).execute({ id: identity.agentId });
  if (!agent || agent.merchantId !== identity.merchantId) {
    await endSession(deps, session, identity.agentId, 'mismatch');
    throw new DomainError(
      'SESSION_MISMATCH',
      'Invalid parameter: this session no longer matches an agent, please log in again',
    );
  }
  if (agent.disabled) {
    await endSession(deps, session, identity.agentId, 'disabled');
    throw new DomainError('ACCOUNT_DISABLED', 'This agent account is disabled');
  }
  // express-session saves the Session at the end of the request when this changed it.
  noteSessionSeen(session, deps.now());
  return {
    kind: 'agent',
    agentId: agent.id,
    merchantId: agent.merchantId,
    bid: identity.bid,
    level: agent.level,
    agent,
    session,
    clientAddress,
  };
}

export const ADMIN = 'admin';

/** Admin operations (agents, groups, settings, the audit log): an agent of another level gets FORBIDDEN (1403). */
export function requireAdmin(viewer: AgentViewer): AgentViewer {
  if (viewer.level !== ADMIN) {
    throw new DomainError('FORBIDDEN', 'Only an admin of the merchant may do this');
  }
  return viewer;
}

/** Spec: a `ticket_agent` calling an online-reception endpoint gets HTTP 403. */
export function requireOnlineReception<V extends Pick<AgentViewer, 'level'>>(viewer: V): V {
  if (viewer.level === TICKET_AGENT) {
    throw new DomainError('FORBIDDEN', 'Online reception is not available to ticket agents; use the ticket entry');
  }
  return viewer;
}

/** Destroys a Session and tells its live subscriptions (on any instance) that it ended. */
export async function endSession(deps: Deps, session: SessionPort, agentId: string, reason: string) {
  const sessionId = session.id;
  await deps.kv.removeFromSet(agentSessionsKey(agentId), sessionId).catch(() => {});
  await session.destroy();
  await publishSessionEnded(deps, agentId, [sessionId], reason);
}

/**
 * The visitor of a `Bearer` token: unexpired, unrevoked, and its merchant's. A check may be
 * reused from the configuration cache for up to 1 s (never past the token's expiry; a
 * revocation is announced to every instance), so a revoked token is refused everywhere within 1 s.
 * `clientAddress` is the request's or socket's address (the adapter's `clientIp`): a token that
 * fails the lookup is counted against it, and an address past VISITOR_TOKEN_FAILURES_PER_MINUTE
 * is refused RATE_LIMITED before the lookup (budgets/failed-lookups.ts). Without it (a socket's
 * own re-checks) nothing is counted.
 */
export async function requireVisitor(
  deps: Deps,
  token: string | undefined,
  clientAddress?: string,
): Promise<VisitorViewer> {
  if (!token) throw visitorUnauthenticated();
  if (isApiKeyShaped(token))
    throw new DomainError(
      'VISITOR_UNAUTHENTICATED',
      'An API key (prly_…) is not a visitor token: send a visitor token',
    );
  return requireVisitorByHash(deps, hashToken(token), clientAddress);
}

/**
 * As `requireVisitor`, from the token's SHA-256 (`hashToken`): what a socket keeps of the token it
 * was opened with, and what a Pusher channel grant stores, so no raw token stays at rest.
 */
export async function requireVisitorByHash(deps: Deps, hash: string, clientAddress?: string): Promise<VisitorViewer> {
  const startedAt = deps.now();
  const cached = deps.configCache.token(hash, startedAt);
  if (cached) return visitorViewer(cached);
  if (clientAddress === undefined) return lookUpToken(deps, hash, startedAt);
  // Failures are never cached: an address that keeps presenting unknown or revoked tokens is
  // stopped before the database, not after.
  const failures = visitorTokenFailures(deps);
  await failures.refuseIfSpent(clientAddress);
  try {
    return await lookUpToken(deps, hash, startedAt);
  } catch (error) {
    if (error instanceof DomainError && error.code === 'VISITOR_UNAUTHENTICATED') await failures.charge(clientAddress);
    throw error;
  }
}

/** The token's check from the database, shared with the checks of the same token in flight. */
async function lookUpToken(deps: Deps, hash: string, startedAt: number): Promise<VisitorViewer> {
  const epoch = deps.configCache.tokenEpoch();
  // Concurrent checks of one token (a reconnect storm: every tab of a visitor at once) share one
  // query — only one started since the last revocation announced here, so none is older than it.
  let checks = tokenChecks.get(deps.db);
  if (!checks) {
    checks = new Map();
    tokenChecks.set(deps.db, checks);
  }
  const shared = checks.get(hash);
  if (shared && shared.epoch === epoch) return visitorViewer(await shared.check);
  const check = checkToken(deps, hash, startedAt, epoch);
  const mine = { epoch, check };
  checks.set(hash, mine);
  const forget = () => {
    if (checks.get(hash) === mine) checks.delete(hash);
  };
  check.then(forget, forget);
  return visitorViewer(await check);
}

/** Token checks in flight, per database handle and token hash. */
const tokenChecks = new WeakMap<object, Map<string, { epoch: number; check: Promise<CheckedVisitorToken> }>>();

type CheckedVisitorToken = { visitorId: string; merchantId: string; bid: string; channel: string; expiresAt: number };

async function checkToken(deps: Deps, hash: string, startedAt: number, epoch: number): Promise<CheckedVisitorToken> {
  const [row] = await visitorByToken(deps.db).execute({ hash, now: new Date(startedAt).toISOString() });
  if (!row) throw visitorUnauthenticated();
  const checked = { ...row, expiresAt: row.expiresAt.getTime() };
  deps.configCache.rememberToken(hash, checked, startedAt, epoch);
  return checked;
}

const visitorViewer = (t: { visitorId: string; merchantId: string; bid: string; channel: string }): VisitorViewer => ({
  kind: 'visitor',
  visitorId: t.visitorId,
  merchantId: t.merchantId,
  bid: t.bid,
  channel: t.channel,
});

const agentById = preparedQuery((db) =>
  db
    .select()
    .from(agents)
    .where(eq(agents.id, sql.placeholder('id')))
    .limit(1)
    .prepare('agent_by_id'),
);

/** The token's visitor, of the token's own merchant, while the token is unrevoked and unexpired. */
const visitorByToken = preparedQuery((db) =>
  db
    .select({
      visitorId: visitors.id,
      merchantId: visitors.merchantId,
      bid: merchants.bid,
      channel: visitors.channel,
      expiresAt: visitorTokens.expiresAt,
    })
    .from(visitorTokens)
    .innerJoin(
      visitors,
      and(eq(visitors.id, visitorTokens.visitorId), eq(visitors.merchantId, visitorTokens.merchantId)),
    )
    .innerJoin(merchants, eq(merchants.id, visitors.merchantId))
    .where(
      and(
        eq(visitorTokens.tokenHash, sql.placeholder('hash')),
        isNull(visitorTokens.revokedAt),
        gt(visitorTokens.expiresAt, sql.placeholder('now')),
      ),
    )
    .limit(1)
    .prepare('visitor_by_token'),
);

const visitorUnauthenticated = () =>
  new DomainError('VISITOR_UNAUTHENTICATED', 'Visitor token missing, invalid or expired: get a new visitor token');
