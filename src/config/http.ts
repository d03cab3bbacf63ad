import { z } from 'zod';
import { bool, int, type Parsed } from './variables.js';

/** The HTTP server's trust, origins and abuse limits (docs/security.md). */
export const httpVariables = {
  TRUST_PROXY: bool.default('off'),
  ALLOWED_ORIGINS: z.string().optional(),
  VISITOR_ONLINE_INTERVAL_SECONDS: int(1, 86_400).default(60),
  HTTP_HEADERS_TIMEOUT_MS: int(1000, 600_000).default(10_000),
  HTTP_REQUEST_TIMEOUT_MS: int(1000, 3_600_000).default(30_000),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: int(1000, 600_000).default(5000),
  MAX_CONNECTIONS_PER_ADDRESS: int(0, 1_000_000).default(256),
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  PUSHER_AUTH_PER_MINUTE: int(1, 1_000_000).default(120),
  PUSHER_CHANNEL_LOOKUPS_PER_MINUTE: int(1, 10_000_000).default(600),
  PUSHER_UNKNOWN_APPKEYS_PER_MINUTE: int(1, 1_000_000).default(30),
  VISITOR_TOKEN_FAILURES_PER_MINUTE: int(1, 1_000_000).default(60),
  VISITOR_REFUSAL_DELAY_MS: int(0, 10_000).default(1000),
};

export interface HttpSettings {
  trustProxy: boolean;
  allowedOrigins: string[];
  /** Abuse limits of the HTTP server and the visitor bootstrap (docs/security.md). */
  hardening: {
    /** `visitor.online` is published at most once per visitor per this many seconds. */
    visitorOnlineIntervalSeconds: number;
    /** Node's `server.headersTimeout`: the request line and headers must arrive within it. */
    headersTimeoutMs: number;
    /** Node's `server.requestTimeout`: the whole request (body included) must arrive within it. */
    requestTimeoutMs: number;
    /** Node's `server.keepAliveTimeout`: an idle keep-alive connection is closed after it. */
    keepAliveTimeoutMs: number;
    /** Open HTTP connections per client address (0: no cap); not applied behind TRUST_PROXY. */
    maxConnectionsPerAddress: number;
    /** When set, GET /metrics requires `Authorization: Bearer <token>`. */
    metricsToken?: string;
    /** `POST /pusher/auth` calls per client address per minute. */
    pusherAuthPerMinute: number;
    /** Visitor channels a Pusher client may ask for by name (a lookup each) per client address per minute. */
    pusherChannelLookupsPerMinute: number;
    /** Pusher upgrades naming an unknown appkey (a lookup each) per client address per minute. */
    pusherUnknownAppkeysPerMinute: number;
    /** Failed visitor-token lookups (unknown, revoked, expired) per client address per minute. */
    visitorTokenFailuresPerMinute: number;
    /**
     * A visitor endpoint's RATE_LIMITED answer is held this long (at most its `Retry-After`)
     * before it is written: a client that sends again at once makes one request per second per
     * connection, not as many as the instance can refuse (0: answered at once).
     */
    visitorRefusalDelayMs: number;
  };
}

export function httpProblems(e: Parsed<typeof httpVariables>): string[] {
  return e.HTTP_HEADERS_TIMEOUT_MS > e.HTTP_REQUEST_TIMEOUT_MS
    ? ['HTTP_HEADERS_TIMEOUT_MS: must not exceed HTTP_REQUEST_TIMEOUT_MS']
    : [];
}

export function readHttpSettings(e: Parsed<typeof httpVariables>): HttpSettings {
  return {
    trustProxy: e.TRUST_PROXY,
    allowedOrigins: (e.ALLOWED_ORIGINS ?? '')
      .split(',')
      .map((o) => o.trim())
      .filter(Boolean),
    hardening: {
      visitorOnlineIntervalSeconds: e.VISITOR_ONLINE_INTERVAL_SECONDS,
      headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS,
      maxConnectionsPerAddress: e.MAX_CONNECTIONS_PER_ADDRESS,
      metricsToken: e.METRICS_TOKEN,
      pusherAuthPerMinute: e.PUSHER_AUTH_PER_MINUTE,
      pusherChannelLookupsPerMinute: e.PUSHER_CHANNEL_LOOKUPS_PER_MINUTE,
      pusherUnknownAppkeysPerMinute: e.PUSHER_UNKNOWN_APPKEYS_PER_MINUTE,
      visitorTokenFailuresPerMinute: e.VISITOR_TOKEN_FAILURES_PER_MINUTE,
      visitorRefusalDelayMs: e.VISITOR_REFUSAL_DELAY_MS,
    },
  };
}
