/**
 * Every WebSocket close code the gateway sends, and what a client should do about it (also in
 * the README "Real-time" section). graphql-ws's client retries 1001 and 1013 by itself and
 * gives up on 4401.
 */
export const WsCloseCode = {
  /** Graceful shutdown of this instance: reconnect (to another instance) and resume with `since`. */
  GoingAway: 1001,
  /** Slow consumer: too many undelivered events or too many buffered bytes. Reconnect and resume with `since`. */
  SlowConsumer: 1013,
  /** The agent Session ended (logout, expiry, account disabled): log in again. */
  SessionEnded: 4401,
  /**
   * `connection_init` without a valid identity, or with an appkey of another merchant (graphql-ws
   * Forbidden); also a visitor socket whose token was revoked or expired since.
   */
  Forbidden: 4403,
  /** No `connection_init` within the wait (graphql-ws ConnectionInitialisationTimeout). */
  InitTimeout: 4408,
  /** More than SUBSCRIBE_RATE `subscribe` messages in its window (ours; graphql-ws uses 4429 for a second `connection_init`). */
  TooManySubscribes: 4429,
} as const;
