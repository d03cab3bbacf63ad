import { int, type Parsed, url } from './variables.js';

/** The real-time channels: the address clients are told, presence, history and the socket caps. */
export const realtimeVariables = {
  PUBLIC_WS_ADDRESS: url(['ws:', 'wss:']).optional(),
  PRESENCE_GRACE_SECONDS: int(0, 3600).default(15),
  CHANNEL_HISTORY_SIZE: int(10, 1_000_000).default(1000),
  WS_MAX_SOCKETS_PER_IDENTITY: int(1, 1_000_000).default(20),
  WS_MAX_SOCKETS_PER_ADDRESS: int(1, 1_000_000).default(200),
  WS_MAX_SUBSCRIPTIONS_PER_IDENTITY: int(1, 10_000_000).default(100),
  WS_MAX_SUBSCRIPTIONS_PER_ADDRESS: int(1, 10_000_000).default(1000),
  WS_MAX_SOCKETS: int(1, 10_000_000).default(10_000),
  WS_MAX_SUBSCRIPTIONS: int(1, 10_000_000).default(20_000),
  WS_CONNECTION_INIT_TIMEOUT_MS: int(100, 60_000).default(5000),
  WS_HISTORY_REPLAYS_PER_MINUTE: int(1, 100_000_000).default(200),
  WS_HISTORY_REPLAYS_PER_ADDRESS_PER_MINUTE: int(1, 100_000_000).default(2000),
  BUSINESS_HOURS_RELOAD_MS: int(100, 600_000).default(10_000),
};

export interface RealtimeSettings {
  publicWsAddress?: string;
  presenceGraceSeconds: number;
  channelHistorySize: number;
  /** How often each instance re-reads the business-hours calendars for their boundary events. */
  businessHoursReloadMs: number;
  /** A graphql-ws socket that sends no `connection_init` within this is closed with 4408. */
  connectionInitTimeoutMs: number;
  /** Caps on real-time sockets and subscriptions (src/subscriptions/limits.ts, docs/security.md). */
  realtimeLimits: {
    socketsPerIdentity: number;
    socketsPerAddress: number;
    subscriptionsPerIdentity: number;
    subscriptionsPerAddress: number;
    maxSockets: number;
    maxSubscriptions: number;
  };
  /** Subscriptions with `since` (history replays) per minute (src/resolvers/budgets/history-replays.ts). */
  historyReplays: {
    /** Per identity, agent or visitor (default 200: twice WS_MAX_SUBSCRIPTIONS_PER_IDENTITY). */
    perIdentityPerMinute: number;
    /** Per client address (default 2,000: twice WS_MAX_SUBSCRIPTIONS_PER_ADDRESS). */
    perAddressPerMinute: number;
  };
}

export function readRealtimeSettings(e: Parsed<typeof realtimeVariables>): RealtimeSettings {
  return {
    publicWsAddress: e.PUBLIC_WS_ADDRESS,
    presenceGraceSeconds: e.PRESENCE_GRACE_SECONDS,
    channelHistorySize: e.CHANNEL_HISTORY_SIZE,
    connectionInitTimeoutMs: e.WS_CONNECTION_INIT_TIMEOUT_MS,
    businessHoursReloadMs: e.BUSINESS_HOURS_RELOAD_MS,
    realtimeLimits: {
      socketsPerIdentity: e.WS_MAX_SOCKETS_PER_IDENTITY,
      socketsPerAddress: e.WS_MAX_SOCKETS_PER_ADDRESS,
      subscriptionsPerIdentity: e.WS_MAX_SUBSCRIPTIONS_PER_IDENTITY,
      subscriptionsPerAddress: e.WS_MAX_SUBSCRIPTIONS_PER_ADDRESS,
      maxSockets: e.WS_MAX_SOCKETS,
      maxSubscriptions: e.WS_MAX_SUBSCRIPTIONS,
    },
    historyReplays: {
      perIdentityPerMinute: e.WS_HISTORY_REPLAYS_PER_MINUTE,
      perAddressPerMinute: e.WS_HISTORY_REPLAYS_PER_ADDRESS_PER_MINUTE,
    },
  };
}
