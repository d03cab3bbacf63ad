import type { ServerResponse } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import type { Config } from '../config.js';
import { listedOrigins, originOf } from './origins.js';

/** How long a browser may cache a preflight answer. */
const PREFLIGHT_MAX_AGE_SECONDS = 600;
const ALLOWED_METHODS = 'GET, POST, OPTIONS';

/**
 * CORS for /graphql from the same allowlist as the WebSocket Origin check: only the origins of
 * ALLOWED_ORIGINS (and PUBLIC_WS_ADDRESS) get `Access-Control-Allow-Origin` — their own origin,
 * never a wildcard — with credentials; any other origin gets no CORS header at all, so a page
 * elsewhere (even on a sibling subdomain) cannot read an agent's answers. Same-origin pages need
 * no CORS. Replaces graphql-yoga's default, which reflects every Origin with credentials.
 */
export function graphqlCors(config: Pick<Config, 'allowedOrigins' | 'publicWsAddress'>) {
  const listed = listedOrigins(config);
  return (req: Request, res: Response, next: NextFunction) => {
    varyOnOrigin(res);
    const given = req.headers.origin;
    const origin = given === undefined ? undefined : originOf(given);
    const allowed = origin !== undefined && listed.has(origin);
    if (allowed) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Allow-Credentials', 'true');
    }
    if (req.method !== 'OPTIONS') return next();
    // A preflight: answered here, never executed.
    if (allowed) {
      const asked = req.headers['access-control-request-headers'];
      res.setHeader('Access-Control-Allow-Methods', ALLOWED_METHODS);
      if (typeof asked === 'string' && /^[A-Za-z0-9,\s-]{1,512}$/.test(asked)) {
        res.setHeader('Access-Control-Allow-Headers', asked);
      }
      res.setHeader('Access-Control-Max-Age', String(PREFLIGHT_MAX_AGE_SECONDS));
    }
    res.statusCode = 204;
    res.end();
  };
}

/** Adds `Origin` to `Vary` (as express's `res.vary` does), with node's own response methods. */
function varyOnOrigin(res: ServerResponse) {
  const current = res.getHeader('Vary');
  if (current === undefined) {
    res.setHeader('Vary', 'Origin');
    return;
  }
  const value = Array.isArray(current) ? current.join(', ') : String(current);
  if (/(^|,)\s*(origin|\*)\s*(,|$)/i.test(value)) return;
  res.setHeader('Vary', value ? `${value}, Origin` : 'Origin');
}
