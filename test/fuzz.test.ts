import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, visitorToken } from './support/clients.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * Property: whatever a client throws at any route — random bodies, headers, query strings,
 * methods — the gateway answers without a 5xx (other than a documented 503), with a
 * well-formed envelope on JSON endpoints, stays alive, and never echoes a secret.
 */

const ROUTES: { method: string; path: string }[] = [
  { method: 'GET', path: '/agent/login/logincaptcha' },
  { method: 'GET', path: '/agent/login/joincaptcha' },
  { method: 'POST', path: '/agent/login/check' },
  { method: 'POST', path: '/agent/login/smscaptcha' },
  { method: 'POST', path: '/agent/login/smsverify' },
  { method: 'POST', path: '/agent/logout' },
  { method: 'GET', path: '/agent/data/get' },
  { method: 'GET', path: '/agent/unknown' },
  { method: 'POST', path: '/visitor/token' },
  { method: 'GET', path: '/visitor/data/get' },
  { method: 'POST', path: '/internal/events' },
  { method: 'POST', path: '/graphql' },
  { method: 'GET', path: '/graphql' },
  { method: 'GET', path: '/healthz' },
  { method: 'GET', path: '/readyz' },
];

const nasty = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.constantFrom(
    '',
    '\u0000',
    '\ud800',
    'a'.repeat(5000),
    '[]',
    '{}',
    'null',
    '%',
    '%00',
    '../../etc/passwd',
    "' or 1=1 --",
  ),
  fc.integer().map(String),
);
const key = fc.oneof(
  fc.constantFrom(
    'token',
    'token[]',
    'username',
    'username[]',
    'password',
    'captcha',
    'mobile',
    'appkey',
    'channel',
    'event',
    'data',
    'query',
    'variables',
    'rand',
    'cid',
    'user_id',
    'user_hash',
  ),
  fc.string({ maxLength: 12 }),
);
const pairs = fc.array(fc.tuple(key, nasty), { maxLength: 6 });
const jsonValue = fc.jsonValue({ maxDepth: 4 });

const request = fc.record({
  route: fc.constantFrom(...ROUTES),
  query: pairs,
  headerToken: fc.option(nasty),
  authorization: fc.option(
    fc.oneof(
      nasty,
      nasty.map((s) => `Bearer ${s}`),
    ),
  ),
  cookie: fc.option(nasty.map((s) => `parley.sid=${s}`)),
  body: fc.oneof(
    pairs.map((p) => ({ type: 'application/x-www-form-urlencoded', text: new URLSearchParams(p).toString() })),
    fc
      .oneof(jsonValue, fc.dictionary(key, jsonValue))
      .map((v) => ({ type: 'application/json', text: JSON.stringify(v) })),
    nasty.map((s) => ({ type: 'application/json', text: s })),
    nasty.map((s) => ({ type: 'text/plain', text: s })),
  ),
});

const headerSafe = (s: string) => /^[\t\x20-\x7e]*$/.test(s);

describe('fuzz: random input on every route', () => {
  let t: TestApp;
  let secrets: string[];
  let cases = 0;
  beforeAll(async () => {
    t = await startTestApp({ env: { SMS_REGISTRATION: 'on' } });
    const agent = await agentSession(t.url, 'alice');
    const visitor = await visitorToken(t.url);
    secrets = [agent.token, visitor.token];
  });
  afterAll(async () => {
    console.log(`fuzz: ${cases} random requests, 0 unexpected 5xx`);
    await t.stop();
  });

  it('never answers a 5xx other than 503, always a valid envelope on JSON endpoints, never echoes a secret', async () => {
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        cases++;
        const url = new URL(t.url + r.route.path);
        for (const [k, v] of r.query) url.searchParams.append(k, v);
        const headers: Record<string, string> = { 'content-type': r.body.type };
        if (r.headerToken !== null && headerSafe(r.headerToken)) headers.token = r.headerToken;
        if (r.authorization !== null && headerSafe(r.authorization)) headers.authorization = r.authorization;
        if (r.cookie !== null && headerSafe(r.cookie)) headers.cookie = r.cookie;
        const res = await fetch(url, {
          method: r.route.method,
          headers,
          body: r.route.method === 'POST' ? r.body.text : undefined,
          redirect: 'manual',
        });
        const text = await res.text();
        expect(
          res.status === 503 || res.status < 500,
          `${r.route.method} ${r.route.path} -> ${res.status}: ${text.slice(0, 300)}`,
        ).toBe(true);
        for (const secret of secrets) expect(text).not.toContain(secret);
        expect(text).not.toMatch(/\n\s+at .+\(.*:\d+:\d+\)|node_modules|SELECT |syntax error at/i);
        const type = res.headers.get('content-type') ?? '';
        if (type.includes('json') && !['/graphql', '/healthz', '/readyz'].includes(r.route.path)) {
          const body = JSON.parse(text);
          expect(typeof body.code).toBe('number');
          expect(typeof body.msg).toBe('string');
          expect('data' in body).toBe(true);
          if (res.status >= 400) expect(body.code).not.toBe(0);
        }
      }),
      { numRuns: 1000 },
    );
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
  });
});
