import type { NextFunction, Request, Response } from 'express';
import type { ExecutionResult } from 'graphql';
import { type Plugin, processRegularResult, type YogaServerInstance } from 'graphql-yoga';

/**
 * The common GraphQL request, answered without graphql-yoga's Fetch API adapter.
 *
 * yoga serves HTTP through WHATWG `Request`/`Response` objects: for every request it builds a
 * `Request` from the express one (URL, headers, an abort signal), runs its request pipeline and
 * writes a `Response` back. For a JSON POST whose body express has already parsed, that work
 * does nothing for the answer (BENCHMARKS.md, "Issue 33"). Such a request — `POST /graphql`,
 * `Content-Type: application/json`, an `Accept` yoga answers with `application/json`, a body of
 * only `query`, `variables` and `operationName` — whose query text yoga has already parsed and
 * validated over HTTP is executed here through yoga's own `handleParams`: the same envelop
 * plugins (parse and validation cache, graphql-armor limits, masked errors, metrics and tracing)
 * run on the same context. An answer with errors is written by yoga's own `processRegularResult`,
 * so its status and body are yoga's. Anything else goes to yoga unchanged.
 *
 * What this skips is yoga's HTTP layer, whose checks such a request passes by construction: the
 * method, content-type and CSRF checks, the parameter check, batching, the body size (express
 * capped it at 64 kB) and the result-format negotiation.
 */

/** Query texts yoga parsed and validated over HTTP; only these take the direct path. */
const KNOWN_MAX = 512;
/** Longer query texts are not remembered (the memory bound is KNOWN_MAX × this). */
const KNOWN_MAX_LENGTH = 8192;

const PARAMS = new Set(['query', 'variables', 'operationName']);
/** `Accept` values yoga answers with `application/json` (what a fetch or curl sends by default). */
const JSON_ACCEPT = new Set([undefined, '*/*', 'application/json']);

export interface DirectGraphQL {
  /** The envelop plugin that remembers which query texts passed validation over HTTP. */
  plugin: Plugin;
  /** Express handler: answers the common request directly, passes anything else on (`next`). */
  handle(yoga: YogaServerInstance<object, object>): (req: Request, res: Response, next: NextFunction) => void;
}

interface Params {
  query: string;
  variables?: Record<string, unknown> | null;
  operationName?: string | null;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The body as GraphQL params when it is the plain shape the direct path takes, else undefined. */
function plainParams(body: unknown): Params | undefined {
  if (!isPlainObject(body)) return undefined;
  for (const key in body) if (!PARAMS.has(key)) return undefined;
  const { query, variables, operationName } = body;
  if (typeof query !== 'string') return undefined;
  if (variables != null && !isPlainObject(variables)) return undefined;
  if (operationName != null && typeof operationName !== 'string') return undefined;
  return body as unknown as Params;
}

export function createDirectGraphQL(): DirectGraphQL {
  const known = new Map<string, true>();
  const remember = (query: string) => {
    if (query.length > KNOWN_MAX_LENGTH || known.has(query)) return;
    if (known.size >= KNOWN_MAX) known.delete(known.keys().next().value as string);
    known.set(query, true);
  };

  const plugin: Plugin = {
    onValidate({ context }) {
      return ({ valid }) => {
        const { socketContext, params, request } = context as {
          socketContext?: unknown;
          params?: { query?: unknown };
          request?: unknown;
        };
        // Over HTTP only (yoga's own path sets `request`): a socket's operations are not checked
        // against yoga's HTTP rules (a subscription, say), so they vouch for nothing here.
        if (!valid || socketContext || !request || typeof params?.query !== 'string') return;
        remember(params.query);
      };
    },
  };

  const handle = (yoga: YogaServerInstance<object, object>) => {
    return (req: Request, res: Response, next: NextFunction) => {
      if (req.method !== 'POST' || req.originalUrl !== '/graphql' || !JSON_ACCEPT.has(req.headers.accept)) {
        return next();
      }
      // express.json ran just before: a body that is an object is its parse of a JSON body.
      const params = plainParams(req.body);
      if (!params || !known.has(params.query)) return next();
      // What yoga's adapter gives the context besides `request`: the server context and `waitUntil`
      // (no plugin of ours defers work with it; a deferred promise's failure is not unhandled).
      const waitUntil = (promise: Promise<unknown> | undefined) => {
        promise?.catch(() => {});
      };
      const context = { req, params, waitUntil };
      Promise.resolve(
        yoga.handleParams({ request: undefined as never, context: context as never, params: params as never }),
      )
        .then((result) => send(res, result as ExecutionResult, yoga))
        .catch((error: unknown) => next(error));
    };
  };

  return { plugin, handle };
}

async function send(res: Response, result: ExecutionResult, yoga: YogaServerInstance<object, object>) {
  if (res.headersSent) return;
  if (!result.errors?.length && !result.extensions) {
    const body = JSON.stringify(result);
    res.statusCode = 200;
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('content-length', Buffer.byteLength(body));
    res.end(body);
    return;
  }
  // With errors: yoga's own answer (its status rules, its error serialisation).
  const response = await processRegularResult(result, yoga.fetchAPI, 'application/json');
  const body = await response.text();
  if (res.headersSent) return;
  res.statusCode = response.status;
  response.headers.forEach((value, name) => {
    res.setHeader(name, value);
  });
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(body);
}
