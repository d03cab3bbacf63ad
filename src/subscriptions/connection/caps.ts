import { DomainError } from '../../errors.js';
import type { ChannelViewer } from '../../resolvers/channels.js';
import type { ConnectionEnd } from '../connection.js';
import type { RealtimeLimits } from '../limits.js';

/**
 * The cap arithmetic of the connection core, apart from the connection's life: what the instance
 * counts per identity and per address, what one socket adds to it (so that closing the socket gives
 * back exactly that), and a socket's subscribe rate. The caps themselves are limits.ts's.
 */

interface Tally {
  sockets: number;
  subscriptions: number;
}

/** Instance-wide tallies per identity and per address, for the caps of limits.ts. */
export function createTallies() {
  const total: Tally = { sockets: 0, subscriptions: 0 };
  const byKey = new Map<string, Tally>();
  const of = (key: string) => byKey.get(key) ?? { sockets: 0, subscriptions: 0 };
  const add = (key: string, field: keyof Tally, delta: number) => {
    const tally = of(key);
    tally[field] += delta;
    if (tally.sockets <= 0 && tally.subscriptions <= 0) byKey.delete(key);
    else byKey.set(key, tally);
  };
  // An entry goes with its last socket and subscription: none is kept per past address or identity.
  return { total, of, add, tracked: () => byKey.size };
}

export type Tallies = ReturnType<typeof createTallies>;

const addressKey = (address: string) => `address:${address}`;
/** The tally key of an identity (an agent or a visitor: a visitor followed by capability counts as itself). */
export const identityKey = (viewer: ChannelViewer) =>
  viewer.kind === 'agent' ? `agent:${viewer.agentId}` : `visitor:${viewer.visitorId}`;

/** Why a new socket from `address` is refused, if it is: the instance's ceiling first, then the address's cap. */
export function socketRefusal(
  tallies: Tallies,
  limits: RealtimeLimits,
  address: string,
): { end: ConnectionEnd; message: string } | undefined {
  if (tallies.total.sockets >= limits.maxSockets) {
    return { end: 'try_later', message: 'Server at capacity: retry later' };
  }
  if (tallies.of(addressKey(address)).sockets >= limits.socketsPerAddress) {
    return { end: 'too_many_connections', message: 'Too many connections from this address' };
  }
  return undefined;
}

/**
 * Counts a new socket from `address` and returns its share of the tallies: its identity once
 * known, the visitors it follows by capability, its subscriptions. `release` (at close) gives
 * all of it back; once `closed` aborts, nothing more is counted or released.
 */
export function countSocket(tallies: Tallies, limits: RealtimeLimits, address: string, closed: AbortSignal) {
  tallies.total.sockets++;
  tallies.add(addressKey(address), 'sockets', 1);
  let ownKey: string | undefined;
  let subscriptions = 0;
  const capabilityHolders = new Set<string>(); // identity keys this socket counts against through a capability

  const releaseSubscription = () => {
    subscriptions--;
    tallies.total.subscriptions--;
    tallies.add(addressKey(address), 'subscriptions', -1);
    if (ownKey) tallies.add(ownKey, 'subscriptions', -1);
  };
  const refuse = (message: string) => new DomainError('RATE_LIMITED', message);

  return {
    /** True when identity `key` already holds its most sockets. */
    identityFull: (key: string) => tallies.of(key).sockets >= limits.socketsPerIdentity,

    /** The socket is identity `key`'s from now on: it and its subscriptions so far count against it. */
    claimIdentity(key: string) {
      ownKey = key;
      tallies.add(key, 'sockets', 1);
      tallies.add(key, 'subscriptions', subscriptions);
    },

    /** Counts one more subscription past the per-socket, identity, address and global caps (RATE_LIMITED); returns its release. */
    admitSubscription(): () => void {
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
        if (released || closed.aborted) return; // after close, `release` gave everything back
        released = true;
        releaseSubscription();
      };
    },

    /** Counts the socket once against identity `key`, whose channel it follows by capability (RATE_LIMITED past its socket cap). */
    holdCapability(key: string) {
      if (key === ownKey || capabilityHolders.has(key) || closed.aborted) return;
      if (tallies.of(key).sockets >= limits.socketsPerIdentity)
        throw new DomainError('RATE_LIMITED', 'Too many connections on this visitor channel');
      capabilityHolders.add(key);
      tallies.add(key, 'sockets', 1);
    },

    /** The socket closed: gives back its subscriptions and every socket slot it held. */
    release() {
      while (subscriptions > 0) releaseSubscription();
      tallies.total.sockets--;
      tallies.add(addressKey(address), 'sockets', -1);
      if (ownKey) tallies.add(ownKey, 'sockets', -1);
      for (const key of capabilityHolders) tallies.add(key, 'sockets', -1);
      capabilityHolders.clear();
    },
  };
}

export type SocketShare = ReturnType<typeof countSocket>;

/**
 * A socket's subscribe-rate window: each call counts one `subscribe` and answers whether it is
 * within `rate.max` per `rate.windowMs` (the window starts when the socket opens).
 */
export function subscribeWindow(rate: { max: number; windowMs: number }): () => boolean {
  const window = { start: Date.now(), count: 0 };
  return () => {
    const now = Date.now();
    if (now - window.start >= rate.windowMs) {
      window.start = now;
      window.count = 0;
    }
    return ++window.count <= rate.max;
  };
}
