import type { NextFunction, Request, Response } from 'express';
import { pathOf } from './request.js';

/**
 * `Cache-Control: no-store` on every answer of the API paths (agent and visitor JSON, GraphQL,
 * the internal API): they are per-caller and often authenticated, so no browser or shared cache
 * may keep them. A handler that sets its own Cache-Control (a captcha, a page) still can.
 */
export function noStore(_req: Request, res: Response, next: NextFunction) {
  res.setHeader('Cache-Control', 'no-store');
  next();
}

/** The path prefixes `noStore` is mounted on. */
export const API_PATHS = ['/agent', '/visitor', '/graphql', '/internal', '/api'];

/**
 * `noStore` on the API paths, as one middleware: `app.use(API_PATHS, noStore)` would add a layer
 * per prefix for every request to walk. A prefix matches as express mounts one: the whole path
 * or a path segment, case-insensitively.
 */
export function noStoreOnApiPaths(req: Request, res: Response, next: NextFunction) {
  const path = pathOf(req).toLowerCase();
  for (const prefix of API_PATHS) {
    if (path.startsWith(prefix) && (path.length === prefix.length || path[prefix.length] === '/')) {
      res.setHeader('Cache-Control', 'no-store');
      break;
    }
  }
  next();
}
