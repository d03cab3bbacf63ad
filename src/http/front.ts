import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorRequestHandler, Express, NextFunction, Request, RequestHandler, Response } from 'express';
import { DomainError } from '../errors.js';

/**
 * The front door of the node:http server: a few exact requests answered before express.
 *
 * Express turns every request and response into its own objects by swapping their prototypes
 * (`Object.setPrototypeOf`), and node's HTTP code then runs on objects of a shape it was not
 * optimised for; `res.json` adds its own content negotiation. Measured on this machine
 * (BENCHMARKS.md, issue 33), a raw node:http handler that only swaps the prototypes before
 * writing the same bytes costs about 3× the CPU per request of one that does not, and express's
 * dispatch plus `res.json` about 5×: for a small answer, most of its cost.
 *
 * A front route runs **the same layers express runs for its path, in the same order** — the
 * app's global layers, then the route's own — on node's request and response, with what those
 * layers read of express's objects set up as express would (`originalUrl`, `baseUrl`, `route`,
 * `locals`, `app`). Every layer on such a path answers with node's own methods (`writeJson`,
 * `sendError`), so nothing needs express's prototypes; a layer that fails (`next(error)`) is
 * answered, on objects given express's prototypes first, as express would have: by the route's
 * next error handler (four parameters) when a route's layer failed, else by the app's own error
 * handler (`fail`). A request a route does not `accept` goes to express whole.
 */
export interface FrontRoute {
  method: 'GET' | 'POST';
  /** The exact path (no query string, case as written): anything else goes to express. */
  path: string;
  /** Whether this request takes the front door (else express answers it, whole). */
  accepts(req: IncomingMessage): boolean;
  /** `req.baseUrl` and `req.route` as express sets them on this path (metric labels, `routeOf`). */
  baseUrl: string;
  route?: string;
  /**
   * The route's own layers after the global ones, as mounted in express; the last one answers. An
   * error handler among them (four parameters) runs, as in express, only for an error of a route
   * layer before it.
   */
  layers: (RequestHandler | ErrorRequestHandler)[];
}

export function frontDoor(
  app: Express,
  opts: {
    /** The app's global layers (every request's, before any path's), the same functions express runs. */
    layers: RequestHandler[];
    routes: FrontRoute[];
    /** The app's final error handler. */
    fail: (error: unknown, req: Request, res: Response) => void;
  },
): (req: IncomingMessage, res: ServerResponse) => void {
  const byKey = new Map(
    opts.routes.map((r) => [`${r.method} ${r.path}`, { route: r, layers: [...opts.layers, ...r.layers] }]),
  );
  const globalCount = opts.layers.length;
  const { fail } = opts;
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const entry = byKey.get(`${req.method} ${req.url}`);
    if (!entry?.route.accepts(req)) {
      app(req, res);
      return;
    }
    const { route, layers } = entry;
    // What the layers read of express's request and response (app.handle and the router set them).
    const r = req as Request;
    const s = res as Response;
    r.originalUrl = req.url as string;
    r.baseUrl = route.baseUrl;
    if (route.route) r.route = { path: route.route };
    r.app = app;
    s.locals = Object.create(null);
    let i = 0;
    const next: NextFunction = (error?: unknown) => {
      const failed = error !== undefined && error !== null && error !== 'route' && error !== 'router';
      if (failed && Object.getPrototypeOf(req) !== app.request) {
        Object.setPrototypeOf(req, app.request);
        Object.setPrototypeOf(res, app.response);
        r.res = s;
        s.req = r;
      }
      // A global layer's error skips the route's layers (express skips a route for an error).
      if (failed && i <= globalCount) i = layers.length;
      // As express: an error goes to the next error handler, anything else to the next plain layer.
      let layer = layers[i++];
      while (layer && (layer.length === 4) !== failed) layer = layers[i++];
      if (!layer) {
        if (failed) return fail(error, r, s);
        // Past the last layer: express would answer 404 (no layer did); the app's own handler does.
        return next(new DomainError('NOT_FOUND', 'Not found'));
      }
      try {
        if (failed) (layer as ErrorRequestHandler)(error, r, s, next);
        else (layer as RequestHandler)(r, s, next);
      } catch (thrown) {
        next(thrown ?? new Error('a layer threw'));
      }
    };
    next();
  };
  // The server's request listener stands for the app: whoever lists the served routes by walking
  // express's stack from it (test/api/fuzz.test.ts, openapi.test.ts) still finds them.
  return Object.defineProperty(handle, 'router', { get: () => (app as unknown as { router: unknown }).router });
}

/** A request without a body or a credential: what a front GET takes. */
export const plainGet = (req: IncomingMessage) =>
  req.headers.authorization === undefined &&
  req.headers['content-length'] === undefined &&
  req.headers['transfer-encoding'] === undefined;

/** A JSON answer as express's `res.json` writes it (type with charset, length), with node's methods. */
export function writeJson(res: ServerResponse, status: number, body: string) {
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}
