import type { NextFunction, Request, Response } from 'express';
import type { Config } from '../config.js';
import { badInput, DomainError } from '../errors.js';
import { listedOrigins, type OriginPolicy, originAllowedFor } from './origins.js';
import { pathOf, queryOf } from './request.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The paths of the agent login: its Session must never be one named in the URL. */
const LOGIN_PATHS = new Set(['/agent/login/check']);

/**
 * Refuses state-changing requests (any method but GET, HEAD, OPTIONS) that a browser sent from
 * a page outside the Origin allowlist (src/http/origins.ts): a cross-site form cannot log a
 * victim's browser into the attacker's account (login CSRF) or act with its cookie. The browser
 * says where a request comes from in `Origin`, else in `Sec-Fetch-Site`; a request with neither
 * (curl, a server, an older browser's same-origin form) is a non-browser client and passes.
 * Refused: 403 with envelope code 1403 (through the app's error handler).
 *
 * Also, the login never adopts a Session ID chosen in the URL: `?token=` on the login is
 * refused (1000), so a link or form cannot make a victim's login run in (and switch their
 * browser to) a pre-login Session the attacker prepared. The `token` header still works (a
 * cross-site page cannot set it without a CORS preflight).
 */
export function refuseCrossSiteWrites(config: OriginPolicy & Pick<Config, 'allowedOrigins'>) {
  const listed = listedOrigins(config);
  return (req: Request, _res: Response, next: NextFunction) => {
    if (SAFE_METHODS.has(req.method)) return next();
    const origin = req.headers.origin;
    const fetchSite = req.headers['sec-fetch-site'];
    const crossSite =
      typeof origin === 'string'
        ? !originAllowedFor(origin, req, config, listed)
        : fetchSite === 'cross-site' || fetchSite === 'same-site';
    if (crossSite || Array.isArray(origin)) {
      return next(new DomainError('FORBIDDEN', 'Cross-site request refused'));
    }
    if (LOGIN_PATHS.has(pathOf(req)) && queryOf(req).has('token')) {
      return next(badInput('token may not be given in the URL to log in: use the token header'));
    }
    next();
  };
}
