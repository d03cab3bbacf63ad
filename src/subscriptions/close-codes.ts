import type { ConnectionEnd } from './connection.js';

/**
 * Every graphql-ws close code the gateway sends, and what a client should do about it (also in
 * docs/realtime.md). graphql-ws's client retries 1001 and 1013 by itself and
 * gives up on 4401, 4403 and 4429. graphql-ws's own codes (4400, 4409, 4500 for a failure while
 * handling a message: ws.ts) are in its CloseCode.
 */
export const WsCloseCode = {
  /** Graceful shutdown of this instance: reconnect (to another instance) and resume with `since`. */
  GoingAway: 1001,
  /**
   * Try again later: a slow consumer (too many undelivered events or buffered bytes), the
   * instance at its socket ceiling, or a backing service unavailable at connect time. Reconnect
   * with backoff and resume with `since`.
   */
  TryAgainLater: 1013,
  /** The agent Session ended (logout, expiry, account disabled): log in again. */
  SessionEnded: 4401,
  /**
   * `connection_init` without a valid identity, or with an appkey of another merchant (graphql-ws
   * Forbidden; the reason says which mistake); also a visitor socket whose token was revoked or
   * expired since.
   */
  Forbidden: 4403,
  /** No `connection_init` within the wait (graphql-ws ConnectionInitialisationTimeout). */
  InitTimeout: 4408,
  /**
   * Too many: more than SUBSCRIBE_RATE `subscribe` messages in its window, over a per-identity
   * or per-address socket cap, or `connection_init` from an address past its failed visitor-token
   * checks (ours; graphql-ws uses 4429 for a second `connection_init`).
   */
  TooMany: 4429,
} as const;

/** The graphql-ws close code of each way the core ends a connection. */
export const wsCloseCodeOf: Record<ConnectionEnd, number> = {
  session_ended: WsCloseCode.SessionEnded,
  forbidden: WsCloseCode.Forbidden,
  slow_consumer: WsCloseCode.TryAgainLater,
  going_away: WsCloseCode.GoingAway,
  subscribe_rate: WsCloseCode.TooMany,
  too_many_connections: WsCloseCode.TooMany,
  rate_limited: WsCloseCode.TooMany,
  try_later: WsCloseCode.TryAgainLater,
};
