import type { Config } from '../config.js';

/** Largest message a client may send on a socket (both protocols); subscriptions are small. */
export const MAX_WS_PAYLOAD_BYTES = 16 * 1024;
/** Operations one socket may run at once (an agent needs two channels, a visitor one). */
const MAX_SUBSCRIPTIONS_PER_SOCKET = 20;
/** Bytes `ws` may hold for a socket that does not read; beyond, the socket is closed as a slow consumer. */
export const MAX_BUFFERED_BYTES = 1024 * 1024;

/**
 * The caps on real-time resources, counted per instance across both transports (graphql-ws and
 * Pusher). Per identity and per address they stop one client from exhausting the instance; the
 * global ceilings keep `/healthz` and the HTTP API answering whatever arrives (docs/security.md).
 */
export interface RealtimeLimits {
  /** Sockets one agent or visitor may hold open (WS_MAX_SOCKETS_PER_IDENTITY, default 20). */
  socketsPerIdentity: number;
  /** Sockets from one client address (WS_MAX_SOCKETS_PER_ADDRESS, default 200: agents behind one NAT). */
  socketsPerAddress: number;
  /** Subscriptions one socket may run at once (20, fixed). */
  subscriptionsPerSocket: number;
  /** Subscriptions of one identity over all its sockets (WS_MAX_SUBSCRIPTIONS_PER_IDENTITY, default 100). */
  subscriptionsPerIdentity: number;
  /** Subscriptions from one address (WS_MAX_SUBSCRIPTIONS_PER_ADDRESS, default 1,000). */
  subscriptionsPerAddress: number;
  /** Sockets on the instance (WS_MAX_SOCKETS, default 10,000). */
  maxSockets: number;
  /** Subscriptions on the instance (WS_MAX_SUBSCRIPTIONS, default 20,000). */
  maxSubscriptions: number;
}

export const realtimeLimitsOf = (config: Pick<Config, 'realtimeLimits'>): RealtimeLimits => ({
  ...config.realtimeLimits,
  subscriptionsPerSocket: MAX_SUBSCRIPTIONS_PER_SOCKET,
});
