import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());

const FORM = 'application/x-www-form-urlencoded';
const JSON_TYPE = 'application/json';
const long = 'x'.repeat(10_000);
const overCap = 'a'.repeat(65 * 1024);
const login = (fields: string) => `${fields}&password=p&captcha=test1`;

interface Case {
  name: string;
  method?: 'GET' | 'POST';
  path: string;
  type?: string;
  body?: string;
  headers?: Record<string, string>;
  status: number;
  /** The envelope's msg must match: it names the problem. */
  msg: RegExp;
}

/** Each case: the request and the clear envelope it must get (never a 5xx, never a stack trace). */
const restCases: Case[] = [
  { name: 'token[]=a&token[]=b in the query', path: '/agent/data/get?token[]=a&token[]=b', status: 400, msg: /token/ },
  { name: 'token=a&token=b in the query', path: '/agent/data/get?token=a&token=b', status: 400, msg: /token/ },
  {
    name: 'username[]=x in a login form',
    method: 'POST',
    path: '/agent/login/check',
    type: FORM,
    body: login('username[]=x'),
    status: 400,
    msg: /username/,
  },
  {
    name: 'a repeated username in a login form',
    method: 'POST',
    path: '/agent/login/check',
    type: FORM,
    body: login('username=a&username=b'),
    status: 400,
    msg: /username must be a single string/,
  },
  {
    name: 'an array username in a JSON login',
    method: 'POST',
    path: '/agent/login/check',
    type: JSON_TYPE,
    body: '{"username":["x"],"password":"p","captcha":"test1"}',
    status: 400,
    msg: /username must be a single string/,
  },
  {
    name: 'a number as username in a JSON login',
    method: 'POST',
    path: '/agent/login/check',
    type: JSON_TYPE,
    body: '{"username":7,"password":"p","captcha":"test1"}',
    status: 400,
    msg: /username must be a single string/,
  },
  {
    name: 'an empty username',
    method: 'POST',
    path: '/agent/login/check',
    type: FORM,
    body: login('username='),
    status: 400,
    msg: /username is required/,
  },
  {
    name: 'a blank captcha',
    method: 'POST',
    path: '/agent/login/check',
    type: FORM,
    body: 'username=alice&password=p&captcha=%20%20',
    status: 400,
    msg: /captcha is required/,
  },
  {
    name: 'a NUL byte in a form field',
    method: 'POST',
    path: '/agent/login/check',
    type: FORM,
    body: login('username=al%00ice'),
    status: 400,
    msg: /username must not contain control characters/,
  },
  {
    name: 'a NUL byte in a JSON field',
    method: 'POST',
    path: '/visitor/token',
    type: JSON_TYPE,
    body: '{"appkey":"demo-appkey","nickname":"a\\u0000b"}',
    status: 400,
    msg: /nickname must not contain control characters/,
  },
  {
    name: 'a lone surrogate in raw JSON text',
    method: 'POST',
    path: '/agent/login/check',
    type: JSON_TYPE,
    body: '{"username":"\\ud800","password":"p","captcha":"test1"}',
    status: 400,
    msg: /username must be valid Unicode text/,
  },
  {
    name: 'a lone low surrogate in raw JSON text',
    method: 'POST',
    path: '/visitor/token',
    type: JSON_TYPE,
    body: '{"appkey":"demo-appkey","nickname":"a\\udc00"}',
    status: 400,
    msg: /nickname must be valid Unicode text/,
  },
  {
    name: 'a 10,000-character username',
    method: 'POST',
    path: '/agent/login/check',
    type: FORM,
    body: login(`username=${long}`),
    status: 400,
    msg: /username must be at most 64 characters/,
  },
  {
    name: 'a 10,000-character appkey',
    method: 'POST',
    path: '/visitor/token',
    type: JSON_TYPE,
    body: JSON.stringify({ appkey: long }),
    status: 400,
    msg: /appkey must be at most 128 characters/,
  },
  {
    name: 'an array lang in JSON',
    method: 'POST',
    path: '/visitor/token',
    type: JSON_TYPE,
    body: '{"appkey":"demo-appkey","lang":["en"]}',
    status: 400,
    msg: /lang must be a single string/,
  },
  {
    name: 'a JSON body over 64 KB',
    method: 'POST',
    path: '/visitor/token',
    type: JSON_TYPE,
    body: JSON.stringify({ appkey: overCap }),
    status: 413,
    msg: /larger than 64kb/,
  },
  {
    name: 'a form body over 64 KB',
    method: 'POST',
    path: '/agent/login/check',
    type: FORM,
    body: login(`username=${overCap}`),
    status: 413,
    msg: /larger than 64kb/,
  },
  {
    name: 'a GraphQL body over 64 KB',
    method: 'POST',
    path: '/graphql',
    type: JSON_TYPE,
    body: JSON.stringify({ query: `{ ${overCap} }` }),
    status: 413,
    msg: /larger than 64kb/,
  },
  {
    name: 'malformed JSON',
    method: 'POST',
    path: '/visitor/token',
    type: JSON_TYPE,
    body: '{"appkey": "demo-appkey",',
    status: 400,
    msg: /Malformed request body/,
  },
  {
    name: 'a JSON body that is not an object',
    method: 'POST',
    path: '/visitor/token',
    type: JSON_TYPE,
    body: '"demo-appkey"',
    status: 400,
    msg: /Malformed request body|appkey/,
  },
  {
    name: 'malformed JSON to the internal publish API',
    method: 'POST',
    path: '/internal/events',
    type: JSON_TYPE,
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
    body: '{"channel":',
    status: 400,
    msg: /Malformed request body/,
  },
  {
    name: 'a number as channel to the internal publish API',
    method: 'POST',
    path: '/internal/events',
    type: JSON_TYPE,
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
    body: '{"channel":1,"event":"x","data":{}}',
    status: 400,
    msg: /channel must be a single string/,
  },
  {
    name: 'an unsupported charset',
    method: 'POST',
    path: '/visitor/token',
    type: 'application/json; charset=latin1',
    body: '{}',
    status: 400,
    msg: /Malformed request body|charset/,
  },
];

/** Asserts a clear error envelope: no 5xx, a non-zero code, a msg naming the problem, no stack trace. */
function expectClearEnvelope(status: number, text: string, c: { status: number; msg: RegExp }) {
  expect(status).toBeLessThan(500);
  expect(text).not.toMatch(/\n\s+at |node_modules|\.ts:\d+/);
  const body = JSON.parse(text) as { code: number; msg: string; data: unknown };
  expect(body.code).not.toBe(0);
  expect(typeof body.msg).toBe('string');
  expect(body.msg).toMatch(c.msg);
  expect(status).toBe(c.status);
}

describe('input edge cases over REST answer a clear envelope', () => {
  it.each(restCases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const res = await fetch(t.url + c.path, {
      method: c.method ?? 'GET',
      headers: { ...(c.type ? { 'content-type': c.type } : {}), accept: 'application/json', ...c.headers },
      body: c.body,
    });
    expectClearEnvelope(res.status, await res.text(), c);
  });
});

interface GraphQLCase {
  name: string;
  /** The raw JSON text of the request body. */
  body: string;
  codes: string[];
  msg: RegExp;
}

const issue = (args: string) => `mutation { issueVisitorToken(${args}) { token } }`;
const withVars = (query: string, variables: string) => `{"query":${JSON.stringify(query)},"variables":${variables}}`;
const VARS_QUERY = 'mutation($a: String!, $n: String) { issueVisitorToken(appkey: $a, nickname: $n) { token } }';

const graphqlCases: GraphQLCase[] = [
  {
    name: 'a number where a String is expected',
    body: JSON.stringify({ query: issue('appkey: 1') }),
    codes: ['GRAPHQL_VALIDATION_FAILED', 'BAD_USER_INPUT'],
    msg: /String/,
  },
  {
    name: 'a list where a String is expected',
    body: JSON.stringify({ query: issue('appkey: ["a", "b"]') }),
    codes: ['GRAPHQL_VALIDATION_FAILED', 'BAD_USER_INPUT'],
    msg: /String/,
  },
  {
    name: 'a missing required argument',
    body: JSON.stringify({ query: issue('nickname: "x"') }),
    codes: ['GRAPHQL_VALIDATION_FAILED', 'BAD_USER_INPUT'],
    msg: /appkey/,
  },
  {
    name: 'an unknown argument',
    body: JSON.stringify({ query: issue('appkey: "demo-appkey", bid: 2') }),
    codes: ['GRAPHQL_VALIDATION_FAILED', 'BAD_USER_INPUT'],
    msg: /bid/,
  },
  {
    name: 'a list variable where a String is expected',
    body: withVars(VARS_QUERY, '{"a":["demo-appkey","x"]}'),
    codes: ['BAD_USER_INPUT'],
    msg: /\$a/,
  },
  {
    name: 'an object variable where a String is expected',
    body: withVars(VARS_QUERY, '{"a":{"$ne":""}}'),
    codes: ['BAD_USER_INPUT'],
    msg: /\$a/,
  },
  {
    name: 'a null for a non-null variable',
    body: withVars(VARS_QUERY, '{"a":null}'),
    codes: ['BAD_USER_INPUT'],
    msg: /\$a/,
  },
  {
    name: 'an empty appkey',
    body: withVars(VARS_QUERY, '{"a":""}'),
    codes: ['BAD_USER_INPUT'],
    msg: /appkey is required/,
  },
  {
    name: 'a NUL byte in a variable',
    body: withVars(VARS_QUERY, '{"a":"demo-appkey","n":"a\\u0000b"}'),
    codes: ['BAD_USER_INPUT'],
    msg: /nickname must not contain control characters/,
  },
  {
    name: 'a lone surrogate in a variable (raw JSON text)',
    body: withVars(VARS_QUERY, '{"a":"demo-appkey","n":"\\ud800"}'),
    codes: ['BAD_USER_INPUT'],
    msg: /nickname must be valid Unicode text/,
  },
  {
    name: 'a 10,000-character variable',
    body: withVars(VARS_QUERY, JSON.stringify({ a: 'demo-appkey', n: long })),
    codes: ['BAD_USER_INPUT'],
    msg: /nickname must be at most 64 characters/,
  },
  {
    name: 'a wrong type in a login argument',
    body: JSON.stringify({ query: 'mutation { login(username: 1, password: "p", captcha: "c") { token } }' }),
    codes: ['GRAPHQL_VALIDATION_FAILED', 'BAD_USER_INPUT'],
    msg: /String/,
  },
  {
    name: 'a syntax error',
    body: JSON.stringify({ query: 'mutation { issueVisitorToken(' }),
    codes: ['GRAPHQL_PARSE_FAILED', 'GRAPHQL_VALIDATION_FAILED', 'BAD_USER_INPUT'],
    msg: /Syntax Error/,
  },
  {
    name: 'a query that is not a string',
    body: '{"query":["{ __typename }"]}',
    codes: ['BAD_USER_INPUT', 'BAD_REQUEST', 'GRAPHQL_VALIDATION_FAILED'],
    msg: /query/i,
  },
  {
    name: 'variables that are not an object',
    body: withVars(VARS_QUERY, '"demo-appkey"'),
    codes: ['BAD_USER_INPUT', 'BAD_REQUEST', 'GRAPHQL_VALIDATION_FAILED'],
    msg: /variables/i,
  },
];

// Known gap (src/schema/yoga.ts, not owned here): toGraphQLError masks graphql-js's variable
// coercion errors (their originalError is the scalar's GraphQLError) as INTERNAL_SERVER_ERROR
// "Internal error" and logs them as resolver failures; a null for a non-null variable passes
// with no extensions.code at all. Both should answer BAD_USER_INPUT with graphql-js's message.
async function checkGraphQLCase(c: GraphQLCase) {
  const res = await fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json' },
    body: c.body,
  });
  const text = await res.text();
  expect(res.status).toBeLessThan(500);
  expect(text).not.toMatch(/\n\s+at |node_modules|\.ts:\d+|"stack"/);
  const body = JSON.parse(text) as { data?: unknown; errors?: { message: string; extensions?: { code?: string } }[] };
  const error = body.errors?.[0];
  expect(error, text).toBeDefined();
  expect(c.codes, text).toContain(error?.extensions?.code);
  expect(error?.message).toMatch(c.msg);
  expect(body.data ?? null).toBeNull();
}

describe('input edge cases over GraphQL answer a typed error', () => {
  for (const c of graphqlCases) it(c.name, () => checkGraphQLCase(c));
});
