import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The front door (src/http/front.ts) answers `GET /healthz` and JSON `POST /graphql` before
 * express, through the same layers. The same request with a query string does not take
 * it and goes through express: both must answer alike — status, every header but the per-request
 * ones, and body — for successes and for every refusal on the way (identity, cross-site, CORS,
 * body cap, malformed body, GraphQL errors).
 */
const SHOP = 'https://shop.example';
let t: TestApp;
let visitor: string;
let agent: string;
beforeAll(async () => {
  t = await startTestApp({ env: { ALLOWED_ORIGINS: SHOP } });
  visitor = (await visitorToken(t.url)).token;
  agent = (await agentSession(t.url, 'alice')).token;
});
afterAll(() => t.stop());

const VOLATILE = new Set(['date', 'x-request-id', 'connection', 'keep-alive']);

async function answer(path: string, init: RequestInit) {
  const res = await fetch(`${t.url}${path}`, init);
  // Per-request values (the date, the request id) compared by presence only.
  const headers = Object.fromEntries([...res.headers].map(([name, value]) => [name, VOLATILE.has(name) ? '…' : value]));
  return { status: res.status, headers, body: await res.text() };
}

/** The front door's answer and express's to the same request (a query string keeps it from the front door). */
async function both(path: string, init: RequestInit = {}) {
  // Twice each: the GraphQL direct path takes a query text only once yoga has validated it.
  await answer(path, init);
  await answer(`${path}?via=express`, init);
  return { front: await answer(path, init), express: await answer(`${path}?via=express`, init) };
}

const post = (query: string, headers: Record<string, string> = {}): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', ...headers },
  body: JSON.stringify({ query }),
});

describe('the front door answers as express does', () => {
  it('GET /healthz', async () => {
    const { front, express } = await both('/healthz');
    expect(front.status).toBe(200);
    expect(front.body).toBe('{"status":"ok"}');
    expect(front).toEqual(express);
  });

  it.each([
    [
      'a visitor bootstrap',
      () => post('{ visitorBootstrap { visitor { uid } } }', { authorization: `Bearer ${visitor}` }),
    ],
    ['an agent workbench (token header)', () => post('{ agentWorkbench { agent { agentId } } }', { token: agent })],
    ['no identity: UNAUTHENTICATED', () => post('{ visitorBootstrap { visitor { uid } } }')],
    ['a validation error', () => post('{ nope }', { authorization: `Bearer ${visitor}` })],
    [
      'both identities: refused 400',
      () => post('{ visitorBootstrap { visitor { uid } } }', { authorization: `Bearer ${visitor}`, token: agent }),
    ],
    ['a cross-site origin: refused 403', () => post('{ __typename }', { origin: 'https://evil.example' })],
    ['an allowed origin: CORS headers', () => post('{ __typename }', { origin: SHOP })],
    [
      'a malformed JSON body: refused 400',
      (): RequestInit => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query":' }),
    ],
    [
      'a body over the cap: refused 413',
      (): RequestInit => ({
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: `{ __typename }${' '.repeat(70_000)}` }),
      }),
    ],
  ])('POST /graphql: %s', async (_name, init) => {
    const { front, express } = await both('/graphql', init());
    expect(front).toEqual(express);
  });

  it('a request the front door answers is logged and counted under the same route as through express', async () => {
    const before = await (await fetch(`${t.url}/metrics`)).text();
    const count = (text: string) =>
      Number(
        /parley_http_request_duration_seconds_count\{method="GET",route="\/healthz",status_code="200"\} (\d+)/.exec(
          text,
        )?.[1] ?? 0,
      );
    await fetch(`${t.url}/healthz`);
    await fetch(`${t.url}/healthz?via=express`);
    expect(count(await (await fetch(`${t.url}/metrics`)).text()) - count(before)).toBe(2);
  });
});
