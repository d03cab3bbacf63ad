import type { IncomingMessage } from 'node:http';
import type { Config } from '../config.js';

/** Whether this upgrade arrived over TLS: the socket itself, or a trusted proxy's X-Forwarded-Proto. */
export function requestIsSecure(req: IncomingMessage, config: Pick<Config, 'trustProxy'>): boolean | undefined {
  if ((req.socket as { encrypted?: boolean }).encrypted) return true;
  if (!config.trustProxy) return undefined; // a TLS-terminating proxy may be in front: unknown
  const proto = req.headers['x-forwarded-proto'];
  const first = (Array.isArray(proto) ? proto[0] : proto)?.split(',')[0]?.trim().toLowerCase();
  return first === undefined ? false : first === 'https';
}

const originOf = (value: string): string | undefined => {
  try {
    const origin = new URL(value).origin;
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
};

/**
 * The WebSocket Origin rule. No Origin header (a non-browser client): allowed. Otherwise the
 * Origin must be the gateway's own origin — the Host of the upgrade request with http (ws) or
 * https (wss); when whether the request came over TLS is unknown (a plain connection, maybe
 * behind a TLS-terminating proxy without TRUST_PROXY) either scheme — or the origin of
 * PUBLIC_WS_ADDRESS, or one of ALLOWED_ORIGINS. Anything else, including `null` and a
 * malformed Origin, is refused.
 */
export function originAllowed(
  origin: string | undefined,
  gateway: { host?: string; secure?: boolean; allowedOrigins: readonly string[]; publicWsAddress?: string },
): boolean {
  if (origin === undefined) return true;
  const asked = originOf(origin);
  if (!asked) return false;
  const own: string[] = [];
  if (gateway.host) {
    const schemes = gateway.secure === undefined ? ['http', 'https'] : [gateway.secure ? 'https' : 'http'];
    for (const scheme of schemes) {
      const o = originOf(`${scheme}://${gateway.host}`);
      if (o) own.push(o);
    }
  }
  if (gateway.publicWsAddress) {
    const o = originOf(gateway.publicWsAddress.replace(/^ws/i, 'http'));
    if (o) own.push(o);
  }
  for (const entry of gateway.allowedOrigins) {
    const o = originOf(entry);
    if (o) own.push(o);
  }
  return own.includes(asked);
}

/**
 * `ws`'s verifyClient for both transports: cross-site WebSocket hijacking — a page on another
 * site must not open a socket that carries the agent's Session cookie — refused with 403 before
 * the socket opens.
 */
export function verifyOrigin(config: Pick<Config, 'trustProxy' | 'allowedOrigins' | 'publicWsAddress'>) {
  return (
    info: { origin?: string; secure: boolean; req: IncomingMessage },
    done: (ok: boolean, code?: number, message?: string) => void,
  ) => {
    const allowed = originAllowed(info.origin, {
      host: info.req.headers.host,
      secure: requestIsSecure(info.req, config),
      allowedOrigins: config.allowedOrigins,
      publicWsAddress: config.publicWsAddress,
    });
    if (allowed) done(true);
    else done(false, 403, 'Origin not allowed');
  };
}
