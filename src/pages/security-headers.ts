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
        imgSrc: ["'self'"],
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
  const graphiql = config.env !== 'production';
  return (req, res, next) => {
    const path = new URL(req.url, 'http://x').pathname;
    if (graphiql && path === '/graphql') return withoutCsp(req, res, next);
    return withCsp(req, res, next);
  };
}
