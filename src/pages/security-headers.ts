import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import helmet from 'helmet';
import type { Config } from '../config.js';
import { pathOf, wsAddressFor } from '../http/request.js';
import { WIDGET_FRAME_PATH, WIDGET_LOADER_PATH } from './widget.js';

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
  const directives = {
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
  };
  // The pages run on plain http in development; HSTS belongs to the TLS terminator's config.
  const hsts = config.env === 'production';
  const withCsp = helmet({ contentSecurityPolicy: { useDefaults: false, directives }, strictTransportSecurity: hsts });
  // The widget's panel is embedded by merchants' sites, whatever their origin (docs/widget.md):
  // any ancestor may frame it, and X-Frame-Options (which cannot say "any") is left out.
  const widgetFrame = helmet({
    contentSecurityPolicy: { useDefaults: false, directives: { ...directives, frameAncestors: ['*'] } },
    xFrameOptions: false,
    strictTransportSecurity: hsts,
  });
  // The loader is a script of other origins' pages: loaded no-cors, so it must be cross-origin readable.
  const widgetLoader = helmet({
    contentSecurityPolicy: { useDefaults: false, directives },
    crossOriginResourcePolicy: { policy: 'cross-origin' },
    strictTransportSecurity: hsts,
  });
  const variantOf = (path: string) =>
    path === WIDGET_FRAME_PATH
      ? { name: 'frame', handler: widgetFrame }
      : path === WIDGET_LOADER_PATH
        ? { name: 'loader', handler: widgetLoader }
        : { name: 'page', handler: withCsp };
  const withoutCsp = helmet({ contentSecurityPolicy: false, strictTransportSecurity: config.env === 'production' });
  const graphiql = config.env === 'development';

  // helmet's headers depend only on the socket origin (so on the WebSocket address), so each distinct set is computed once by
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
    const path = pathOf(req);
    if (graphiql && path === '/graphql') {
      for (const [k, v] of plain) res.setHeader(k, v);
      return next();
    }
    const variant = variantOf(path);
    // Keyed by the WebSocket address (a few string checks), so a known one needs no URL parse.
    const key = `${variant.name} ${wsAddressFor(req, config)}`;
    let headers = byOrigin.get(key);
    if (!headers) {
      headers = record(variant.handler, req);
      if (byOrigin.size < MAX_ORIGINS) byOrigin.set(key, headers);
    }
    for (const [k, v] of headers) res.setHeader(k, v);
    next();
  };
}
