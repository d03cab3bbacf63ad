import type { NextFunction, Request, Response } from 'express';
import { createSchema, createYoga, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import { describe, expect, it } from 'vitest';
import { createDirectGraphQL } from '../../src/schema/yoga-direct.js';

// The direct path of src/schema/yoga-direct.ts checked on a real yoga, condition by condition: a
// request either takes the direct path (answered by `handle`) or is passed on (`next`) unchanged.
// Every "passed on" case sends a body whose query IS known, so only the condition under test decides.

const typeDefs = /* GraphQL */ `
  type Query {
    hello(name: String): String!
    boom: String
    touched: Boolean
  }
`;

/** What a plugin of the test yoga saw of `waitUntil` (the direct path's own, on its context). */
const waitUntilSeen = { caught: 0 };

// Calls the context's waitUntil as a deferring plugin would: with nothing, and with a promise
// whose failure must be handled (a fake recording that `catch` was attached).
const deferring: Plugin = {
  onExecute({ args }) {
    const ctx = args.contextValue as { waitUntil?: (p: unknown) => void };
    if (!args.document.loc?.source.body.includes('touched')) return;
    ctx.waitUntil?.(undefined);
    ctx.waitUntil?.({
      catch: () => {
        waitUntilSeen.caught++;
      },
    });
  },
};

function setup() {
  const direct = createDirectGraphQL();
  const yoga = createYoga({
    schema: createSchema({
      typeDefs,
      resolvers: {
        Query: {
          hello: (_: unknown, { name }: { name?: string | null }) => `hello ${name ?? 'world'}`,
          boom: () => {
            throw new Error('kaboom');
          },
          touched: () => true,
        },
      },
    }),
    graphqlEndpoint: '/graphql',
    logging: false,
    plugins: [deferring, direct.plugin],
  }) as unknown as YogaServerInstance<object, object>;
  return { direct, yoga, handler: direct.handle(yoga) };
}

/** yoga's own HTTP path: parses and validates the query, so the direct plugin may remember it. */
async function viaYoga(yoga: YogaServerInstance<object, object>, body: unknown) {
  const res = await yoga.fetch('http://localhost/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, contentType: res.headers.get('content-type'), body: await res.text() };
}

interface FakeReq {
  method?: string;
  originalUrl?: string;
  accept?: string;
  body: unknown;
}
type Outcome =
  | { kind: 'next'; error: unknown }
  | { kind: 'sent'; status: number; headers: Record<string, string>; body: string };

/** Runs the handler on an express-like req/res; resolves with what it did. */
function run(handler: ReturnType<ReturnType<typeof setup>['direct']['handle']>, r: FakeReq): Promise<Outcome> {
  return new Promise((resolve) => {
    const headers: Record<string, string> = {};
    const req = {
      method: r.method ?? 'POST',
      originalUrl: r.originalUrl ?? '/graphql',
      headers: r.accept === undefined ? {} : { accept: r.accept },
      body: r.body,
    } as unknown as Request;
    const res = {
      statusCode: 0,
      headersSent: false,
      setHeader(name: string, value: number | string) {
        headers[name.toLowerCase()] = String(value);
      },
      end(body: string) {
        resolve({ kind: 'sent', status: res.statusCode, headers, body });
      },
    };
    const next: NextFunction = (error?: unknown) => resolve({ kind: 'next', error });
    handler(req, res as unknown as Response, next);
  });
}

const HELLO = '{ hello }';
const passedOn: Outcome = { kind: 'next', error: undefined };
const helloAnswer = (text: string): Extract<Outcome, { kind: 'sent' }> => {
  const body = JSON.stringify({ data: { hello: text } });
  return {
    kind: 'sent',
    status: 200,
    headers: { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(body)) },
    body,
  };
};

const HELLO_WORLD = helloAnswer('hello world');

/** The plugin's onValidate hook called as envelop calls it, for contexts yoga's HTTP path never makes. */
function validated(direct: ReturnType<typeof createDirectGraphQL>, context: object, valid = true) {
  const onValidate = direct.plugin.onValidate as unknown as (p: { context: object }) => (r: { valid: boolean }) => void;
  onValidate({ context })({ valid });
}

describe('yoga-direct: which requests take the direct path', () => {
  it('a known query in a plain JSON POST is answered directly: 200, JSON type, exact length, the same data as yoga', async () => {
    const { yoga, handler } = setup();
    const warm = await viaYoga(yoga, { query: HELLO });
    expect(warm).toEqual({ status: 200, contentType: 'application/json; charset=utf-8', body: HELLO_WORLD.body });
    for (const accept of [undefined, '*/*', 'application/json']) {
      expect(await run(handler, { accept, body: { query: HELLO } })).toEqual(HELLO_WORLD);
    }
  });

  it('passes on a query text yoga has not validated over HTTP', async () => {
    const { yoga, handler } = setup();
    await viaYoga(yoga, { query: HELLO });
    expect(await run(handler, { body: { query: '{ hello boom }' } })).toEqual(passedOn);
  });

  it('passes on another method, another URL, or an Accept yoga answers otherwise', async () => {
    const { yoga, handler } = setup();
    await viaYoga(yoga, { query: HELLO });
    const body = { query: HELLO };
    expect(await run(handler, { method: 'GET', accept: 'application/json', body })).toEqual(passedOn);
    expect(await run(handler, { originalUrl: '/graphql?x=1', body })).toEqual(passedOn);
    expect(await run(handler, { originalUrl: '/other', body })).toEqual(passedOn);
    expect(await run(handler, { accept: 'text/html', body })).toEqual(passedOn);
    expect(await run(handler, { accept: 'application/graphql-response+json', body })).toEqual(passedOn);
  });

  it('passes on a body that is not a plain object of the three params', async () => {
    const { yoga, handler } = setup();
    await viaYoga(yoga, { query: HELLO });
    for (const body of [
      null,
      undefined,
      HELLO,
      [{ query: HELLO }],
      { query: HELLO, extensions: {} },
      { query: 1 },
      { query: HELLO, variables: [] },
      { query: HELLO, variables: 'name' },
      { query: HELLO, variables: 5 },
      { query: HELLO, operationName: 7 },
    ]) {
      expect(await run(handler, { body }), JSON.stringify(body)).toEqual(passedOn);
    }
  });

  it('takes null or omitted variables and operationName, a variables object and a string operationName', async () => {
    const { yoga, handler } = setup();
    const named = 'query Greet($name: String) { hello(name: $name) }';
    await viaYoga(yoga, { query: HELLO });
    await viaYoga(yoga, { query: named, variables: { name: 'x' } });
    expect(await run(handler, { body: { query: HELLO, variables: null, operationName: null } })).toEqual(HELLO_WORLD);
    expect(await run(handler, { body: { query: named, variables: { name: 'ann' }, operationName: 'Greet' } })).toEqual(
      helloAnswer('hello ann'),
    );
  });

  it('an answer with errors is yoga’s own: the same status, type and body as over yoga’s path', async () => {
    const { yoga, handler } = setup();
    const query = '{ boom }';
    const viaHttp = await viaYoga(yoga, { query });
    const answer = await run(handler, { body: { query } });
    expect(answer).toEqual({
      kind: 'sent',
      status: viaHttp.status,
      headers: { 'content-type': viaHttp.contentType, 'content-length': String(Buffer.byteLength(viaHttp.body)) },
      body: viaHttp.body,
    });
    expect(JSON.parse(viaHttp.body)).toEqual({
      data: { boom: null },
      errors: [
        {
          message: 'Unexpected error.',
          locations: [{ line: 1, column: 3 }],
          path: ['boom'],
          extensions: { code: 'INTERNAL_SERVER_ERROR' },
        },
      ],
    });
  });

  it('gives the context a waitUntil that takes nothing and handles a deferred failure', async () => {
    const { yoga, handler } = setup();
    const query = '{ touched }';
    await viaYoga(yoga, { query });
    waitUntilSeen.caught = 0;
    const answer = await run(handler, { body: { query } });
    expect(answer).toMatchObject({ kind: 'sent', status: 200, body: '{"data":{"touched":true}}' });
    expect(waitUntilSeen.caught).toBe(1);
  });

  it('writes nothing once the response has been sent', async () => {
    const { yoga, handler } = setup();
    await viaYoga(yoga, { query: HELLO });
    const written: unknown[] = [];
    const res = {
      headersSent: true,
      setHeader: (...args: unknown[]) => written.push(args),
      end: (...args: unknown[]) => written.push(args),
    };
    let nextCalls = 0;
    handler(
      { method: 'POST', originalUrl: '/graphql', headers: {}, body: { query: HELLO } } as Request,
      res as never,
      () => {
        nextCalls++;
      },
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect({ written, nextCalls }).toEqual({ written: [], nextCalls: 0 });
  });
});

describe('yoga-direct: what is remembered', () => {
  it('not a query that failed validation', async () => {
    const { yoga, handler } = setup();
    const invalid = '{ nope }';
    const refused = await viaYoga(yoga, { query: invalid });
    expect(JSON.parse(refused.body).errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(await run(handler, { body: { query: invalid } })).toEqual(passedOn);
  });

  it('not a socket’s validation, nor one without an HTTP request; a context without a string query is ignored', async () => {
    const { direct, handler } = setup();
    validated(direct, { socketContext: {}, request: {}, params: { query: HELLO } });
    validated(direct, { params: { query: HELLO } });
    expect(() => validated(direct, { request: {} })).not.toThrow();
    expect(() => validated(direct, { request: {}, params: {} })).not.toThrow();
    expect(() => validated(direct, { request: {}, params: { query: 5 } })).not.toThrow();
    expect(await run(handler, { body: { query: HELLO } })).toEqual(passedOn);
    // The same call with an HTTP request and a valid result is remembered.
    validated(direct, { request: {}, params: { query: HELLO } });
    expect(await run(handler, { body: { query: HELLO } })).toEqual(HELLO_WORLD);
  });

  it('a text of 8192 characters is remembered, one of 8193 is not', async () => {
    const { yoga, handler } = setup();
    const padded = (length: number) => `${HELLO}${' '.repeat(length - HELLO.length)}`;
    const [atLimit, over] = [padded(8192), padded(8193)];
    expect(atLimit.length).toBe(8192);
    expect((await viaYoga(yoga, { query: atLimit })).status).toBe(200);
    expect((await viaYoga(yoga, { query: over })).status).toBe(200);
    expect(await run(handler, { body: { query: atLimit } })).toEqual(HELLO_WORLD);
    expect(await run(handler, { body: { query: over } })).toEqual(passedOn);
  });

  it('512 texts are kept; the 513th evicts the oldest only, and a text validated again is not added twice', async () => {
    const { direct, handler } = setup();
    const text = (i: number) => `{ hello # ${i}\n}`;
    for (let i = 0; i < 512; i++) validated(direct, { request: {}, params: { query: text(i) } });
    // Validated again: already known, so it neither grows the set nor evicts the oldest.
    validated(direct, { request: {}, params: { query: text(1) } });
    expect(await run(handler, { body: { query: text(0) } })).toEqual(HELLO_WORLD);
    validated(direct, { request: {}, params: { query: text(512) } });
    expect(await run(handler, { body: { query: text(0) } })).toEqual(passedOn);
    for (const i of [1, 2, 511, 512]) expect(await run(handler, { body: { query: text(i) } })).toEqual(HELLO_WORLD);
  });
});
