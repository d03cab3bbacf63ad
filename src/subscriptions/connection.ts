import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Deps } from '../deps.js';
import { classifyError, DomainError } from '../errors.js';
import { clientIp } from '../http/request.js';
import type { SessionLayer } from '../http/session.js';
import { type ChannelViewer, requireOwnAppkey, revalidateAgentSession } from '../resolvers/channels.js';
import type { SessionPort } from '../resolvers/session.js';
import {
  type AgentViewer,
  type HeldAgentViewer,
  heldViewer,
  requireAgent,
  requireVisitorByHash,
  type VisitorViewer,
} from '../resolvers/viewer.js';
import type { ChannelEvent } from '../stores/bus.js';
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
interface TransportSocket {
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
  /** Sockets and subscriptions open on this instance. */
  counts(): { sockets: number; subscriptions: number };
}

interface Tally {
  sockets: number;
  subscriptions: number;
}

/** Instance-wide tallies per identity and per address, for the caps of limits.ts. */
function createTallies() {
  const total: Tally = { sockets: 0, subscriptions: 0 };
  const byKey = new Map<string, Tally>();
  const of = (key: string) => byKey.get(key) ?? { sockets: 0, subscriptions: 0 };
  const add = (key: string, field: keyof Tally, delta: number) => {
    const tally = of(key);
    tally[field] += delta;
    if (tally.sockets <= 0 && tally.subscriptions <= 0) byKey.delete(key);
    else byKey.set(key, tally);
  };
  return { total, of, add };
}

export function createConnectionCore(deps: Deps, sessions: Pick<SessionLayer, 'peekPort'>): ConnectionCore {
  const limits = realtimeLimitsOf(deps.config);
  const tallies = createTallies();
  const addressKey = (address: string) => `address:${address}`;
  const identityKey = (viewer: ChannelViewer) =>
    viewer.kind === 'agent' ? `agent:${viewer.agentId}` : `visitor:${viewer.visitorId}`;

  function open(transport: TransportSocket, request: IncomingMessage): Connection {
    const address = clientIp(request, deps.config);
    if (tallies.total.sockets >= limits.maxSockets) {
      throw new ConnectionRefused('try_later', 'Server at capacity: retry later');
    }
    if (tallies.of(addressKey(address)).sockets >= limits.socketsPerAddress) {
      throw new ConnectionRefused('too_many_connections', 'Too many connections from this address');
    }
    tallies.total.sockets++;
    tallies.add(addressKey(address), 'sockets', 1);

    const stop = new AbortController();
    const capabilities: { stillValid: () => Promise<boolean>; reason: string }[] = [];
    let identity: SocketIdentity | undefined;
    let viewer: ChannelViewer | undefined;
    let ownKey: string | undefined;
    let ending = false;
    let revalidate: NodeJS.Timeout | undefined;
    let presenceId: string | undefined;
    let subscriptions = 0;
    const capabilityHolders = new Set<string>(); // identity keys this socket counts against through a capability
    const window = { start: Date.now(), count: 0 };

    const sessionPort = () =>
      identity?.kind === 'agent' ? sessions.peekPort(identity.sessionId) : Promise.resolve(undefined);

    const end = (why: ConnectionEnd, reason: string) => {
      if (stop.signal.aborted) return;
      ending = true;
      transport.end(why, reason);
    };

    /** Lets the final `session.ended` events go out, then ends the connection. */
    const endSession = async () => {
      if (ending) return;
      ending = true;
      const deadline = Date.now() + SESSION_END_FLUSH_MS;
      while (transport.activeSubscriptions() > 0 && Date.now() < deadline && !stop.signal.aborted) {
        await new Promise((r) => setTimeout(r, 25));
      }
      if (!stop.signal.aborted) transport.end('session_ended', 'Session ended: log in again');
    };

    /** The periodic re-check of the identity and of every capability the connection uses. */
    const recheck = async () => {
      if (stop.signal.aborted || ending) return;
      if (identity?.kind === 'agent' && viewer?.kind === 'agent') {
        const port = await sessionPort().catch(() => undefined);
        const valid = await revalidateAgentSession(deps, port, {
          agentId: viewer.agentId,
          sessionId: identity.sessionId,
        });
        if (!valid) return void endSession();
      } else if (identity?.kind === 'visitor') {
        try {
          await requireVisitorByHash(deps, identity.tokenHash);
        } catch (error) {
          if (error instanceof DomainError) return end('forbidden', 'Visitor token no longer valid');
        }
      }
      for (const capability of capabilities) {
        const valid = await capability.stillValid().catch(() => true); // an outage is not a revocation
        if (!valid) return end('forbidden', capability.reason);
      }
    };
    const startRechecks = () => {
      if (revalidate) return;
      revalidate = setInterval(() => void recheck(), SESSION_REVALIDATE_MS);
      revalidate.unref();
    };

    const releaseSubscription = () => {
      subscriptions--;
      tallies.total.subscriptions--;
      tallies.add(addressKey(address), 'subscriptions', -1);
      if (ownKey) tallies.add(ownKey, 'subscriptions', -1);
    };

    const connection: Connection = {
      id: randomUUID(),
      address,
      signal: stop.signal,
      get identity() {
        return identity;
      },
      get viewer() {
        return viewer;
      },
      get ending() {
        return ending;
      },
      sessionPort,

      async authenticate(presented, appkey) {
        if (viewer) throw new ConnectionRefused('forbidden', 'The identity of a connection is fixed');
        identity = presented;
        let resolved: AgentViewer | VisitorViewer;
        try {
          resolved =
            presented.kind === 'visitor'
              ? await requireVisitorByHash(deps, presented.tokenHash)
              : await requireAgent(deps, await sessionPort(), address);
          if (appkey !== undefined) await requireOwnAppkey(deps, resolved, appkey);
        } catch (error) {
          identity = undefined;
          const classified = classifyError(error);
          if (classified.code === 'SERVICE_UNAVAILABLE') {
            throw new ConnectionRefused('try_later', 'Service unavailable: retry later');
          }
          if (classified.code === 'FORBIDDEN') throw new ConnectionRefused('forbidden', classified.message);
          throw new ConnectionRefused(
            'forbidden',
            presented.kind === 'visitor'
              ? 'Visitor token not valid or expired: get a new visitor token'
              : 'Agent Session not valid or expired: log in again (a visitor token goes in authorization)',
          );
        }
        const key = identityKey(resolved);
        if (tallies.of(key).sockets >= limits.socketsPerIdentity) {
          identity = undefined;
          throw new ConnectionRefused('too_many_connections', 'Too many connections for this identity');
        }
        if (stop.signal.aborted) throw new ConnectionRefused('going_away', 'Closed while connecting');
        // The connection keeps ids, not the agent row and Session port (it lives as long as the socket).
        const held = heldViewer(resolved);
        viewer = held;
        ownKey = key;
        tallies.add(key, 'sockets', 1);
        tallies.add(key, 'subscriptions', subscriptions);
        if (resolved.kind === 'agent') {
          presenceId = await deps.realtime.presence.connected(resolved);
          if (stop.signal.aborted) {
            // The socket closed while presence was being recorded: `closed` could not report it.
            await deps.realtime.presence.disconnected(presenceId);
            presenceId = undefined;
            return resolved;
          }
          // One watch per socket serves its subscriptions too (each used to hold its own).
          const agent = held as HeldAgentViewer;
          const onLevel = (level: string) => {
            if (stop.signal.aborted) return;
            // New subscriptions (Pusher authorises with the connection's viewer) are judged by it too.
            agent.level = level;
            transport.levelChanged(agent.agentId, level);
          };
          void deps.realtime.sessionEnds.watch(agent, stop.signal, onLevel).then((event) => {
            if (!event || stop.signal.aborted) return;
            transport.sessionEnded(event);
            void endSession();
          });
        }
        startRechecks();
        return resolved;
      },

      admitSubscription() {
        if (ending) throw new DomainError('UNAUTHENTICATED', 'The Session of this socket ended: log in again');
        const now = Date.now();
        if (now - window.start >= SUBSCRIBE_RATE.windowMs) {
          window.start = now;
          window.count = 0;
        }
        if (++window.count > SUBSCRIBE_RATE.max) {
          end('subscribe_rate', 'Too many subscribe requests');
          throw new DomainError('RATE_LIMITED', 'Too many subscribe requests');
        }
        const refuse = (message: string) => new DomainError('RATE_LIMITED', message);
        if (subscriptions >= limits.subscriptionsPerSocket) {
          throw refuse(`At most ${limits.subscriptionsPerSocket} operations at once on one socket`);
        }
        if (ownKey && tallies.of(ownKey).subscriptions >= limits.subscriptionsPerIdentity) {
          throw refuse(`At most ${limits.subscriptionsPerIdentity} subscriptions at once for one identity`);
        }
        if (tallies.of(addressKey(address)).subscriptions >= limits.subscriptionsPerAddress) {
          throw refuse(`At most ${limits.subscriptionsPerAddress} subscriptions at once from one address`);
        }
        if (tallies.total.subscriptions >= limits.maxSubscriptions) throw refuse('Server at capacity: retry later');
        subscriptions++;
        tallies.total.subscriptions++;
        tallies.add(addressKey(address), 'subscriptions', 1);
        if (ownKey) tallies.add(ownKey, 'subscriptions', 1);
        let released = false;
        return () => {
          if (released || stop.signal.aborted) return; // after close, `closed` released everything
          released = true;
          releaseSubscription();
        };
      },

      followCapability(stillValid, reason) {
        capabilities.push({ stillValid, reason });
        startRechecks();
      },

      holdCapability(holder) {
        const key = identityKey(holder);
        if (key === ownKey || capabilityHolders.has(key) || stop.signal.aborted) return;
        if (tallies.of(key).sockets >= limits.socketsPerIdentity)
          throw new DomainError('RATE_LIMITED', 'Too many connections on this visitor channel');
        capabilityHolders.add(key);
        tallies.add(key, 'sockets', 1);
      },

      end,

      async closed() {
        if (stop.signal.aborted) return;
        stop.abort();
        clearInterval(revalidate);
        while (subscriptions > 0) releaseSubscription();
        tallies.total.sockets--;
        tallies.add(addressKey(address), 'sockets', -1);
        if (ownKey) tallies.add(ownKey, 'sockets', -1);
        for (const key of capabilityHolders) tallies.add(key, 'sockets', -1);
        capabilityHolders.clear();
        await deps.realtime.presence.disconnected(presenceId);
      },
    };
    return connection;
  }

  return { limits, open, counts: () => ({ ...tallies.total }) };
}
