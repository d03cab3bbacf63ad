import { readFileSync } from 'node:fs';
import type { RouteConfig } from '@asteasolutions/zod-to-openapi';
import type { Router } from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ZodTypeAny } from 'zod';
import { pageRoutes } from '../../src/pages/routes.js';
import { endpoints } from '../../src/rest/endpoints.js';
import { buildOpenApiDocument, openApiPath, operationOf } from '../../src/rest/openapi.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';

interface Layer {
  rawPath?: unknown;
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

/** Every `METHOD /path` an express router serves, walking mounted routers. */
function servedRoutes(stack: Layer[], prefix = '', out = new Set<string>()) {
  for (const layer of stack) {
    if (layer.route) {
      // `_all`: the 405 answer of a declared path called with another method.
      for (const method of Object.keys(layer.route.methods).filter((m) => m !== '_all'))
        out.add(`${method.toUpperCase()} ${openApiPath(prefix + layer.route.path)}`);
    } else if (layer.handle?.stack) {
      const mount = typeof layer.rawPath === 'string' && layer.rawPath !== '/' ? layer.rawPath : '';
      servedRoutes(layer.handle.stack, prefix + mount, out);
    }
  }
  return out;
}

/** The OpenAPI operations, one per declared endpoint. */
const restRoutes = endpoints.map(operationOf);
const expressOf = (t: TestApp) => t.app.server.listeners('request')[0] as unknown as { router: { stack: Layer[] } };
const documented = () => new Set(restRoutes.map((r) => `${r.method.toUpperCase()} ${r.path}`));
const routeOf = (method: string, path: string) => {
  const route = restRoutes.find((r) => r.method === method && r.path === path);
  if (!route) throw new Error(`${method} ${path} is not in the OpenAPI document`);
  return route;
};

/** The OpenAPI document committed at the repository root, the REST contract as reviewed. */
const committedDocument = () => JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8'));

/** Parses `body` with the zod schema the document gives for this response (status, JSON). */
function expectDocumentedResponse(method: string, path: string, status: number, body: unknown) {
  const response = routeOf(method, path).responses[String(status)];
  expect(response, `${method} ${path} documents HTTP ${status}`).toBeDefined();
  const schema = (response as { content?: Record<string, { schema: ZodTypeAny }> }).content?.['application/json']
    ?.schema;
  expect(schema, `${method} ${path} ${status} has a JSON schema`).toBeDefined();
  const parsed = (schema as ZodTypeAny).safeParse(body);
  expect(parsed.success, `${method} ${path} ${status}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
}

// One server for the checks below (the development one for /docs is separate).
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.stop());

describe('the OpenAPI document matches the routes the server serves', () => {
  it('every JSON/image route express serves has an OpenAPI path, and every OpenAPI path is served', () => {
    // HTML pages (src/pages/) are for browsers, not part of the REST contract; GraphQL has schema.graphql.
    const pages = servedRoutes((pageRoutes(t.app.deps) as unknown as Router & { stack: Layer[] }).stack);
    const served = new Set([...servedRoutes(expressOf(t).router.stack)].filter((r) => !pages.has(r)));
    expect([...served].sort()).toEqual([...documented()].sort());
  });

  it('GET /openapi.json serves the OpenAPI 3.1 document', async () => {
    const res = await fetch(`${t.url}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const doc = await res.json();
    expect(doc.openapi).toBe('3.1.0');
    for (const route of restRoutes) expect(doc.paths[route.path][route.method]).toBeDefined();
    // By value against the reviewed document, not against a second build that shares any defect of the builder.
    expect(doc, 'openapi.json is stale: run `npm run -s openapi -- openapi.json`').toEqual(committedDocument());
  });

  it('openapi.json is the document the declarations build (run `npm run -s openapi -- openapi.json` after a change)', () => {
    expect(JSON.parse(JSON.stringify(buildOpenApiDocument(endpoints)))).toEqual(committedDocument());
  });

  it('attachment paths use `{id}` with their signature query and Range header; uploads describe their multipart body and size limits', () => {
    const doc = buildOpenApiDocument(endpoints) as unknown as {
      paths: Record<
        string,
        Record<
          string,
          {
            parameters?: { name: string; in: string; required?: boolean }[];
            requestBody?: { content: Record<string, { schema: { properties: Record<string, { format?: string }> } }> };
            responses: Record<string, { description: string }>;
          }
        >
      >;
    };
    expect(Object.keys(doc.paths).filter((p) => p.includes(':'))).toEqual([]);
    for (const path of ['/attachments/{id}', '/attachments/{id}/thumbnail']) {
      const parameters = doc.paths[path]?.get?.parameters?.map((p) => `${p.in}:${p.name}:${p.required ?? false}`);
      expect(parameters?.sort(), path).toEqual([
        'header:range:false',
        'path:id:true',
        'query:expires:false',
        'query:sig:false',
      ]);
    }
    for (const path of ['/visitor/upload', '/agent/upload']) {
      const upload = doc.paths[path]?.post;
      expect(upload?.requestBody?.content['multipart/form-data']?.schema.properties.file?.format, path).toBe('binary');
      expect(upload?.responses['413']?.description, path).toMatch(/20 MiB.*100 MiB for a video/);
    }
  });

  it('the reference page is not served outside development', async () => {
    expect((await fetch(`${t.url}/docs`)).status).toBe(404);
  });
});

describe('request schemas are the zod objects that validate the requests', () => {
  /** The bodies the empty-body check sends without an identity (the chat's need one first). */
  const bodies = [
    'POST /agent/login/check',
    'POST /agent/login/smscaptcha',
    'POST /agent/login/smsverify',
    'POST /visitor/token',
    'POST /internal/events',
  ];
  const bodySchemas = (route: RouteConfig) =>
    Object.values(route.request?.body?.content ?? {}).map((media) => (media as { schema: unknown }).schema);

  it('each documented request body is the very zod schema its declaration parses requests with', () => {
    for (const declared of endpoints.filter((r) => r.method === 'post' && r.input)) {
      const operation = operationOf(declared);
      const schemas = bodySchemas(operation);
      expect(schemas.length, `${declared.path} documents its body`).toBeGreaterThan(0);
      for (const schema of schemas) expect(schema, declared.path).toBe(declared.input);
    }
  });

  describe('and the server refuses what they refuse', () => {
    it('an empty body is refused with code 1000 naming the first required field of the documented schema', async () => {
      const doc = buildOpenApiDocument(endpoints) as unknown as {
        paths: Record<
          string,
          Record<string, { requestBody: { content: Record<string, { schema: { required: string[] } }> } }>
        >;
      };
      for (const key of bodies) {
        const [method = '', path = ''] = key.split(' ');
        const required =
          doc.paths[path]?.[method.toLowerCase()]?.requestBody.content['application/json']?.schema.required;
        const { status, body } = await new HttpClient(t.url).json(path, {
          method,
          json: {},
          headers: path === '/internal/events' ? { authorization: `Bearer ${INTERNAL_TOKEN}` } : {},
        });
        expect({ key, status, code: body.code }).toEqual({ key, status: 400, code: 1000 });
        expect(body.msg, key).toMatch(new RegExp(`^${required?.[0]}\\b`));
      }
    });
  });
});

describe('responses match their documented schemas', () => {
  it('health, readiness and metrics', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const res = await fetch(t.url + path);
      expectDocumentedResponse('get', path, res.status, await res.json());
    }
    const metrics = await fetch(`${t.url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
  });

  it('agent login, workbench, logout, and the not-logged-in envelope', async () => {
    const client = new HttpClient(t.url);
    const captcha = await client.captcha('login');
    expect(captcha.res.headers.get('content-type')).toBe('image/jpeg');
    const login = await client.login('alice');
    expectDocumentedResponse('post', '/agent/login/check', login.status, login.body);
    expect(login.body.code).toBe(0);

    const workbench = await client.json('/agent/data/get');
    expect(workbench.body.code).toBe(0);
    expectDocumentedResponse('get', '/agent/data/get', workbench.status, workbench.body);

    const loggedOut = await client.json('/agent/logout', { method: 'POST' });
    expectDocumentedResponse('post', '/agent/logout', loggedOut.status, loggedOut.body);

    const anonymous = await new HttpClient(t.url).json('/agent/data/get');
    expect(anonymous.body.code).toBe(-1);
    expectDocumentedResponse('get', '/agent/data/get', anonymous.status, anonymous.body);

    const wrong = await new HttpClient(t.url).login('alice', 'wrong-password');
    expect(wrong.body.code).not.toBe(0);
    expectDocumentedResponse('post', '/agent/login/check', wrong.status, wrong.body);
  });

  it('a ticket agent on the workbench gets the documented 403', async () => {
    const { client } = await agentSession(t.url, 'tom');
    const res = await client.json('/agent/data/get');
    expect(res.status).toBe(403);
    expectDocumentedResponse('get', '/agent/data/get', res.status, res.body);
  });

  it('SMS captcha when SMS registration is off: a documented business error', async () => {
    const client = new HttpClient(t.url);
    await client.captcha('join');
    const res = await client.json('/agent/login/smscaptcha', {
      method: 'POST',
      form: { mobile: '13800138000', captcha: 'test1' },
    });
    expect(res.body.code).not.toBe(0);
    expectDocumentedResponse('post', '/agent/login/smscaptcha', res.status, res.body);
  });

  it('visitor token, bootstrap, revoke and the refused revoked token', async () => {
    const client = new HttpClient(t.url);
    const issued = await client.json('/visitor/token', { method: 'POST', json: { appkey: 'demo-appkey' } });
    expectDocumentedResponse('post', '/visitor/token', issued.status, issued.body);
    const bearer = { authorization: `Bearer ${issued.body.data.token}` };

    const bootstrap = await client.json('/visitor/data/get', { headers: bearer });
    expect(bootstrap.body.code).toBe(0);
    expectDocumentedResponse('get', '/visitor/data/get', bootstrap.status, bootstrap.body);

    const revoked = await client.json('/visitor/token/revoke', { method: 'POST', headers: bearer });
    expectDocumentedResponse('post', '/visitor/token/revoke', revoked.status, revoked.body);

    const refused = await client.json('/visitor/data/get', { headers: bearer });
    expect(refused.status).toBe(401);
    expectDocumentedResponse('get', '/visitor/data/get', refused.status, refused.body);

    const unknown = await client.json('/visitor/token', { method: 'POST', json: { appkey: 'no-such-appkey' } });
    expectDocumentedResponse('post', '/visitor/token', unknown.status, unknown.body);
  });

  it('internal events: 202 with the event id, 403 without the token', async () => {
    const client = new HttpClient(t.url);
    const { token } = await visitorToken(t.url);
    expect(token).toBeTruthy();
    const published = await client.json('/internal/events', {
      method: 'POST',
      json: { channel: 'global-demo', event: 'test.ping', data: { n: 1 } },
      headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
    });
    expect(published.status).toBe(202);
    expectDocumentedResponse('post', '/internal/events', published.status, published.body);
    const forbidden = await client.json('/internal/events', {
      method: 'POST',
      json: { channel: 'global-demo', event: 'test.ping', data: {} },
    });
    expectDocumentedResponse('post', '/internal/events', forbidden.status, forbidden.body);
  });
});

describe('the rendered reference page (development only)', () => {
  let dev: TestApp;
  beforeAll(async () => {
    dev = await startTestApp({ env: { NODE_ENV: 'development' } });
  });
  afterAll(() => dev.stop());

  it('GET /docs lists every operation, self-hosted (no external script or stylesheet)', async () => {
    const res = await fetch(`${dev.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    for (const route of restRoutes) expect(html).toContain(`<code>${route.path}</code>`);
    expect(html).not.toMatch(/<script|https?:\/\/(?!localhost)/);
    const css = await fetch(`${dev.url}/docs/reference.css`);
    expect(css.status).toBe(200);
    expect(css.headers.get('content-type')).toMatch(/^text\/css/);
  });
});
