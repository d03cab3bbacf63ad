import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { describe, expect, it } from 'vitest';
import { declaredBodyCap } from '../../src/http/body-limit.js';
import { graphqlCors } from '../../src/http/cors.js';
import { refuseCrossSiteWrites } from '../../src/http/cross-site.js';
import { refuseMalformedGraphQLParams } from '../../src/http/graphql-params.js';
import { noStore, noStoreOnApiPaths } from '../../src/http/no-store.js';
import { listedOrigins, originAllowedFor, originOf, verifyWebSocketOrigin } from '../../src/http/origins.js';
import { bearerToken, clientIp, queryOf, singleHeader, wsAddressFor } from '../../src/http/request.js';

// Issue 28: the HTTP layer's rules checked value by value on plain request objects (no server),
// each rule at its edge: the exact header, status and error a request gets, and the one it does not.

interface FakeReq {
  method?: string;
  url?: string;
  path?: string;
  headers?: Record<string, string | string[] | undefined>;
  encrypted?: boolean;
  remoteAddress?: string;
}
const req = (r: FakeReq = {}) =>
  ({
    method: r.method ?? 'GET',
    url: r.url ?? r.path ?? '/',
    path: r.path ?? new URL(r.url ?? '/', 'http://x').pathname,
    headers: r.headers ?? {},
    socket: { encrypted: r.encrypted, remoteAddress: r.remoteAddress },
  }) as unknown as Request & IncomingMessage;

/** A response that records what a middleware did, and what it passed on to `next`. */
function run(mw: (req: Request, res: Response, next: NextFunction) => void, request: Request) {
  const headers: Record<string, string> = {};
  const vary: string[] = [];
  const out: { status?: number; body?: unknown; ended: boolean; next?: unknown; nextCalled: boolean } = {
    status: undefined,
    ended: false,
    nextCalled: false,
    next: undefined,
  };
  const res = {
    setHeader: (k: string, v: string) => {
      // Vary is recorded as the list of its names, whether set whole or through express's `res.vary`.
      if (k.toLowerCase() === 'vary') vary.splice(0, vary.length, ...v.split(/,\s*/));
      else headers[k.toLowerCase()] = v;
    },
    getHeader: (k: string) => (k.toLowerCase() === 'vary' ? vary.join(', ') || undefined : headers[k.toLowerCase()]),
    vary: (v: string) => vary.push(v),
    set statusCode(code: number) {
      out.status = code;
    },
    status(code: number) {
      out.status = code;
      return res;
    },
    json(body: unknown) {
      out.body = body;
      out.ended = true;
    },
    end() {
      out.ended = true;
    },
  } as unknown as Response;
  mw(request, res, (arg?: unknown) => {
    out.nextCalled = true;
    out.next = arg;
  });
  return { headers, vary, ...out };
}

describe('Cache-Control: no-store on the API paths only', () => {
  it.each([
    ['/agent', true],
    ['/agent/data/get', true],
    ['/AGENT/Data/Get', true],
    ['/visitor/message/send', true],
    ['/graphql', true],
    ['/internal/events', true],
    ['/api/conversation/list', true],
    ['/agents', false],
    ['/apix', false],
    ['/graphqlx/y', false],
    ['/', false],
    ['/widget.js', false],
    ['/attachments/a1', false],
  ])('%s → no-store %s', (path, expected) => {
    const r = run(noStoreOnApiPaths, req({ path }));
    expect(r.headers['cache-control']).toBe(expected ? 'no-store' : undefined);
    expect(r.nextCalled).toBe(true);
    expect(r.next).toBeUndefined();
  });
  it('noStore sets it and passes on', () => {
    const r = run(noStore, req());
    expect(r).toMatchObject({ headers: { 'cache-control': 'no-store' }, nextCalled: true, next: undefined });
  });
});

describe('GraphQL GET parameters: variables and extensions are JSON objects or absent', () => {
  it.each([
    ['variables', '[]'],
    ['variables', 'null'],
    ['variables', '1'],
    ['variables', '"x"'],
    ['variables', '{not json'],
    ['extensions', '[1]'],
    ['extensions', 'true'],
  ])('%s=%s → 400 BAD_USER_INPUT naming it', (name, raw) => {
    const r = run(refuseMalformedGraphQLParams, req({ url: `/graphql?query=x&${name}=${encodeURIComponent(raw)}` }));
    expect(r.nextCalled).toBe(false);
    expect(r.status).toBe(400);
    expect(r.body).toEqual({
      errors: [{ message: `${name} must be a JSON object`, extensions: { code: 'BAD_USER_INPUT' } }],
    });
  });
  it.each([
    '/graphql?query=x',
    '/graphql?query=x&variables=',
    '/graphql?query=x&variables=%7B%7D',
    '/graphql?query=x&variables=%7B%22a%22%3A1%7D&extensions=%7B%7D',
  ])('%s passes', (url) => {
    const r = run(refuseMalformedGraphQLParams, req({ url }));
    expect(r).toMatchObject({ nextCalled: true, next: undefined, status: undefined });
  });
  it('a POST is not its business, whatever its query string', () => {
    const r = run(refuseMalformedGraphQLParams, req({ method: 'POST', url: '/graphql?variables=%5B%5D' }));
    expect(r).toMatchObject({ nextCalled: true, next: undefined, status: undefined });
  });
});

describe('the declared body cap: 64 KiB', () => {
  const cap = declaredBodyCap((r) => r.path === '/exempt');
  const code = (r: { next?: unknown }) => (r.next as { code?: string } | undefined)?.code;
  it.each([
    [undefined, undefined],
    ['0', undefined],
    [String(64 * 1024), undefined],
    [String(64 * 1024 + 1), 'PAYLOAD_TOO_LARGE'],
    ['99999999', 'PAYLOAD_TOO_LARGE'],
  ])('Content-Length %s → %s', (length, expected) => {
    const r = run(cap, req({ method: 'POST', path: '/x', headers: { 'content-length': length } }));
    expect(r.nextCalled).toBe(true);
    expect(code(r)).toBe(expected);
    if (expected) expect(String((r.next as Error).message)).toBe('Request body larger than 64kb');
  });
  it('an exempt request (a streamed upload) is not refused on its declared length', () => {
    const r = run(cap, req({ method: 'POST', path: '/exempt', headers: { 'content-length': '99999999' } }));
    expect(r).toMatchObject({ nextCalled: true, next: undefined });
  });
});

describe('CORS of /graphql: the allowlist only, its own origin echoed, with credentials', () => {
  const cors = graphqlCors({ allowedOrigins: ['https://shop.example', 'not a url'], publicWsAddress: undefined });
  it('a listed origin gets its own origin back and credentials; Vary: Origin always', () => {
    const r = run(cors, req({ method: 'POST', headers: { origin: 'https://shop.example' } }));
    expect(r.headers).toEqual({
      'access-control-allow-origin': 'https://shop.example',
      'access-control-allow-credentials': 'true',
    });
    expect(r.vary).toEqual(['Origin']);
    expect(r).toMatchObject({ nextCalled: true, next: undefined, status: undefined });
  });
  it.each(['https://evil.example', 'https://sub.shop.example', 'http://shop.example', 'null'])(
    '%s gets no CORS header, and the request goes on',
    (origin) => {
      const r = run(cors, req({ method: 'POST', headers: { origin } }));
      expect(r.headers).toEqual({});
      expect(r.vary).toEqual(['Origin']);
      expect(r.nextCalled).toBe(true);
    },
  );
  it('a preflight of a listed origin is answered 204 with the methods, the asked headers and the max age', () => {
    const r = run(
      cors,
      req({
        method: 'OPTIONS',
        headers: {
          origin: 'https://shop.example',
          'access-control-request-headers': 'content-type, x-apollo-operation-name',
        },
      }),
    );
    expect(r.nextCalled).toBe(false);
    expect(r.status).toBe(204);
    expect(r.ended).toBe(true);
    expect(r.headers).toEqual({
      'access-control-allow-origin': 'https://shop.example',
      'access-control-allow-credentials': 'true',
      'access-control-allow-methods': 'GET, POST, OPTIONS',
      'access-control-allow-headers': 'content-type, x-apollo-operation-name',
      'access-control-max-age': '600',
    });
  });
  it('asked headers outside the plain token set are not echoed', () => {
    const r = run(
      cors,
      req({
        method: 'OPTIONS',
        headers: { origin: 'https://shop.example', 'access-control-request-headers': 'x\r\ny: z' },
      }),
    );
    expect(r.headers['access-control-allow-headers']).toBeUndefined();
    expect(r.headers['access-control-allow-methods']).toBe('GET, POST, OPTIONS');
    const long = run(
      cors,
      req({
        method: 'OPTIONS',
        headers: { origin: 'https://shop.example', 'access-control-request-headers': 'a'.repeat(513) },
      }),
    );
    expect(long.headers['access-control-allow-headers']).toBeUndefined();
  });
  it('a preflight of another origin is answered 204 with nothing allowed, never executed', () => {
    const r = run(cors, req({ method: 'OPTIONS', headers: { origin: 'https://evil.example' } }));
    expect(r).toMatchObject({ nextCalled: false, status: 204, ended: true, headers: {} });
  });
  it('PUBLIC_WS_ADDRESS’s origin is listed (ws → http, wss → https)', () => {
    expect([...listedOrigins({ allowedOrigins: [], publicWsAddress: 'wss://chat.example:8443/graphql' })]).toEqual([
      'https://chat.example:8443',
    ]);
    expect([...listedOrigins({ allowedOrigins: [], publicWsAddress: 'WS://chat.example/graphql' })]).toEqual([
      'http://chat.example',
    ]);
  });
});

describe('origins', () => {
  it('originOf: the serialised origin, or undefined for a malformed or opaque one', () => {
    expect(originOf('https://A.example:443/path?q')).toBe('https://a.example');
    expect(originOf('http://a.example:8080')).toBe('http://a.example:8080');
    expect(originOf('null')).toBeUndefined();
    expect(originOf('not a url')).toBeUndefined();
    expect(originOf('data:text/html,x')).toBeUndefined();
  });
  const policy = { allowedOrigins: ['https://shop.example'], publicWsAddress: undefined, trustProxy: false };
  it.each([
    [undefined, {}, true],
    ['https://shop.example', {}, true],
    ['https://evil.example', {}, false],
    ['null', {}, false],
    ['garbage', {}, false],
    // The gateway's own origin: its Host, either scheme when the scheme is unknown.
    ['http://gw.example:3000', { host: 'gw.example:3000' }, true],
    ['https://gw.example:3000', { host: 'gw.example:3000' }, true],
    ['https://gw.example:3001', { host: 'gw.example:3000' }, false],
    ['https://gw.example', {}, false],
  ])('%s with headers %j → %s', (origin, headers, expected) => {
    expect(originAllowedFor(origin, req({ headers }), policy)).toBe(expected);
  });
  it('over TLS, or behind a trusted proxy saying so, only the https own origin', () => {
    const host = { host: 'gw.example' };
    expect(originAllowedFor('http://gw.example', req({ headers: host, encrypted: true }), policy)).toBe(false);
    expect(originAllowedFor('https://gw.example', req({ headers: host, encrypted: true }), policy)).toBe(true);
    const trusted = { ...policy, trustProxy: true };
    const https = { ...host, 'x-forwarded-proto': 'HTTPS, http' };
    expect(originAllowedFor('https://gw.example', req({ headers: https }), trusted)).toBe(true);
    expect(originAllowedFor('http://gw.example', req({ headers: https }), trusted)).toBe(false);
    const http = { ...host, 'x-forwarded-proto': ['http'] };
    expect(originAllowedFor('http://gw.example', req({ headers: http }), trusted)).toBe(true);
    expect(originAllowedFor('https://gw.example', req({ headers: http }), trusted)).toBe(false);
    // A trusted proxy that says nothing: plain http.
    expect(originAllowedFor('https://gw.example', req({ headers: host }), trusted)).toBe(false);
    expect(originAllowedFor('http://gw.example', req({ headers: host }), trusted)).toBe(true);
    // Untrusted: the header is ignored, either scheme.
    expect(originAllowedFor('http://gw.example', req({ headers: https }), policy)).toBe(true);
  });
  it('the WebSocket check: done(true), or done(false, 403, …)', () => {
    const verify = verifyWebSocketOrigin(policy);
    const calls: unknown[][] = [];
    verify({ origin: 'https://shop.example', secure: false, req: req() }, (...a) => calls.push(a));
    verify({ origin: 'https://evil.example', secure: false, req: req() }, (...a) => calls.push(a));
    verify({ secure: false, req: req() }, (...a) => calls.push(a));
    expect(calls).toEqual([[true], [false, 403, 'Origin not allowed'], [true]]);
  });
});

describe('cross-site writes', () => {
  const refuse = refuseCrossSiteWrites({
    allowedOrigins: ['https://shop.example'],
    publicWsAddress: undefined,
    trustProxy: false,
  });
  const codeOf = (r: { next?: unknown }) => (r.next as { code?: string } | undefined)?.code;
  it.each([
    ['GET', { origin: 'https://evil.example' }, undefined],
    ['HEAD', { 'sec-fetch-site': 'cross-site' }, undefined],
    ['OPTIONS', { origin: 'https://evil.example' }, undefined],
    ['POST', {}, undefined],
    ['POST', { origin: 'https://shop.example' }, undefined],
    ['POST', { origin: 'https://evil.example' }, 'FORBIDDEN'],
    ['DELETE', { origin: 'null' }, 'FORBIDDEN'],
    ['POST', { origin: ['https://shop.example', 'https://shop.example'] }, 'FORBIDDEN'],
    ['POST', { 'sec-fetch-site': 'cross-site' }, 'FORBIDDEN'],
    ['POST', { 'sec-fetch-site': 'same-site' }, 'FORBIDDEN'],
    ['POST', { 'sec-fetch-site': 'same-origin' }, undefined],
    ['POST', { 'sec-fetch-site': 'none' }, undefined],
  ])('%s with %j → %s', (method, headers, expected) => {
    const r = run(refuse, req({ method, path: '/agent/x', headers }));
    expect(r.nextCalled).toBe(true);
    expect(codeOf(r)).toBe(expected);
    if (expected) expect((r.next as Error).message).toBe('Cross-site request refused');
  });
  it('the login refuses a Session named in the URL; other paths and the header do not', () => {
    const login = run(refuse, req({ method: 'POST', url: '/agent/login/check?token=abc' }));
    expect(codeOf(login)).toBe('BAD_USER_INPUT');
    expect((login.next as Error).message).toBe('token may not be given in the URL to log in: use the token header');
    expect(
      run(refuse, req({ method: 'POST', url: '/agent/login/check', headers: { token: 'abc' } })).next,
    ).toBeUndefined();
    expect(run(refuse, req({ method: 'POST', url: '/agent/other?token=abc' })).next).toBeUndefined();
    expect(run(refuse, req({ method: 'GET', url: '/agent/login/check?token=abc' })).next).toBeUndefined();
  });
});

describe('request helpers', () => {
  it('queryOf parses the raw URL', () => {
    expect(queryOf(req({ url: '/a?x=1&y=%20' })).get('y')).toBe(' ');
    expect(queryOf({ url: undefined } as IncomingMessage).toString()).toBe('');
  });
  it('singleHeader: one value, or BAD_USER_INPUT naming the header', () => {
    expect(singleHeader(req({ headers: { token: 't' } }), 'token')).toBe('t');
    expect(singleHeader(req(), 'token')).toBeUndefined();
    expect(() => singleHeader(req({ headers: { token: ['a', 'b'] } }), 'token')).toThrow(
      'header token must be given once',
    );
  });
  it.each([
    ['Bearer abc', 'abc'],
    ['bearer   abc  ', 'abc'],
    ['Bearer', undefined],
    ['Bearer a b', undefined],
    ['Basic abc', undefined],
    [`Bearer ${'x'.repeat(512)}`, 'x'.repeat(512)],
    [`Bearer ${'x'.repeat(513)}`, undefined],
    [undefined, undefined],
  ])('bearerToken(%s) → %s', (authorization, expected) => {
    expect(bearerToken(req({ headers: { authorization } }))).toBe(expected);
  });
  it('clientIp: the peer, or the first X-Forwarded-For hop when the proxy is trusted and the hop is an address', () => {
    const xff = { 'x-forwarded-for': ' 203.0.113.9 , 10.0.0.1' };
    expect(clientIp(req({ headers: xff, remoteAddress: '10.0.0.2' }), { trustProxy: false })).toBe('10.0.0.2');
    expect(clientIp(req({ headers: xff, remoteAddress: '10.0.0.2' }), { trustProxy: true })).toBe('203.0.113.9');
    expect(clientIp(req({ headers: { 'x-forwarded-for': ['2001:db8::1', 'x'] } }), { trustProxy: true })).toBe(
      '2001:db8::1',
    );
    expect(
      clientIp(req({ headers: { 'x-forwarded-for': 'evil<script>' }, remoteAddress: '10.0.0.2' }), {
        trustProxy: true,
      }),
    ).toBe('10.0.0.2');
    expect(
      clientIp(req({ headers: { 'x-forwarded-for': '1' }, remoteAddress: '10.0.0.2' }), { trustProxy: true }),
    ).toBe('10.0.0.2');
    expect(clientIp(req(), { trustProxy: false })).toBe('unknown');
  });
  it('wsAddressFor: PUBLIC_WS_ADDRESS, else this request’s host and scheme, a malformed Host → localhost', () => {
    const cfg = { publicWsAddress: undefined, port: 3000, trustProxy: false };
    expect(wsAddressFor(req(), { ...cfg, publicWsAddress: 'wss://x.example/graphql' })).toBe('wss://x.example/graphql');
    expect(wsAddressFor(req({ headers: { host: 'gw.example:8080' } }), cfg)).toBe('ws://gw.example:8080/graphql');
    expect(wsAddressFor(req({ headers: { host: '[::1]:8080' } }), cfg)).toBe('ws://[::1]:8080/graphql');
    expect(wsAddressFor(req({ headers: { host: 'gw.example' }, encrypted: true }), cfg)).toBe(
      'wss://gw.example/graphql',
    );
    expect(wsAddressFor(req({ headers: { host: 'evil"><x' } }), cfg)).toBe('ws://localhost:3000/graphql');
    expect(wsAddressFor(req(), cfg)).toBe('ws://localhost:3000/graphql');
    const proto = { host: 'gw.example', 'x-forwarded-proto': 'https' };
    expect(wsAddressFor(req({ headers: proto }), cfg)).toBe('ws://gw.example/graphql');
    expect(wsAddressFor(req({ headers: proto }), { ...cfg, trustProxy: true })).toBe('wss://gw.example/graphql');
  });
});
