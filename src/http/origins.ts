import type { IncomingMessage } from 'node:http';
import type { Config } from '../config.js';

/**
 * The one Origin allowlist of the gateway: the gateway's own origin (the request's Host, with
 * the scheme it arrived over — either one when that is unknown), the origin of PUBLIC_WS_ADDRESS
 * and each of ALLOWED_ORIGINS. CORS on /graphql and the cross-site refusal of state-changing
 * requests (src/http/cross-site.ts) read it, and so does the WebSocket upgrade of both real-time
 * transports (verifyWebSocketOrigin below).
 */
export type OriginPolicy = Pick<Config, 'allowedOrigins' | 'publicWsAddress' | 'trustProxy'>;

/** The serialised origin of a URL, or undefined for a malformed one or an opaque `null`. */
export function originOf(value: string): string | undefined {
  try {
    const origin = new URL(value).origin;
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
}

/** Whether a request came over TLS: the socket itself, or a trusted proxy's X-Forwarded-Proto; undefined when unknown. */
function requestIsSecure(req: IncomingMessage, config: Pick<Config, 'trustProxy'>): boolean | undefined {
  if ((req.socket as { encrypted?: boolean }).encrypted) return true;
  if (!config.trustProxy) return undefined; // a TLS-terminating proxy may be in front: unknown
  const proto = req.headers['x-forwarded-proto'];
  const first = (Array.isArray(proto) ? proto[0] : proto)?.split(',')[0]?.trim().toLowerCase();
  return first === undefined ? false : first === 'https';
}

/** The origins ALLOWED_ORIGINS names (the gateway's own origin aside). */
export function listedOrigins(config: Pick<Config, 'allowedOrigins' | 'publicWsAddress'>): Set<string> {
  const listed = new Set<string>();
  for (const entry of config.allowedOrigins) {
    const o = originOf(entry);
    if (o) listed.add(o);
  }
  if (config.publicWsAddress) {
    const o = originOf(config.publicWsAddress.replace(/^ws/i, 'http'));
    if (o) listed.add(o);
  }
  return listed;
}

/** Whether `origin` (a browser's Origin header) is the gateway's own origin for this request. */
function isOwnOrigin(origin: string, req: IncomingMessage, config: Pick<Config, 'trustProxy'>): boolean {
  const host = req.headers.host;
  if (!host) return false;
  const secure = requestIsSecure(req, config);
  const schemes = secure === undefined ? ['http', 'https'] : [secure ? 'https' : 'http'];
  return schemes.some((scheme) => originOf(`${scheme}://${host}`) === origin);
}

/**
 * Whether a browser Origin is allowed for this request. No Origin (a non-browser client, or a
 * same-origin GET): allowed. `null`, a malformed Origin or any origin outside the list: refused.
 */
export function originAllowedFor(
  origin: string | undefined,
  req: IncomingMessage,
  config: OriginPolicy,
  listed = listedOrigins(config),
): boolean {
  if (origin === undefined) return true;
  const asked = originOf(origin);
  if (!asked) return false;
  return listed.has(asked) || isOwnOrigin(asked, req, config);
}

/**
 * `ws`'s verifyClient for both real-time transports, with the rule above: cross-site WebSocket
 * hijacking — a page on another site must not open a socket that carries the agent's Session
 * cookie — refused with 403 before the socket opens.
 */
export function verifyWebSocketOrigin(config: OriginPolicy) {
  const listed = listedOrigins(config);
  return (
    info: { origin?: string; secure: boolean; req: IncomingMessage },
    done: (ok: boolean, code?: number, message?: string) => void,
  ) => {
    if (originAllowedFor(info.origin, info.req, config, listed)) done(true);
    else done(false, 403, 'Origin not allowed');
  };
}
