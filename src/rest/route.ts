import { timingSafeEqual } from 'node:crypto';
import { extendZodWithOpenApi } from '@asteasolutions/zod-to-openapi';
import express, { type ErrorRequestHandler, type Request, type RequestHandler, type Response, Router } from 'express';
import { z } from 'zod';
import type { Config } from '../config.js';
import type { Deps } from '../deps.js';
import { classifyError, DomainError } from '../errors.js';
import { bearerToken, clientIp } from '../http/request.js';
import { requestSessionPort } from '../http/session.js';
import { loggableError } from '../log.js';
import { visitorRefusalHoldMs } from '../resolvers/budgets/refusal-hold.js';
import { parseInput } from '../resolvers/inputs.js';
import { type ApiKeyViewer, authenticateApiKey } from '../resolvers/integration/api-keys/authenticate.js';
import { type ApiKeyScope, requireScope } from '../resolvers/integration/api-keys/scopes.js';
import { type AgentViewer, requireAgent, requireVisitor, type VisitorViewer } from '../resolvers/viewer.js';
import { sendError, sendOk } from './envelope.js';

// Declarations describe their fields with `.openapi(…)`: enabled before any of them is built.
extendZodWithOpenApi(z);

/**
 * One declaration per legacy REST endpoint: method, path, the identity it needs, its input
 * (zod, legacy field names, transformed to the domain's camelCase), its output (the envelope's
 * `data`, snake_case) and the handler that calls the domain. From the one array of
 * declarations (src/rest/endpoints.ts) the express routes are mounted, the OpenAPI document is
 * built, the fuzz test iterates every route and a test checks that the docs name every path.
 */

/**
 * Who may call an endpoint:
 * - `public`: anyone;
 * - `session`: anyone, with the browser's (pre-login) agent Session, e.g. captchas and login;
 * - `agent`: a logged-in agent (Session cookie, `token` header or `?token=`), else code -1;
 * - `visitor`: `Authorization: Bearer <visitor token>`, else 1401;
 * - `internal`: `Authorization: Bearer <INTERNAL_API_TOKEN>`, else 1403;
 * - `participant`: a valid visitor bearer, else a valid agent Session, else nobody (`viewer`
 *   undefined): for endpoints either side calls (attachment downloads, Pusher channel authorization);
 * - `apiKey`: `Authorization: Bearer prly_…`, a live API key (with the route's `scope`, if any), else 1411
 *   (no, unknown, revoked or expired key) or 1412 (scope missing);
 * - `adminOrApiKey`: an admin agent's Session (as `agent`), or an API key with the route's `scope`
 *   (as `apiKey`): the merchant's management operations a server may also call (webhooks).
 */
export type Identity =
  | 'public'
  | 'session'
  | 'agent'
  | 'visitor'
  | 'internal'
  | 'participant'
  | 'apiKey'
  | 'adminOrApiKey';

type ViewerOf<I extends Identity> = I extends 'agent'
  ? AgentViewer
  : I extends 'visitor'
    ? VisitorViewer
    : I extends 'participant'
      ? AgentViewer | VisitorViewer | undefined
      : I extends 'apiKey'
        ? ApiKeyViewer
        : I extends 'adminOrApiKey'
          ? AgentViewer | ApiKeyViewer
          : undefined;

/** How a POST body may be encoded. `multipart` bodies are left unread for the handler to stream. */
export type BodyEncoding = 'form' | 'json' | 'multipart';

export interface RouteContext<I extends Identity, In> {
  deps: Deps;
  req: Request;
  res: Response;
  viewer: ViewerOf<I>;
  input: In;
}

interface Common<I extends Identity> {
  method: 'get' | 'post';
  path: string;
  identity: I;
  /** OpenAPI tag, summary and description. */
  tag: string;
  summary: string;
  description?: string;
  /** Extra documented answers, by HTTP status (400, 401, 403, 413, 429, 500, 503 are added by identity). */
  errors?: Record<number, string>;
  /** Mounted only when this holds (e.g. the internal API needs its token configured). */
  enabled?: (config: Config) => boolean;
  /** `apiKey` and `adminOrApiKey` endpoints: the scope a key needs. */
  scope?: I extends 'apiKey' | 'adminOrApiKey' ? ApiKeyScope : never;
  /**
   * Runs with the identity before the body is read or parsed, and may refuse (throw): a refusal
   * a flood gets many times costs no parsing then (e.g. a merchant over its share of a busy
   * instance, src/resolvers/budgets/chat.ts). The handler gets the same viewer.
   */
  beforeBody?: (ctx: { deps: Deps; viewer: ViewerOf<I> }) => void;
}

/** An endpoint answering the `{code, msg, data}` envelope. */
export interface JsonRoute<I extends Identity, S extends z.ZodTypeAny | undefined, O extends z.ZodTypeAny>
  extends Common<I> {
  /** Parsed from the query string (GET) or the body (POST). */
  input?: S;
  /** POST body encodings accepted (default form and JSON, as the spec's legacy clients send). */
  encodings?: BodyEncoding[];
  /** The envelope's `data` on success. */
  output: O;
  /** HTTP status and `msg` of a success (default 200 and "ok"). */
  status?: 200 | 202;
  msg?: string;
  /** Example `data` for the OpenAPI document. */
  example?: z.input<O>;
  /** A valid request (body or query), for the OpenAPI document and the conformance run. */
  requestExample?: S extends z.ZodTypeAny ? z.input<S> : never;
  handle(ctx: RouteContext<I, S extends z.ZodTypeAny ? z.output<S> : undefined>): Promise<z.input<O>>;
}

/** An endpoint that answers something else (an image, a file, plain text) by itself. */
export interface RawRoute<I extends Identity, S extends z.ZodTypeAny | undefined> extends Common<I> {
  input?: S;
  encodings?: BodyEncoding[];
  /** What it answers on success; `schema` documents (and tests check) a JSON answer. */
  raw: { contentType: string; description: string; schema?: z.ZodTypeAny; statuses?: number[] };
  requestExample?: S extends z.ZodTypeAny ? z.input<S> : never;
  /** The shape of those refusals, for the OpenAPI document (default: the error envelope). */
  errorSchema?: z.ZodTypeAny;
  /** Request parts the handler reads by itself, for the OpenAPI document only. */
  documented?: {
    query?: z.AnyZodObject;
    headers?: z.AnyZodObject;
    body?: { contentType: string; schema: z.ZodTypeAny };
  };
  /** Answers a refusal in the endpoint's own way (default: the envelope). */
  onError?: (ctx: { deps: Deps; req: Request; res: Response }, error: DomainError) => void;
  handle(ctx: RouteContext<I, S extends z.ZodTypeAny ? z.output<S> : undefined>): Promise<void>;
}

// biome-ignore lint/suspicious/noExplicitAny: the erased form every declaration fits in the one array
type AnyJsonRoute = JsonRoute<Identity, any, any>;
// biome-ignore lint/suspicious/noExplicitAny: as above
type AnyRawRoute = RawRoute<Identity, any>;
export type AnyRoute = AnyJsonRoute | AnyRawRoute;

/** Declares an envelope endpoint; the handler's answer is checked against `output` at compile time. */
export const jsonRoute = <I extends Identity, O extends z.ZodTypeAny, S extends z.ZodTypeAny | undefined = undefined>(
  route: JsonRoute<I, S, O>,
) => route as unknown as AnyRoute;

/** Declares an endpoint that writes its own answer (images, files). */
export const rawRoute = <I extends Identity, S extends z.ZodTypeAny | undefined = undefined>(route: RawRoute<I, S>) =>
  route as unknown as AnyRoute;

export const isRaw = (route: AnyRoute): route is AnyRawRoute => 'raw' in route;

export const encodingsOf = (route: AnyRoute): BodyEncoding[] =>
  route.method === 'get' ? [] : (route.encodings ?? ['form', 'json']);

/** The largest body any endpoint reads (multipart uploads stream under their own limits). */
export const MAX_BODY = '64kb';

/** An API key, with the route's scope when it declares one. */
async function apiKeyViewer(deps: Deps, route: AnyRoute, req: Request): Promise<ApiKeyViewer> {
  const viewer = await authenticateApiKey(deps, bearerToken(req), clientIp(req, deps.config));
  return route.scope ? requireScope(viewer, route.scope) : viewer;
}

/** The identity check of each kind, run before the input is parsed. */
async function viewerFor(deps: Deps, route: AnyRoute, req: Request): Promise<unknown> {
  const { identity } = route;
  switch (identity) {
    case 'agent':
      return requireAgent(deps, requestSessionPort(req), clientIp(req, deps.config));
    case 'apiKey':
      return apiKeyViewer(deps, route, req);
    case 'adminOrApiKey': {
      // A bearer names the caller: a key (checked as such), never a visitor token or a Session.
      const token = bearerToken(req);
      if (token) return apiKeyViewer(deps, route, req);
      return requireAgent(deps, requestSessionPort(req), clientIp(req, deps.config));
    }
    case 'visitor':
      return requireVisitor(deps, bearerToken(req), clientIp(req, deps.config));
    case 'participant': {
      // Whoever it is, or nobody: a stale bearer or an ended Session is no identity here (the
      // endpoint decides what it needs, e.g. a signed download URL needs none).
      // An address past its failed-token budget is refused, though: that is about the caller, not the token.
      const nobody = (error: unknown) => {
        if (error instanceof DomainError && error.code !== 'RATE_LIMITED') return undefined;
        throw error;
      };
      const token = bearerToken(req);
      if (token) return requireVisitor(deps, token, clientIp(req, deps.config)).catch(nobody);
      return req.session?.agent
        ? requireAgent(deps, requestSessionPort(req), clientIp(req, deps.config)).catch(nobody)
        : undefined;
    }
    case 'internal':
      if (!internalTokenMatches(bearerToken(req), deps.config.internalApiToken)) {
        throw new DomainError('FORBIDDEN', 'A valid internal API token is required');
      }
      return undefined;
    default:
      return undefined;
  }
}

function internalTokenMatches(given: string | undefined, secret: string | undefined) {
  if (!secret) return false;
  const a = Buffer.from(given ?? '');
  const b = Buffer.from(secret);
  return a.length === b.length && timingSafeEqual(a, b);
}

const bodyParsers: Record<BodyEncoding, RequestHandler | undefined> = {
  form: express.urlencoded({ extended: false, limit: MAX_BODY }),
  json: express.json({ limit: MAX_BODY }),
  multipart: undefined,
};

/** Express 5 parses `req.query` lazily with qs; the legacy endpoints take flat single values only. */
const queryObject = (req: Request) => Object.fromEntries(new URL(req.url, 'http://x').searchParams);

/** body-parser's errors as domain errors: 413 for an oversized body, 400 for a malformed one. */
export function bodyError(error: unknown): unknown {
  const type = (error as { type?: string }).type;
  if (type === 'entity.too.large') return new DomainError('PAYLOAD_TOO_LARGE', `Request body larger than ${MAX_BODY}`);
  if (type === 'entity.parse.failed' || type === 'encoding.unsupported' || type === 'charset.unsupported') {
    return new DomainError('BAD_USER_INPUT', 'Malformed request body');
  }
  if (type === 'parameters.too.many') return new DomainError('BAD_USER_INPUT', 'Too many parameters');
  return error;
}

/** How long a refusal is held before it is written: a visitor endpoint's, by the one rule (refusal-hold.ts). */
function refusalDelayMs(deps: Deps, route: AnyRoute, error: unknown): number {
  return route.identity === 'visitor' ? visitorRefusalHoldMs(deps.config, [error]) : 0;
}

/** Answers a refusal as the route declares (its own way, `onError`, else the envelope), held if it must be. */
function refuse(deps: Deps, route: AnyRoute, req: Request, res: Response, error: unknown) {
  const delay = refusalDelayMs(deps, route, error);
  if (delay > 0) setTimeout(() => answerRefusal(deps, route, req, res, error), delay);
  else answerRefusal(deps, route, req, res, error);
}

function answerRefusal(deps: Deps, route: AnyRoute, req: Request, res: Response, error: unknown) {
  // A held answer's connection may be gone by now: nothing to write to.
  if (res.destroyed) return;
  if (isRaw(route) && route.onError && !res.headersSent) {
    const domain = classifyError(error);
    if (domain.code === 'INTERNAL' || domain.code === 'SERVICE_UNAVAILABLE')
      deps.log.error({ err: loggableError(error) }, domain.message);
    route.onError({ deps, req, res }, domain);
  } else {
    sendError(res, error, deps.log);
  }
}

/** The viewers `beforeBody` checks found, for their handler (checked once per request). */
const earlyViewers = new WeakMap<Request, unknown>();

/** A route's `beforeBody` check, as a middleware before its body parsers. */
function beforeBodyOf(deps: Deps, route: AnyRoute): RequestHandler[] {
  const check = route.beforeBody;
  if (!check) return [];
  return [
    async (req, res, next) => {
      try {
        const viewer = await viewerFor(deps, route, req);
        check({ deps, viewer: viewer as never });
        earlyViewers.set(req, viewer);
      } catch (error) {
        refuse(deps, route, req, res, error);
        return;
      }
      next();
    },
  ];
}

function handlerOf(deps: Deps, route: AnyRoute): RequestHandler {
  return async (req, res) => {
    try {
      const viewer = earlyViewers.has(req) ? earlyViewers.get(req) : await viewerFor(deps, route, req);
      const raw = route.method === 'get' ? queryObject(req) : req.body;
      const input = route.input ? parseInput(route.input, raw) : undefined;
      const ctx = { deps, req, res, viewer, input } as RouteContext<Identity, unknown>;
      if (isRaw(route)) {
        await route.handle(ctx as never);
        return;
      }
      const data = await route.handle(ctx as never);
      if (!res.headersSent) sendOk(req, res, data, route.msg ?? 'ok', route.status ?? 200);
    } catch (error) {
      refuse(deps, route, req, res, error);
    }
  };
}

/**
 * The key of a request path in the route table: express matches a plain path case-insensitively
 * and with an optional trailing slash (`strict`/`sensitive` off), so the table does the same.
 */
const pathKey = (path: string) => {
  const lower = path.toLowerCase();
  return lower.length > 1 && lower.endsWith('/') ? lower.slice(0, -1) : lower;
};

/** A declared path express would match as more than a plain string (a parameter, a wildcard). */
const PATTERN = /[:*?()[\]{}+!]/;

/**
 * Mounts the declared endpoints. The agent Session middleware runs before this router on
 * /agent (it serves the agent pages too), and here for `participant` endpoints without a bearer. A declared path called with another method answers 405 with
 * `Allow`, as an envelope.
 *
 * Each plain path gets a router of its own (its routes, then its 405), found by one map lookup:
 * a request no longer walks the whole table, about 70 layers matched one after another
 * (BENCHMARKS.md, "Issue 33"). A path with a pattern would go to one router walked in order.
 */
export function mountRoutes(
  deps: Deps,
  routes: readonly AnyRoute[],
  opts: { agentSessionUnlessBearer: RequestHandler },
): RequestHandler & {
  /** The layers mounted for a declared route (for the front door, src/http/front.ts), if it is mounted. */
  layersOf(method: 'get' | 'post', path: string): (RequestHandler | ErrorRequestHandler)[] | undefined;
} {
  const mounted = new Map<string, (RequestHandler | ErrorRequestHandler)[]>();
  const byPath = new Map<string, Router>();
  const patterned = Router();
  const routerFor = (path: string) => {
    if (PATTERN.test(path)) return patterned;
    const key = pathKey(path);
    let router = byPath.get(key);
    if (!router) {
      router = Router();
      byPath.set(key, router);
    }
    return router;
  };
  const methodsByPath = new Map<string, Set<string>>();
  for (const route of routes) {
    if (route.enabled && !route.enabled(deps.config)) continue;
    const parsers = encodingsOf(route)
      .map((e) => bodyParsers[e])
      .filter((p): p is RequestHandler => p !== undefined);
    // Under /agent the Session middleware already ran (app.ts); elsewhere a participant's runs here.
    const session = route.identity === 'participant' ? [opts.agentSessionUnlessBearer] : [];
    // A body the parsers refuse is answered as the route answers any refusal.
    const unparsable: ErrorRequestHandler = (error, req, res, _next) => refuse(deps, route, req, res, bodyError(error));
    const layers = [...session, ...beforeBodyOf(deps, route), ...parsers, unparsable, handlerOf(deps, route)];
    routerFor(route.path)[route.method](route.path, ...layers);
    mounted.set(`${route.method} ${route.path}`, layers);
    const methods = methodsByPath.get(route.path) ?? new Set();
    methods.add(route.method.toUpperCase());
    if (route.method === 'get') methods.add('HEAD');
    methodsByPath.set(route.path, methods);
  }
  for (const [path, methods] of methodsByPath) {
    const allow = [...methods].join(', ');
    routerFor(path).all(path, (_req, res) => {
      res.setHeader('Allow', allow);
      sendError(res, new DomainError('METHOD_NOT_ALLOWED', `Method not allowed; use ${allow}`), deps.log);
    });
  }
  const anyPatterned = patterned.stack.length > 0;
  const dispatch: RequestHandler = (req, res, next) => {
    const router = byPath.get(pathKey(req.path));
    if (router) return router(req, res, next);
    if (anyPatterned) return patterned(req, res, next);
    next();
  };
  // Every route's layer, as a router shows them, for whoever lists the served routes by walking
  // express's stack (test/api/openapi.test.ts).
  return Object.assign(dispatch, {
    stack: [...byPath.values(), patterned].flatMap((r) => r.stack),
    layersOf: (method: 'get' | 'post', path: string) => mounted.get(`${method} ${path}`),
  });
}
