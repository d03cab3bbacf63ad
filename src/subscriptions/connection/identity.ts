import type { Deps } from '../../deps.js';
import { classifyError, DomainError } from '../../errors.js';
import { type ChannelViewer, requireOwnAppkey, revalidateAgentSession } from '../../resolvers/channels.js';
import type { SessionPort } from '../../resolvers/session.js';
import {
  type AgentViewer,
  type HeldAgentViewer,
  requireAgent,
  requireVisitorByHash,
  type VisitorViewer,
} from '../../resolvers/viewer.js';
import type { ConnectionEnd, SocketIdentity, TransportSocket } from '../connection.js';

/**
 * Who a connection is, and whether it still is: the identity rules of the connection core, each
 * a call into the domain (src/resolvers/), apart from the connection's life and caps.
 */

/** The viewer `presented` stands for, with `appkey` checked to be its merchant's when given. Throws the domain's errors. */
export async function resolveViewer(
  deps: Deps,
  presented: SocketIdentity,
  appkey: string | undefined,
  sessionPort: () => Promise<SessionPort | undefined>,
  address: string,
): Promise<AgentViewer | VisitorViewer> {
  const resolved =
    presented.kind === 'visitor'
      ? await requireVisitorByHash(deps, presented.tokenHash, address)
      : await requireAgent(deps, await sessionPort(), address);
  if (appkey !== undefined) await requireOwnAppkey(deps, resolved, appkey);
  return resolved;
}

/**
 * How a connection whose identity did not resolve is refused: an outage is retried later, a
 * FORBIDDEN or an address past its budget (RATE_LIMITED) keeps its own reason, anything else says
 * which credential to renew.
 */
export function identityRefusal(error: unknown, kind: SocketIdentity['kind']): { end: ConnectionEnd; message: string } {
  const classified = classifyError(error);
  if (classified.code === 'SERVICE_UNAVAILABLE') {
    return { end: 'try_later', message: 'Service unavailable: retry later' };
  }
  if (classified.code === 'FORBIDDEN') return { end: 'forbidden', message: classified.message };
  if (classified.code === 'RATE_LIMITED') return { end: 'rate_limited', message: classified.message };
  return {
    end: 'forbidden',
    message:
      kind === 'visitor'
        ? 'Visitor token not valid or expired: get a new visitor token'
        : 'Agent Session not valid or expired: log in again (a visitor token goes in authorization)',
  };
}

/**
 * The periodic re-check of a connection's identity: an agent's Session may have expired silently
 * in the store (`session_ended`), a visitor token may have been revoked (`forbidden`). An outage
 * is not a revocation: `valid`.
 */
export async function identityVerdict(
  deps: Deps,
  identity: SocketIdentity | undefined,
  viewer: ChannelViewer | undefined,
  sessionPort: () => Promise<SessionPort | undefined>,
): Promise<'valid' | 'session_ended' | 'forbidden'> {
  if (identity?.kind === 'agent' && viewer?.kind === 'agent') {
    const port = await sessionPort().catch(() => undefined);
    const valid = await revalidateAgentSession(deps, port, { agentId: viewer.agentId, sessionId: identity.sessionId });
    return valid ? 'valid' : 'session_ended';
  }
  if (identity?.kind === 'visitor') {
    try {
      await requireVisitorByHash(deps, identity.tokenHash);
    } catch (error) {
      if (error instanceof DomainError) return 'forbidden';
    }
  }
  return 'valid';
}

/**
 * Follows an agent socket's Session with one watch, which serves the socket's subscriptions too
 * (each used to hold its own): a level change reaches the held viewer (new subscriptions are
 * judged by it) and the transport's subscriptions; a Session end goes to the transport as the
 * last event, then `endSession` closes the connection. Stops when `signal` aborts.
 */
export function watchSession(
  deps: Deps,
  agent: HeldAgentViewer,
  signal: AbortSignal,
  transport: Pick<TransportSocket, 'sessionEnded' | 'levelChanged'>,
  endSession: () => Promise<void>,
): void {
  const onLevel = (level: string) => {
    if (signal.aborted) return;
    agent.level = level;
    transport.levelChanged(agent.agentId, level);
  };
  void deps.realtime.sessionEnds.watch(agent, signal, onLevel).then((event) => {
    if (!event || signal.aborted) return;
    transport.sessionEnded(event);
    void endSession();
  });
}
