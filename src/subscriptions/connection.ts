import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import { clientIp } from '../http/request.js';
import type { SessionLayer } from '../http/session.js';
import type { ChannelViewer } from '../resolvers/channels.js';
import type { SessionPort } from '../resolvers/session.js';
import { type AgentViewer, type HeldAgentViewer, heldViewer, type VisitorViewer } from '../resolvers/viewer.js';
import type { ChannelEvent } from '../stores/bus.js';
import {
  countSocket,
  createTallies,
  identityKey,
  type SocketShare,
  socketRefusal,
  subscribeWindow,
  type Tallies,
} from './connection/caps.js';
import { identityRefusal, identityVerdict, resolveViewer, watchSession } from './connection/identity.js';
import { type RealtimeLimits, realtimeLimitsOf } from './limits.js';

/**
 * The transport-agnostic core of a real-time connection: identity, caps, re-checks, Session end,
 * presence. graphql-ws (ws.ts) and the Pusher protocol (pusher.ts) are thin adapters over it;
 * each maps a `ConnectionEnd` to its own close code.
 */

/** Why the gateway ends (or refuses) a connection; each transport names it with its own close code. */
export type ConnectionEnd =
  /** The agent Session ended (logout, expiry, disable): log in again. */
  | 'session_ended'
  /** A bad identity at connect time, or a visitor token / capability revoked or expired since. */
  | 'forbidden'
  /** Fell too far behind (queued events or buffered bytes): reconnect and resume. */
  | 'slow_consumer'
  /** This instance is shutting down: reconnect (to another). */
  | 'going_away'
  /** Too many `subscribe` messages in the window. */
  | 'subscribe_rate'
  /** Over a per-identity or per-address cap on sockets: do not retry at once. */
  | 'too_many_connections'
  /** The client address is past its budget of failed identity checks (VISITOR_TOKEN_FAILURES_PER_MINUTE): retry later. */
  | 'rate_limited'
  /** The instance is at its global ceiling, or a backing service is unavailable: retry later. */
  | 'try_later';

/** Thrown by `authenticate` and `open`: the connection must be closed with `end`. */
export class ConnectionRefused extends Error {
  constructor(
    readonly end: ConnectionEnd,
    message: string,
  ) {
    super(message);
    this.name = 'ConnectionRefused';
  }
}

/** What a connection presents: a visitor bearer token (kept as its SHA-256, `hashToken`) or an agent Session ID. */
export type SocketIdentity = { kind: 'visitor'; tokenHash: string } | { kind: 'agent'; sessionId: string };

/** What the core needs from a transport's socket. */
export interface TransportSocket {
  /** Closes the socket for `end`, with the protocol's code and `reason` (≤ 123 bytes). */
  end(end: ConnectionEnd, reason: string): void;
  /** Subscriptions still running (the Session-end flush waits for them to deliver `session.ended`). */
  activeSubscriptions(): number;
  /** The agent Session ended: subscriptions to channels other than the agent's get `event` as their last. */
  sessionEnded(event: ChannelEvent): void;
  /**
   * An admin changed the agent's level (the connection's viewer already holds it): subscriptions
   * its new level no longer allows end with FORBIDDEN (an ex-admin's `admin-{bid}`).
   */
  levelChanged(agentId: string, level: string): void;
}

/** A subscribe-rate window: at most `max` `subscribe` messages per `windowMs` per socket. */
export const SUBSCRIBE_RATE = { max: 30, windowMs: 10_000 };
/** How often a connection's identity is re-checked (an agent Session's idle expiry is silent in the store; a visitor token may be revoked). */
export const SESSION_REVALIDATE_MS = 30_000;
/** After its Session ends, a connection gets this long to deliver the final events before it is closed. */
const SESSION_END_FLUSH_MS = 2000;

export interface Connection {
  readonly id: string;
  /** The client's address (TRUST_PROXY aware). */
  readonly address: string;
  /** Aborts when the connection closes. */
  readonly signal: AbortSignal;
  /** The identity accepted by `authenticate`, if any. */
  readonly identity: SocketIdentity | undefined;
  readonly viewer: ChannelViewer | undefined;
  /** True once the connection is being ended (no new subscription is admitted). */
  readonly ending: boolean;
  /**
   * Resolves the identity, checks that `appkey` is its merchant's (when given) and the
   * per-identity cap, then follows it: presence and Session end for an agent, periodic re-checks
   * for both. Throws ConnectionRefused.
   */
  authenticate(identity: SocketIdentity, appkey: string | undefined): Promise<ChannelViewer>;
  /** The agent Session behind the connection (read without extending its idle lifetime). */
  sessionPort(): Promise<SessionPort | undefined>;
  /**
   * Admits one more subscription: counts the subscribe rate (ending the connection past it) and
   * the per-identity, per-address and global subscription caps. Returns its release (idempotent).
   * Throws a DomainError (RATE_LIMITED, UNAUTHENTICATED) for this subscription only.
   */
  admitSubscription(): () => void;
  /** Re-checks `stillValid` with the identity; when it turns false the connection ends (forbidden). */
  followCapability(stillValid: () => Promise<boolean>, reason: string): void;
  /**
   * Counts this socket against the socket cap of `holder`, the visitor whose channel it follows
   * by capability (no identity of its own): a capability is capped as its identity is, so sockets
   * without a token cannot pile up on one visitor's channel. Once per socket and holder, until the
   * socket closes. Throws RATE_LIMITED past WS_MAX_SOCKETS_PER_IDENTITY.
   */
  holdCapability(holder: ChannelViewer): void;
  /** Ends the connection (slow consumer, shutdown …). */
  end(end: ConnectionEnd, reason: string): void;
  /** The transport's socket closed: stops everything this connection started. */
  closed(): Promise<void>;
}

export interface ConnectionCore {
  readonly limits: RealtimeLimits;
  /** A socket opened: counts it against the per-address and global caps. Throws ConnectionRefused. */
  open(transport: TransportSocket, request: IncomingMessage): Connection;
  /**
   * Sockets and subscriptions open on this instance, and how many addresses and identities hold
   * one of them now (`tracked`: a closed socket leaves no entry behind).
   */
  counts(): { sockets: number; subscriptions: number; tracked: number };
}

export function createConnectionCore(deps: Deps, sessions: Pick<SessionLayer, 'peekPort'>): ConnectionCore {
  const instance: Instance = { deps, sessions, limits: realtimeLimitsOf(deps.config), tallies: createTallies() };
  return {
    limits: instance.limits,
    open: (transport, request) => openConnection(instance, transport, request),
    counts: () => ({ ...instance.tallies.total, tracked: instance.tallies.tracked() }),
  };
}

/** What every connection of the instance shares. */
interface Instance {
  readonly deps: Deps;
  readonly sessions: Pick<SessionLayer, 'peekPort'>;
  readonly limits: RealtimeLimits;
  readonly tallies: Tallies;
}

/**
 * One socket's state, kept apart from its Connection so that each step of the connection's life
 * (authenticate, re-check, Session end, close) is a function of its own; the Connection reads it
 * through getters.
 */
interface SocketState {
  readonly instance: Instance;
  readonly transport: TransportSocket;
  readonly address: string;
  readonly stop: AbortController;
  /** What the socket counts against the caps (connection/caps.ts). */
  readonly share: SocketShare;
  /** Capabilities the connection uses, re-checked with its identity. */
  readonly capabilities: { stillValid: () => Promise<boolean>; reason: string }[];
  identity: SocketIdentity | undefined;
  viewer: ChannelViewer | undefined;
  ending: boolean;
  presenceId: string | undefined;
  revalidate: NodeJS.Timeout | undefined;
}

/** A socket opened: refused past the instance's or its address's socket cap, else counted and given its Connection. */
function openConnection(instance: Instance, transport: TransportSocket, request: IncomingMessage): Connection {
  const { deps, limits, tallies } = instance;
  const address = clientIp(request, deps.config);
  const refusal = socketRefusal(tallies, limits, address);
  if (refusal) throw new ConnectionRefused(refusal.end, refusal.message);
  const stop = new AbortController();
  const state: SocketState = {
    instance,
    transport,
    address,
    stop,
    share: countSocket(tallies, limits, address, stop.signal),
    capabilities: [],
    identity: undefined,
    viewer: undefined,
    ending: false,
    presenceId: undefined,
    revalidate: undefined,
  };
  const withinSubscribeRate = subscribeWindow(SUBSCRIBE_RATE);

  return {
    id: randomUUID(),
    address,
    signal: stop.signal,
    get identity() {
      return state.identity;
    },
    get viewer() {
      return state.viewer;
    },
    get ending() {
      return state.ending;
    },
    sessionPort: () => sessionPort(state),
    authenticate: (presented, appkey) => authenticate(state, presented, appkey),
    admitSubscription() {
      if (state.ending) throw new DomainError('UNAUTHENTICATED', 'The Session of this socket ended: log in again');
      if (!withinSubscribeRate()) {
        end(state, 'subscribe_rate', 'Too many subscribe requests');
        throw new DomainError('RATE_LIMITED', 'Too many subscribe requests');
      }
      return state.share.admitSubscription();
    },
    followCapability(stillValid, reason) {
      state.capabilities.push({ stillValid, reason });
      startRechecks(state);
    },
    holdCapability: (holder) => state.share.holdCapability(identityKey(holder)),
    end: (why, reason) => end(state, why, reason),
    closed: () => close(state),
  };
}

/** The agent Session behind the socket, read without extending its idle lifetime. */
const sessionPort = (state: SocketState) =>
  state.identity?.kind === 'agent'
    ? state.instance.sessions.peekPort(state.identity.sessionId)
    : Promise.resolve(undefined);

function end(state: SocketState, why: ConnectionEnd, reason: string) {
  if (state.stop.signal.aborted) return;
  state.ending = true;
  state.transport.end(why, reason);
}

/** Lets the final `session.ended` events go out, then ends the connection. */
async function endSession(state: SocketState) {
  if (state.ending) return;
  state.ending = true;
  const { transport, stop } = state;
  const deadline = Date.now() + SESSION_END_FLUSH_MS;
  while (transport.activeSubscriptions() > 0 && Date.now() < deadline && !stop.signal.aborted) {
    await new Promise((r) => setTimeout(r, 25));
  }
  if (!stop.signal.aborted) transport.end('session_ended', 'Session ended: log in again');
}

/** Resolves the presented identity, checks the appkey and the identity's socket cap, then follows it. */
async function authenticate(state: SocketState, presented: SocketIdentity, appkey: string | undefined) {
  const { deps } = state.instance;
  if (state.viewer) throw new ConnectionRefused('forbidden', 'The identity of a connection is fixed');
  state.identity = presented;
  let resolved: AgentViewer | VisitorViewer;
  try {
    resolved = await resolveViewer(deps, presented, appkey, () => sessionPort(state), state.address);
  } catch (error) {
    state.identity = undefined;
    const refusal = identityRefusal(error, presented.kind);
    throw new ConnectionRefused(refusal.end, refusal.message);
  }
  const key = identityKey(resolved);
  if (state.share.identityFull(key)) {
    state.identity = undefined;
    throw new ConnectionRefused('too_many_connections', 'Too many connections for this identity');
  }
  if (state.stop.signal.aborted) throw new ConnectionRefused('going_away', 'Closed while connecting');
  // The connection keeps ids, not the agent row and Session port (it lives as long as the socket).
  const held = heldViewer(resolved);
  state.viewer = held;
  state.share.claimIdentity(key);
  if (resolved.kind === 'agent') {
    state.presenceId = await deps.realtime.presence.connected(resolved);
    if (state.stop.signal.aborted) {
      // The socket closed while presence was being recorded: `close` could not report it.
      await deps.realtime.presence.disconnected(state.presenceId);
      state.presenceId = undefined;
      return resolved;
    }
    watchSession(deps, held as HeldAgentViewer, state.stop.signal, state.transport, () => endSession(state));
  }
  startRechecks(state);
  return resolved;
}

function startRechecks(state: SocketState) {
  if (state.revalidate) return;
  state.revalidate = setInterval(() => void recheck(state), SESSION_REVALIDATE_MS);
  state.revalidate.unref();
}

/** The periodic re-check of the identity and of every capability the connection uses. */
async function recheck(state: SocketState) {
  if (state.stop.signal.aborted || state.ending) return;
  const verdict = await identityVerdict(state.instance.deps, state.identity, state.viewer, () => sessionPort(state));
  if (verdict === 'session_ended') return void endSession(state);
  if (verdict === 'forbidden') return end(state, 'forbidden', 'Visitor token no longer valid');
  for (const capability of state.capabilities) {
    const valid = await capability.stillValid().catch(() => true); // an outage is not a revocation
    if (!valid) return end(state, 'forbidden', capability.reason);
  }
}

/** The transport's socket closed: stops the re-checks, gives back every slot, ends presence. */
async function close(state: SocketState) {
  if (state.stop.signal.aborted) return;
  state.stop.abort();
  clearInterval(state.revalidate);
  state.share.release();
  await state.instance.deps.realtime.presence.disconnected(state.presenceId);
}
