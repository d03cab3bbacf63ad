import { readdirSync } from 'node:fs';
import type { RequestListener } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueVisitorToken } from '../../src/resolvers/visitor.js';
import { endpoints } from '../../src/rest/endpoints.js';
import { type AnyRoute, isRaw } from '../../src/rest/route.js';
import { agentSession } from '../support/clients.js';
import { CAPTCHA, INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Property: whatever a client throws at any route of the gateway — any method, random bodies,
 * headers and query strings, and also well-formed requests — as any identity, the gateway
 * answers without a 5xx (other than a documented 503), with a well-formed envelope where it
 * answers JSON outside GraphQL, stays alive, and never echoes a secret of the request.
 *
 * The routes come from the application itself: every path its router mounts (the REST
 * declarations of src/rest/endpoints.ts, the pages of src/pages/routes.ts, GraphQL, the
 * documentation, metrics) and every static asset file. The declarations add each endpoint's
 * identity and input fields, so a share of the cases are well-formed requests by the right
 * identity (a logged-in agent, the ticket agent tom, a visitor with a valid token, the internal
 * token) and reach the success paths.
 */

/**
 * Cases per run: 1,000 requests (and 40 crafted cursors) in CI (`CI` set by `.ci/run`), 400 (and
 * 16) in a local `npm test`; `FUZZ_RUNS` chooses (the cursors follow at 1 in 25). The first 96 or
 * so are the well-formed request to every declared endpoint, in any run. A case costs the gateway's
 * own handling of the request (about 10 ms of CPU; the test's checks about 2 ms), so the count is
 * the cost. fast-check draws new cases in every run, and CI's three runs of each commit keep the
 * full count; 300 random cases still give each identity and method dozens of cases.
 */
const FUZZ_RUNS = Number(process.env.FUZZ_RUNS) || (process.env.CI ? 1000 : 400);
const CURSOR_RUNS = Math.min(40, Math.max(10, Math.round(FUZZ_RUNS / 25)));

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;
type Method = (typeof METHODS)[number];
type IdentityName = 'anonymous' | 'agent' | 'ticket agent' | 'visitor' | 'internal';
const IDENTITIES: IdentityName[] = ['anonymous', 'agent', 'ticket agent', 'visitor', 'internal'];

interface FuzzRoute {
  path: string;
  /** The methods the application declares for it (empty: a mounted middleware, any method). */
  methods: Method[];
  declared?: AnyRoute;
}

interface RouterLayer {
  route?: { path: string | string[]; methods: Record<string, boolean> };
  rawPath?: string;
  handle?: { stack?: RouterLayer[] };
}

/** Every path the running app's express router mounts, with its methods (prefixes followed). */
function mountedRoutes(t: TestApp): FuzzRoute[] {
  const listener = t.app.server.listeners('request')[0] as RequestListener & { router?: { stack: RouterLayer[] } };
  const found = new Map<string, Set<Method>>();
  const add = (path: string, methods: string[]) => {
    const set = found.get(path) ?? new Set<Method>();
    for (const m of methods)
      if ((METHODS as readonly string[]).includes(m.toUpperCase())) set.add(m.toUpperCase() as Method);
    found.set(path, set);
  };
  const walk = (stack: RouterLayer[], prefix: string) => {
    for (const layer of stack) {
      const mount = layer.rawPath && layer.rawPath !== '/' ? layer.rawPath : '';
      if (layer.route) {
        for (const path of [layer.route.path].flat()) add(prefix + path, Object.keys(layer.route.methods));
      } else if (layer.handle?.stack) {
        walk(layer.handle.stack, prefix + mount);
      } else if (mount) {
        add(prefix + mount, []); // middleware mounted at a path (GraphQL, static assets, /agent)
      }
    }
  };
  walk(listener.router?.stack ?? [], '');
  return [...found].map(([path, methods]) => ({
    path,
    methods: [...methods],
    declared: endpoints.find((e) => e.path === path),
  }));
}

/** The static files the pages serve, as the asset router would find them. */
function assetRoutes(): FuzzRoute[] {
  const dir = new URL('../../src/pages/assets/', import.meta.url);
  return readdirSync(dir)
    .map((file) => ({ path: `/assets/${file}`, methods: ['GET' as Method] }))
    .concat([{ path: '/assets/vendor/graphql-ws/client.js', methods: ['GET'] }]);
}

/** Field names of a declaration's zod input (through effects and wrappers). */
function inputKeys(route: AnyRoute | undefined): string[] {
  let schema = route?.input as { shape?: Record<string, unknown>; _def?: Record<string, unknown> } | undefined;
  for (let i = 0; schema && i < 5; i++) {
    if (schema.shape) return Object.keys(schema.shape);
    schema = (schema._def?.schema ?? schema._def?.innerType) as typeof schema;
  }
  return [];
}

/** A valid value for each input field the gateway knows (the demo data's names). */
const VALID: Record<string, unknown> = {
  appkey: 'demo-appkey',
  // Not the identities' own accounts: a spoiled login must not lock out alice or tom.
  username: 'bob',
  password: 'bob-password',
  captcha: CAPTCHA,
  mobile: '13700009999',
  code: '123456',
  channel: 'global-demo',
  event: 'fuzz.event',
  data: { from: 'fuzz' },
  nickname: 'Fuzz',
  lang: 'en',
};

const GRAPHQL_DOCUMENTS = [
  '{ __typename }',
  '{ currentAgent { agentId state } }',
  '{ agentWorkbench { agent { agentId } setting { bid } } }',
  '{ visitorBootstrap { visitor { uid channel } } }',
  'mutation { setAgentState(state: busy) { state } }',
];

/**
 * Page cursors as a client could craft them (issue 27, row 7): base64url of JSON arrays of any
 * length whose values are out-of-range numbers, non-dates, strings and nested junk.
 */
const cursorValue = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.constantFrom(1e308, -1, 2 ** 31, 2 ** 40, 2 ** 63, Number.MAX_SAFE_INTEGER, 0.5),
  fc.string({ maxLength: 80 }),
  fc.constantFrom('notadate', '2026-13-45T99:00:00.000Z', '+275760-09-13', '2026-01-01T00:00:00.000Z'),
  fc.jsonValue({ maxDepth: 2 }),
);
const craftedCursor = fc
  .oneof(fc.array(cursorValue, { maxLength: 4 }), fc.jsonValue({ maxDepth: 2 }))
  .map((v) => Buffer.from(JSON.stringify(v) ?? 'null').toString('base64url'));

const nasty = fc.oneof(
  craftedCursor,
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
    ...Object.keys(VALID),
    'query',
    'variables',
    'rand',
    'cid',
    'user_id',
    'user_hash',
    'before',
    'after',
  ),
  fc.string({ maxLength: 12 }),
);
const pairs = fc.array(fc.tuple(key, nasty), { maxLength: 6 });
const jsonValue = fc.jsonValue({ maxDepth: 4 });
const headerSafe = (s: string) => /^[\t\x20-\x7e]*$/.test(s);

describe('fuzz: any method on every route of the application, as every identity', () => {
  let t: TestApp;
  let routes: FuzzRoute[];
  /** Each identity's credentials; refreshed when a case may have ended them (logout, revoke). */
  const credentials: Record<Exclude<IdentityName, 'anonymous'>, string> = {
    agent: '',
    'ticket agent': '',
    visitor: '',
    internal: INTERNAL_TOKEN,
  };
  const stale = new Set<IdentityName>();
  let visitorTokens = 0;
  const refresh = async (who: IdentityName) => {
    if (who === 'agent') credentials.agent = (await agentSession(t.url, 'alice')).token;
    if (who === 'ticket agent') credentials['ticket agent'] = (await agentSession(t.url, 'tom')).token;
    // Through the domain function the endpoint calls, from an address of its own each time (the
    // endpoint limits each address to 30 tokens a minute).
    if (who === 'visitor') {
      const issued = await issueVisitorToken(
        t.app.deps,
        { appkey: 'demo-appkey' },
        `198.51.100.${++visitorTokens % 250}`,
      );
      credentials.visitor = issued.token;
    }
    stale.delete(who);
  };
  /** Every credential handed out in this file: none may ever appear in an answer. */
  const everySecret = new Set<string>([INTERNAL_TOKEN]);
  const stats = {
    cases: 0,
    unexpected5xx: 0,
    byIdentity: Object.fromEntries(IDENTITIES.map((i) => [i, { cases: 0, ok: 0 }])) as Record<
      IdentityName,
      { cases: number; ok: number }
    >,
    /** 2xx answers of a declared endpoint called by the identity it declares. */
    ownSuccess: {} as Record<string, number>,
    methods: new Set<string>(),
    paths: new Set<string>(),
  };

  beforeAll(async () => {
    // Fuzz cases come from addresses of their own (X-Forwarded-For), so the per-address limits
    // they trip (wrong captchas, logins) never hold back the identities' own logins.
    t = await startTestApp({ env: { SMS_REGISTRATION: 'on', TRUST_PROXY: 'on' } });
    routes = [...mountedRoutes(t), ...assetRoutes()];
    for (const who of ['agent', 'ticket agent', 'visitor'] as const) await refresh(who);
  });
  afterAll(async () => {
    const identities = IDENTITIES.map((i) => `${i} ${stats.byIdentity[i].cases} (${stats.byIdentity[i].ok} 2xx)`).join(
      ', ',
    );
    console.log(
      `fuzz: ${stats.cases} requests on ${stats.paths.size} of ${routes?.length ?? 0} routes with ${stats.methods.size} methods; ` +
        `by identity: ${identities}; ${stats.unexpected5xx} unexpected 5xx`,
    );
    await t?.stop();
  });

  // Found by this fuzz test (it was a masked 500).
  it('a GraphQL GET whose `variables` is not a JSON object is refused with 400, not a 500', async () => {
    for (const variables of ['%00', '{', 'not json', '[1]', '"text"']) {
      const url = `${t.url}/graphql?query=${encodeURIComponent('{ __typename }')}&variables=${encodeURIComponent(variables)}`;
      const res = await fetch(url, { headers: { accept: 'application/json' } });
      expect([variables, res.status]).toEqual([variables, 400]);
    }
  });

  it('knows the routes from the application: every declared endpoint, the pages, GraphQL and the assets', () => {
    const paths = routes.map((r) => r.path);
    for (const e of endpoints) expect(paths).toContain(e.path);
    for (const p of [
      '/visitor/token/revoke',
      '/metrics',
      '/openapi.json',
      '/graphql',
      '/agent/login',
      '/visitor/',
      '/assets/parley.css',
    ]) {
      expect(paths).toContain(p);
    }
  });

  const request = fc.record({
    /** Half the cases on a declared REST endpoint, the others on any route. */
    declaredOnly: fc.boolean(),
    routeIndex: fc.nat(),
    /** Mostly the method the route declares, else any. */
    method: fc.oneof(
      { weight: 3, arbitrary: fc.constant(undefined) },
      { weight: 2, arbitrary: fc.constantFrom(...METHODS) },
    ),
    /** Mostly the identity the route declares, else any. */
    identity: fc.oneof(
      { weight: 3, arbitrary: fc.constant(undefined) },
      { weight: 2, arbitrary: fc.constantFrom(...IDENTITIES) },
    ),
    /** How an agent's Session travels: the `token` header, the cookie or `?token=`. */
    agentVia: fc.constantFrom('header', 'cookie', 'query'),
    wellFormed: fc.boolean(),
    /** In a well-formed request, one field replaced by junk (mostly none). */
    spoil: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.tuple(fc.nat(), nasty) }),
    graphql: fc.constantFrom(...GRAPHQL_DOCUMENTS),
    query: pairs,
    junkHeaders: fc.record({ token: fc.option(nasty), authorization: fc.option(nasty), cookie: fc.option(nasty) }),
    body: fc.oneof(
      pairs.map((p) => ({ type: 'application/x-www-form-urlencoded', text: new URLSearchParams(p).toString() })),
      fc
        .oneof(jsonValue, fc.dictionary(key, jsonValue))
        .map((v) => ({ type: 'application/json', text: JSON.stringify(v) })),
      nasty.map((s) => ({ type: 'application/json', text: s })),
      nasty.map((s) => ({ type: 'text/plain', text: s })),
    ),
  });

  type FuzzCase = typeof request extends fc.Arbitrary<infer T> ? T : never;
  const declaredRoutes = () => routes.filter((r) => r.declared);

  /**
   * Besides the random cases, one well-formed request to every declared endpoint as the identity
   * it declares, first: the success paths are always part of the run.
   */
  const wellFormedExamples = (): [FuzzCase][] =>
    declaredRoutes().map((_, routeIndex) => [
      {
        declaredOnly: true,
        routeIndex,
        method: undefined,
        identity: undefined,
        agentVia: 'header',
        wellFormed: true,
        spoil: null,
        graphql: GRAPHQL_DOCUMENTS[0] as string,
        query: [],
        junkHeaders: { token: null, authorization: null, cookie: null },
        body: { type: 'application/json', text: '{}' },
      },
    ]);

  const declaredIdentity = (route: FuzzRoute): IdentityName | undefined => {
    switch (route.declared?.identity) {
      case 'agent':
        return 'agent';
      case 'visitor':
        return 'visitor';
      case 'internal':
        return 'internal';
      default:
        return undefined;
    }
  };

  it('generated history cursors: 400 / BAD_USER_INPUT or a page, never a 5xx (REST and GraphQL, visitor and agent)', async () => {
    if (stale.has('visitor')) await refresh('visitor');
    if (stale.has('agent')) await refresh('agent');
    const ok = (status: number) => status === 200 || status === 400;
    await fc.assert(
      fc.asyncProperty(craftedCursor, async (c) => {
        const visitor = { authorization: `Bearer ${credentials.visitor}` };
        const agent = { token: credentials.agent };
        const answers = await Promise.all([
          fetch(`${t.url}/visitor/message/list?before=${encodeURIComponent(c)}`, { headers: visitor }),
          fetch(`${t.url}/visitor/message/list?after=${encodeURIComponent(c)}`, { headers: visitor }),
          ...['queue', 'mine'].map((scope) =>
            fetch(`${t.url}/agent/chat/list?scope=${scope}&after=${encodeURIComponent(c)}`, { headers: agent }),
          ),
          fetch(`${t.url}/graphql`, {
            method: 'POST',
            headers: { ...visitor, 'content-type': 'application/json' },
            body: JSON.stringify({ query: 'query($c: String) { messages(before: $c) { hasMore } }', variables: { c } }),
          }),
          fetch(`${t.url}/graphql`, {
            method: 'POST',
            headers: { ...agent, 'content-type': 'application/json' },
            body: JSON.stringify({
              query: 'query($c: String) { conversations(scope: queue, after: $c) { pageInfo { hasNextPage } } }',
              variables: { c },
            }),
          }),
        ]);
        for (const res of answers) {
          const body = await res.text();
          expect([res.url, res.status, ok(res.status)]).toEqual([res.url, res.status, true]);
          expect(body).not.toContain('INTERNAL');
        }
      }),
      { numRuns: CURSOR_RUNS },
    );
  });

  it('never answers a 5xx other than 503, always an envelope on the JSON API, never echoes a secret', async () => {
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const pool = r.declaredOnly ? declaredRoutes() : routes;
        const route = pool[r.routeIndex % pool.length] as FuzzRoute;
        const method = r.method ?? route.methods[0] ?? 'GET';
        const identity = r.identity ?? declaredIdentity(route) ?? 'anonymous';
        if (stale.has(identity)) await refresh(identity);

        const url = new URL(t.url + route.path.replace(/:(\w+)/g, 'fuzz-$1'));
        const headers: Record<string, string> = { 'x-forwarded-for': `203.0.113.${(r.routeIndex % 250) + 1}` };
        let body: string | undefined;
        const sent: string[] = [];
        if (r.wellFormed) {
          // A request as a legitimate client sends it: the declared input fields with valid values.
          const fields: Record<string, unknown> = Object.fromEntries(
            inputKeys(route.declared).map((k) => [k, VALID[k] ?? 'fuzz']),
          );
          if (route.path === '/graphql') fields.query = r.graphql;
          const names = Object.keys(fields);
          if (r.spoil && names.length) fields[names[r.spoil[0] % names.length] as string] = r.spoil[1];
          if (method === 'GET' || method === 'HEAD') {
            for (const [k, v] of Object.entries(fields))
              url.searchParams.set(k, typeof v === 'string' ? v : JSON.stringify(v));
          } else {
            headers['content-type'] = 'application/json';
            body = JSON.stringify(fields);
          }
          if (fields.password === VALID.password) sent.push(VALID.password as string);
        } else {
          for (const [k, v] of r.query) url.searchParams.append(k, v);
          headers['content-type'] = r.body.type;
          if (method !== 'GET' && method !== 'HEAD') body = r.body.text;
          for (const [name, value] of Object.entries(r.junkHeaders))
            if (value !== null && headerSafe(value)) headers[name] = value;
        }
        if (identity === 'agent' || identity === 'ticket agent') {
          const token = credentials[identity];
          sent.push(token);
          if (r.agentVia === 'header') headers.token = token;
          else if (r.agentVia === 'query') url.searchParams.set('token', token);
          else headers.cookie = `parley.sid=${token}`;
        } else if (identity === 'visitor' || identity === 'internal') {
          sent.push(credentials[identity]);
          headers.authorization = `Bearer ${credentials[identity]}`;
        }
        // Every credential handed out (not the demo password, which the API documents as an example).
        for (const secret of sent) if (secret !== VALID.password) everySecret.add(secret);

        const res = await fetch(url, { method, headers, body, redirect: 'manual' });
        const text = await res.text();
        stats.cases++;
        stats.methods.add(method);
        stats.paths.add(route.path);
        stats.byIdentity[identity].cases++;
        if (res.status >= 200 && res.status < 300) {
          stats.byIdentity[identity].ok++;
          if (route.declared && declaredIdentity(route) === identity) {
            stats.ownSuccess[identity] = (stats.ownSuccess[identity] ?? 0) + 1;
          }
        }
        // A case may end the credentials it carried: log in or get a token again before reuse.
        if (/logout|login\/check|smsverify|token\/revoke/.test(route.path) && identity !== 'anonymous') {
          stale.add(identity);
        }

        const what = `${identity}: ${method} ${url.pathname}${url.search.slice(0, 80)} -> ${res.status}: ${text.slice(0, 300)}`;
        if (res.status >= 500 && res.status !== 503) stats.unexpected5xx++;
        expect(res.status === 503 || res.status < 500, what).toBe(true);
        // One check for all the secrets (an expect per secret cost more than the search).
        const echoed = [...sent, ...everySecret].filter((secret) => text.includes(secret));
        expect(echoed, `${what} echoes a secret`).toEqual([]);
        // No stack trace, file path or SQL (a page's <select> is not SQL).
        expect(text, what).not.toMatch(
          /\n\s+at .+\(.*:\d+:\d+\)|node_modules\/|\bselect\s[^<>]{0,200}\bfrom\s|syntax error at/i,
        );
        const type = res.headers.get('content-type') ?? '';
        // The legacy JSON API answers envelopes: its declared endpoints (a raw one, e.g. a health
        // check, in its errors only, unless it declares its own error shape) and anything under
        // its prefixes. GraphQL, the docs and other
        // protocols (e.g. the Pusher channel authorization) answer in their own formats.
        const legacy = route.declared
          ? !isRaw(route.declared) || (res.status >= 400 && !('onError' in route.declared && route.declared.onError))
          : /^\/(agent|visitor|internal)\//.test(route.path);
        if (type.includes('json') && legacy && res.status !== 503 && method !== 'HEAD') {
          const envelope = JSON.parse(text);
          expect(typeof envelope.code, what).toBe('number');
          expect(typeof envelope.msg, what).toBe('string');
          expect('data' in envelope, what).toBe(true);
          if (res.status >= 400) expect(envelope.code, what).not.toBe(0);
        }
      }),
      { numRuns: FUZZ_RUNS, examples: wellFormedExamples() },
    );
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
    expect(stats.unexpected5xx).toBe(0);
    // The success paths were fuzzed too: each identity got past the rejection layer of its own endpoints.
    for (const who of ['agent', 'visitor', 'internal']) expect([who, stats.ownSuccess[who] ?? 0]).not.toEqual([who, 0]);
    expect(stats.byIdentity['ticket agent'].ok).toBeGreaterThan(0);
    expect(stats.methods.size).toBe(METHODS.length);
  }, 180_000);
});
