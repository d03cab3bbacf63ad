import {
  extendZodWithOpenApi,
  OpenAPIRegistry,
  OpenApiGeneratorV31,
  type ResponseConfig,
  type RouteConfig,
} from '@asteasolutions/zod-to-openapi';
import { Router } from 'express';
import { z } from 'zod';
import type { Config } from '../config.js';
import { type ErrorCode, LOGIN_REQUIRED_MSG, restErrorTable } from '../errors.js';
import { SESSION_COOKIE } from '../http/session.js';
import { openApiReferencePage, REFERENCE_CSS, type ReferenceDocument } from './openapi-reference.js';
import { type AnyRoute, encodingsOf, isRaw, MAX_BODY } from './route.js';

extendZodWithOpenApi(z);

/**
 * The OpenAPI 3.1 document of every REST path the gateway serves, built from the route
 * declarations (src/rest/endpoints.ts): the very zod schemas that validate the requests and
 * type the answers. Served at /openapi.json; a reference page is rendered at /docs in
 * development. test/api/openapi.test.ts checks it against the routes express serves and the
 * responses the server really sends.
 */

// ---- response shapes ---------------------------------------------------------------------

const errorEnvelope = z
  .object({
    code: z
      .number()
      .int()
      .openapi({
        description: `Non-zero: failure, the client must not continue. -1: not logged in (msg "${LOGIN_REQUIRED_MSG}"). See the table in the description.`,
      }),
    msg: z.string().openapi({ description: 'Message to show.' }),
    data: z.array(z.unknown()).max(0).openapi({ description: 'Always an empty array.' }),
  })
  .strict()
  .openapi('ErrorEnvelope');

// ---- paths -------------------------------------------------------------------------------

const json = (schema: z.ZodTypeAny) => ({ 'application/json': { schema } });
const mediaTypes = {
  form: 'application/x-www-form-urlencoded',
  json: 'application/json',
  multipart: 'multipart/form-data',
};

const agentSecurity: Record<string, string[]>[] = [{ agentCookie: [] }, { agentToken: [] }, { agentTokenQuery: [] }];
const securityOf: Record<AnyRoute['identity'], Record<string, string[]>[] | undefined> = {
  public: undefined,
  session: undefined,
  agent: agentSecurity,
  visitor: [{ visitorBearer: [] }],
  internal: [{ internalBearer: [] }],
  participant: [{ visitorBearer: [] }, ...agentSecurity],
  apiKey: [{ apiKeyBearer: [] }],
  adminOrApiKey: [...agentSecurity, { apiKeyBearer: [] }],
};

/** The answers every endpoint of an identity may give besides its success. */
function errorResponses(route: AnyRoute): Record<string, string> {
  const errors: Record<string, string> = {};
  // Any request may repeat `token` or carry a visitor bearer beside an agent token (refused).
  errors['400'] = route.input
    ? 'Invalid input (code 1000); `msg` names the field. Also a repeated `token`, or two identities.'
    : 'A repeated `token`, or a visitor bearer beside an agent token (code 1000).';
  if (route.identity === 'visitor' || route.identity === 'participant')
    errors['401'] = 'Visitor token missing, invalid or expired (1401).';
  if (route.identity === 'agent') errors['403'] = 'ticket_agent on an online-reception endpoint (1403).';
  if (route.identity === 'internal') errors['403'] = 'Missing or wrong internal token (1403).';
  if (route.identity === 'apiKey' || route.identity === 'adminOrApiKey') {
    errors['401'] = 'API key missing, unknown, revoked or expired (1411).';
    errors['403'] = route.scope
      ? `The API key lacks the scope \`${route.scope}\` (1412)${route.identity === 'adminOrApiKey' ? '; an agent that is not an admin (1403)' : ''}.`
      : 'The API key lacks the scope (1412).';
  }
  // What a visitor or agent addresses (a conversation, a visitor, an attachment) may not exist
  // for it — another merchant's included, without telling which.
  if (route.input && ['agent', 'visitor', 'participant', 'apiKey', 'adminOrApiKey'].includes(route.identity))
    errors['404'] = 'Not found (1404).';
  errors['405'] = 'The path exists with another method (1405); see `Allow`.';
  if (route.method === 'post') errors['413'] = `Body larger than ${MAX_BODY} (1413).`;
  errors['429'] = 'Rate-limited (1429); see Retry-After.';
  errors['500'] = 'Internal error (1500, masked).';
  errors['503'] = 'A backing service is unavailable (1503); retry.';
  for (const [status, description] of Object.entries(route.errors ?? {})) errors[status] = description;
  return errors;
}

/** An express path in OpenAPI's form: `/attachments/:id` → `/attachments/{id}`. */
export const openApiPath = (path: string) => path.replace(/:(\w+)/g, '{$1}');

/** The path parameters of an express path, every one a required string. */
function pathParams(path: string): z.AnyZodObject | undefined {
  const names = [...path.matchAll(/:(\w+)/g)].map((m) => m[1] as string);
  return names.length ? z.object(Object.fromEntries(names.map((n) => [n, z.string()]))) : undefined;
}

/** The request part of an operation: its path parameters, query (GET) or body (POST) schema. */
function requestOf(route: AnyRoute): RouteConfig['request'] {
  const params = pathParams(route.path);
  const read = isRaw(route) ? route.documented : undefined;
  const declared = declaredRequestOf(route);
  const request = {
    ...(params ? { params } : {}),
    ...(read?.query ? { query: read.query } : {}),
    ...(read?.headers ? { headers: read.headers } : {}),
    ...(read?.body
      ? { body: { required: true, content: { [read.body.contentType]: { schema: read.body.schema } } } }
      : {}),
    ...declared,
  };
  return Object.keys(request).length ? request : undefined;
}

/** The request part a declaration's `input` gives: its query (GET) or body (POST) schema. */
function declaredRequestOf(route: AnyRoute): RouteConfig['request'] {
  if (!route.input) return undefined;
  if (route.method === 'get') return { query: unwrapObject(route.input) };
  const example = route.requestExample === undefined ? {} : { example: route.requestExample };
  const content = Object.fromEntries(
    encodingsOf(route).map((e) => [mediaTypes[e], { schema: route.input, ...example }]),
  );
  return { body: { required: true, content } };
}

/** The object under a transform (input schemas map legacy names to the domain's). */
function unwrapObject(schema: z.ZodTypeAny): z.AnyZodObject {
  let inner: z.ZodTypeAny = schema;
  while (inner instanceof z.ZodEffects) inner = inner.innerType();
  if (!(inner instanceof z.ZodObject)) throw new Error('a GET input must be a zod object');
  return inner;
}

/** The OpenAPI operation of one declaration. */
export function operationOf(route: AnyRoute): RouteConfig {
  const errors = Object.fromEntries(
    Object.entries(errorResponses(route)).map(([status, description]): [string, ResponseConfig] => [
      status,
      { description, content: json((isRaw(route) && route.errorSchema) || errorEnvelope) },
    ]),
  );
  const request = requestOf(route);
  let success: Record<string, ResponseConfig>;
  if (isRaw(route)) {
    const { contentType, description, schema, statuses = [200] } = route.raw;
    const content = { [contentType]: { schema: schema ?? { type: 'string' as const } } };
    success = Object.fromEntries(statuses.map((status) => [String(status), { description, content }]));
  } else {
    const envelope = z
      .object({
        code: z.literal(0).openapi({ description: '0: success.' }),
        msg: route.msg === undefined ? z.string().openapi({ description: 'Status text: `ok`.' }) : z.literal(route.msg),
        data: route.output,
      })
      .strict()
      .openapi(
        route.example === undefined ? {} : { example: { code: 0, msg: route.msg ?? 'ok', data: route.example } },
      );
    // The legacy endpoints answer business errors (not logged in, wrong captcha…) with HTTP 200
    // and a non-zero code, so a 200 is the success envelope or the error envelope.
    success = {
      [String(route.status ?? 200)]: {
        description: 'Success — or, with HTTP 200, a business error envelope (non-zero `code`; see the table).',
        content: json(z.union([envelope, errorEnvelope])),
      },
    };
  }
  return {
    method: route.method,
    path: openApiPath(route.path),
    tags: [route.tag],
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    ...(securityOf[route.identity] ? { security: securityOf[route.identity] } : {}),
    ...(request ? { request } : {}),
    responses: { ...success, ...errors },
  };
}

function errorCodeTable() {
  const rows = (Object.entries(restErrorTable) as [ErrorCode, { code: number; status: number }][]).map(
    ([name, { code, status }]) => `| ${code} | ${status} | ${name} |`,
  );
  return ['| code | HTTP status | meaning |', '|---|---|---|', ...rows].join('\n');
}

/** Builds the document (pure: the same input always gives the same document). */
export function buildOpenApiDocument(routes: readonly AnyRoute[], opts: { version?: string } = {}) {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'agentCookie', {
    type: 'apiKey',
    in: 'cookie',
    name: SESSION_COOKIE,
    description: 'The agent Session cookie set by the login (HttpOnly).',
  });
  registry.registerComponent('securitySchemes', 'agentToken', {
    type: 'apiKey',
    in: 'header',
    name: 'token',
    description: 'The agent Session ID (`data.token` of the login) as the `token` header.',
  });
  registry.registerComponent('securitySchemes', 'agentTokenQuery', {
    type: 'apiKey',
    in: 'query',
    name: 'token',
    description: 'The agent Session ID as the `token` query parameter.',
  });
  registry.registerComponent('securitySchemes', 'visitorBearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'A visitor token from POST /visitor/token.',
  });
  registry.registerComponent('securitySchemes', 'apiKeyBearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'A merchant API key (`prly_…`), created by an admin (docs/integration.md "API keys").',
  });
  registry.registerComponent('securitySchemes', 'internalBearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'INTERNAL_API_TOKEN.',
  });
  for (const route of routes) registry.registerPath(operationOf(route));
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Parley REST API',
      version: opts.version ?? '0.1.0',
      description: [
        'The legacy `{code, msg, data}` endpoints, the visitor token and internal publish endpoints, and health.',
        'GraphQL (`/graphql`, subscriptions over graphql-ws on the same path) is described by `schema.graphql`.',
        '',
        'Every response carries `X-Request-Id` (the caller’s, when it sent an acceptable one).',
        '',
        errorCodeTable(),
      ].join('\n'),
    },
    servers: [{ url: '/' }],
  });
}

/** The reference page of the document at /docs (and its stylesheet), in development only, like GraphiQL. */
export function openApiDocsPages(config: Pick<Config, 'env'>, routes: readonly AnyRoute[]): Router {
  const router = Router();
  if (config.env !== 'development') return router;
  const page = openApiReferencePage(buildOpenApiDocument(routes) as unknown as ReferenceDocument);
  router.get('/docs', (_req, res) => {
    res.type('text/html; charset=utf-8').send(page);
  });
  router.get('/docs/reference.css', (_req, res) => {
    res.type('text/css; charset=utf-8').send(REFERENCE_CSS);
  });
  return router;
}
