import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The front door (src/http/front.ts) answers `GET /healthz`, JSON `POST /graphql` and JSON
 * `POST /visitor/message/send` before express, through the same layers. The same request with a
 * query string does not take it and goes through express: both must answer alike — status, every
 * header but the per-request ones, and body — for successes and for every refusal on the way
 * (identity, cross-site, CORS, body cap, malformed body, GraphQL errors, input, budgets).
 */
const SHOP = 'https://shop.example';
/** A visitor's messages per 10 s here: low, so a budget refusal takes a few sends. */
const BURST = 3;
let t: TestApp;
let visitor: string;
let agent: string;
beforeAll(async () => {
  t = await startTestApp({ env: { ALLOWED_ORIGINS: SHOP, CHAT_MESSAGE_BURST: String(BURST) } });
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
async function both(path: string, init: RequestInit = {}, { warm = true } = {}) {
  // Twice each: the GraphQL direct path takes a query text only once yoga has validated it.
  if (warm) {
    await answer(path, init);
    await answer(`${path}?via=express`, init);
  }
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

  describe('POST /visitor/message/send', () => {
    const send = (token: string | undefined, body: unknown, headers: Record<string, string> = {}): RequestInit => ({
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...headers,
      },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    const fresh = async () => (await visitorToken(t.url)).token;

    it('a message: the same envelope (the stored message’s own id, seq and time aside)', async () => {
      const token = await fresh();
      await answer('/visitor/message/send', send(token, { client_msg_id: 'first', content: 'hello' }));
      const front = await answer('/visitor/message/send', send(token, { client_msg_id: 'via-f', content: 'hi' }));
      const express = await answer(
        '/visitor/message/send?via=express',
        send(token, { client_msg_id: 'via-e', content: 'hi' }),
      );
      const own = (a: typeof front) => {
        const body = JSON.parse(a.body);
        const { id, seq, created_at, client_msg_id, ...rest } = body.data;
        expect([typeof id, typeof seq, typeof created_at, typeof client_msg_id]).toEqual([
          'string',
          'number',
          'number',
          'string',
        ]);
        return { ...a, body: { ...body, data: rest } };
      };
      expect(front.status).toBe(200);
      expect(JSON.parse(front.body)).toMatchObject({
        code: 0,
        msg: 'ok',
        data: { client_msg_id: 'via-f', duplicate: false },
      });
      expect(own(front)).toEqual(own(express));
    });

    it.each([
      [
        'a retried send: the stored copy',
        async () => {
          const token = await fresh();
          await answer('/visitor/message/send', send(token, { client_msg_id: 'once', content: 'hello' }));
          return send(token, { client_msg_id: 'once', content: 'hello' });
        },
      ],
      ['no token: 1401', async () => send(undefined, { client_msg_id: 'x', content: 'hello' })],
      ['an unknown token: 1401', async () => send('not-a-token', { client_msg_id: 'x', content: 'hello' })],
      [
        'both identities: refused 400',
        async () => send(await fresh(), { client_msg_id: 'x', content: 'hi' }, { token: agent }),
      ],
      [
        'a cross-site origin: refused 403',
        async () => send(await fresh(), { client_msg_id: 'x', content: 'hi' }, { origin: 'https://evil.example' }),
      ],
      ['invalid input (no text): refused 400', async () => send(await fresh(), { client_msg_id: 'x', content: ' ' })],
      ['a malformed JSON body: refused 400', async () => send(await fresh(), '{"client_msg_id":')],
      [
        'a body over the cap: refused 413',
        async () => send(await fresh(), { client_msg_id: 'x', content: 'a'.repeat(70_000) }),
      ],
      [
        'past the visitor’s budget: refused 1429',
        async () => {
          const token = await fresh();
          for (let i = 0; i < BURST; i++)
            await answer('/visitor/message/send', send(token, { client_msg_id: `b${i}`, content: 'hi' }));
          return send(token, { client_msg_id: 'over', content: 'hi' });
        },
      ],
    ])('%s', async (name, init) => {
      // Not warmed: every send counts against the visitor's budget, retries too.
      const { front, express } = await both('/visitor/message/send', await init(), { warm: false });
      // The wait is counted down between the two answers (a second may pass): compared by presence.
      for (const a of [front, express])
        if (a.headers['retry-after']) {
          a.headers['retry-after'] = '…';
          a.headers['content-length'] = '…';
          a.body = a.body.replace(/retry in \d+ s/, 'retry in … s');
        }
      if (name.startsWith('a retried send')) expect(JSON.parse(front.body).data.duplicate).toBe(true);
      else expect(front.status).not.toBe(200);
      expect(front).toEqual(express);
    });
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

  it('a visitor’s message is counted under its route, through the front door as through express', async () => {
    const sends = (text: string) =>
      Number(
        /parley_http_request_duration_seconds_count\{method="POST",route="\/visitor\/message\/send",status_code="200"\} (\d+)/.exec(
          text,
        )?.[1] ?? 0,
      );
    const token = (await visitorToken(t.url)).token;
    const before = await (await fetch(`${t.url}/metrics`)).text();
    for (const [path, id] of [
      ['/visitor/message/send', 'm1'],
      ['/visitor/message/send?via=express', 'm2'],
    ])
      await fetch(`${t.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ client_msg_id: id, content: 'hello' }),
      });
    expect(sends(await (await fetch(`${t.url}/metrics`)).text()) - sends(before)).toBe(2);
  });
});
