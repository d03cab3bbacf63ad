import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import helmet from 'helmet';
import type { Config } from '../config.js';
import { wsAddressFor } from '../http/request.js';

/**
 * helmet's usual headers plus a Content-Security-Policy that lets pages load scripts, styles,
 * images and fonts from this server only, and connect to this server and its WebSocket
 * address. No inline script or style is allowed anywhere: pages keep their code in /assets/.
 *
 * GraphiQL (served at /graphql outside production) loads its code from a CDN and inline, so
 * that path gets the other headers without the CSP.
 */
export function securityHeaders(config: Config): RequestHandler {
  const socketOrigin = (req: IncomingMessage, _res: ServerResponse) => {
    try {
      return new URL(wsAddressFor(req, config)).origin;
    } catch {
      return "'self'";
    }
  };
  const withCsp = helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        // blob: only for attachments the visitor page fetched with its bearer token (an <img> cannot send it).
        imgSrc: ["'self'", 'blob:'],
        fontSrc: ["'self'"],
        connectSrc: ["'self'", socketOrigin],
        objectSrc: ["'none'"],
        baseUri: ["'self'"],
        formAction: ["'self'"],
        frameAncestors: ["'self'"],
      },
    },
    // The pages run on plain http in development; HSTS belongs to the TLS terminator's config.
    strictTransportSecurity: config.env === 'production',
  });
  const withoutCsp = helmet({ contentSecurityPolicy: false, strictTransportSecurity: config.env === 'production' });
  const graphiql = config.env === 'development';

  // helmet's headers depend only on the socket origin, so each distinct set is computed once by
  // running helmet against a recording response, then copied onto every response: the headers
  // stay helmet's, the per-request cost is a few setHeader calls.
  const record = (handler: RequestHandler, req: IncomingMessage) => {
    const headers: [string, string][] = [];
    const res = { setHeader: (k: string, v: unknown) => headers.push([k, String(v)]), removeHeader: () => {} };
    handler(req as never, res as never, () => {});
    return headers;
  };
  const plain = record(withoutCsp, { headers: {}, socket: {} } as IncomingMessage);
  const byOrigin = new Map<string, [string, string][]>();
  const MAX_ORIGINS = 64; // Host headers are caller-chosen: past this, compute without caching

  return (req, res, next) => {
    res.removeHeader('X-Powered-By');
    const path = req.path;
    if (graphiql && path === '/graphql') {
      for (const [k, v] of plain) res.setHeader(k, v);
      return next();
    }
    const origin = socketOrigin(req, res);
    let headers = byOrigin.get(origin);
    if (!headers) {
      headers = record(withCsp, req);
      if (byOrigin.size < MAX_ORIGINS) byOrigin.set(origin, headers);
    }
    for (const [k, v] of headers) res.setHeader(k, v);
    next();
  };
}
