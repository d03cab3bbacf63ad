import type { IncomingMessage } from 'node:http';
import type { Config } from '../config.js';
import { badInput } from '../errors.js';

/** The query string of a request, parsed from the raw URL (Express 5 `req.query` is absent on upgrades). */
export const queryOf = (req: IncomingMessage) => new URL(req.url ?? '/', 'http://x').searchParams;

/**
 * The request's path without its query: express's `req.path`, or (for a request the front door
 * answers before express, src/http/front.ts) the same read from the raw URL.
 */
export function pathOf(req: IncomingMessage): string {
  const path = (req as { path?: unknown }).path;
  if (typeof path === 'string') return path;
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/** A header that must be given at most once as a single value. */
export function singleHeader(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  if (Array.isArray(value)) throw badInput(`header ${name} must be given once`);
  return value;
}

/** What a request or connection carrying both identities is told, on every transport. */
export const TWO_IDENTITIES = 'Send one identity: a visitor Authorization: Bearer token or an agent token, never both';

/** The visitor token of `Authorization: Bearer <token>`, if any. */
export function bearerToken(req: IncomingMessage): string | undefined {
  const match = /^Bearer\s+(\S{1,512})\s*$/i.exec(singleHeader(req, 'authorization') ?? '');
  return match?.[1];
}

/**
 * The caller's address: the socket peer, or the first `X-Forwarded-For` hop only when
 * TRUST_PROXY says a proxy in front of us sets it (otherwise anyone could forge it).
 */
export function clientIp(req: IncomingMessage, config: Pick<Config, 'trustProxy'>): string {
  if (config.trustProxy) {
    const forwarded = singleHeaderSafe(req, 'x-forwarded-for')?.split(',')[0]?.trim();
    if (forwarded && /^[0-9a-fA-F:.]{2,45}$/.test(forwarded)) return forwarded;
  }
  return req.socket.remoteAddress ?? 'unknown';
}

const singleHeaderSafe = (req: IncomingMessage, name: string) => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

const HOST = /^[A-Za-z0-9.-]{1,253}(:\d{1,5})?$|^\[[0-9a-fA-F:.]{2,45}\](:\d{1,5})?$/;

/**
 * The WebSocket address clients connect to: PUBLIC_WS_ADDRESS when set, else this request's
 * own host and scheme with the GraphQL path (a malformed Host falls back to localhost).
 */
export function wsAddressFor(
  req: IncomingMessage,
  config: Pick<Config, 'publicWsAddress' | 'port' | 'trustProxy'>,
): string {
  if (config.publicWsAddress) return config.publicWsAddress;
  const host = singleHeaderSafe(req, 'host');
  const forwardedProto = config.trustProxy ? singleHeaderSafe(req, 'x-forwarded-proto') : undefined;
  const secure = forwardedProto === 'https' || (req.socket as { encrypted?: boolean }).encrypted === true;
  return `${secure ? 'wss' : 'ws'}://${host && HOST.test(host) ? host : `localhost:${config.port}`}/graphql`;
}
