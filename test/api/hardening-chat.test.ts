import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Issue 27 over the real gateway: the chat's budgets answered as documented (REST 1429 with
 * `Retry-After`, GraphQL `RATE_LIMITED` with `retryAfter`), and crafted history cursors refused
 * as bad input (400 / `BAD_USER_INPUT`) with no error logged. The rules themselves are tested at
 * the domain level (test/domain/chat-abuse.test.ts).
 */

const BURST = 3;
const PUSHER_AUTHS = 4;
const TYPING = 3;
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    env: {
      CHAT_MESSAGE_BURST: String(BURST),
      PUSHER_AUTH_PER_MINUTE: String(PUSHER_AUTHS),
      CHAT_TYPING_PER_MINUTE: String(TYPING),
    },
  });
});
afterAll(async () => {
  await t.stop();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const cursor = (values: unknown) => Buffer.from(JSON.stringify(values)).toString('base64url');
const errorLines = () => t.logs.filter((l) => Number(l.level) >= 50);

describe('message budgets (row 2)', () => {
  it('REST: past the burst, 1429 / HTTP 429 with Retry-After, and the message is not stored', async () => {
    const v = await visitorToken(t.url);
    const client = new HttpClient(t.url);
    const send = (id: string) =>
      client.json('/visitor/message/send', {
        method: 'POST',
        form: { client_msg_id: id, content: `hello ${id}` },
        headers: bearer(v.token),
      });
    for (let i = 0; i < BURST; i++) expect((await send(`r${i}`)).body.code).toBe(0);
    const refused = await send('over');
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ code: 1429, data: [] });
    const wait = Number(refused.headers.get('retry-after'));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(10);
    const history = await client.json('/visitor/message/list', { headers: bearer(v.token) });
    expect(history.body.data.messages.map((m: { content: string }) => m.content)).not.toContain('hello over');
  });

  it('GraphQL: the same budget, RATE_LIMITED with retryAfter', async () => {
    const v = await visitorToken(t.url);
    const client = new HttpClient(t.url);
    const send = (id: string) =>
      client.graphql(
        'mutation($id: String!) { sendMessage(clientMsgId: $id, content: "hi") { duplicate } }',
        { id },
        bearer(v.token),
      );
    for (let i = 0; i < BURST; i++) expect((await send(`g${i}`)).body.errors).toBeUndefined();
    const refused = await send('over');
    expect(refused.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED' });
    expect(refused.body.errors?.[0]?.extensions.retryAfter).toBeGreaterThanOrEqual(1);
  });
});

describe('typing notices (rows 2 and 3)', () => {
  it('REST: past the visitor’s budget, 1429 / HTTP 429 with Retry-After', async () => {
    const v = await visitorToken(t.url);
    const client = new HttpClient(t.url);
    const typing = () =>
      client.json('/visitor/chat/typing', { method: 'POST', json: { typing: true }, headers: bearer(v.token) });
    for (let i = 0; i < TYPING; i++) expect((await typing()).body.code).toBe(0);
    const refused = await typing();
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ code: 1429 });
    const wait = Number(refused.headers.get('retry-after'));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(60);
  });

  it('GraphQL: the same budget, RATE_LIMITED with retryAfter', async () => {
    const v = await visitorToken(t.url);
    const client = new HttpClient(t.url);
    const typing = () => client.graphql('mutation { setTyping(typing: false) { published } }', {}, bearer(v.token));
    for (let i = 0; i < TYPING; i++) expect((await typing()).body.errors).toBeUndefined();
    const refused = await typing();
    expect(refused.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED' });
    expect(refused.body.errors?.[0]?.extensions.retryAfter).toBeGreaterThanOrEqual(1);
  });
});

describe('crafted history cursors (row 7)', () => {
  const crafted = [
    cursor(['c', 1e308]),
    cursor(['c', 2 ** 40]),
    cursor([]),
    cursor(['notadate', 'x']),
    cursor([1e300, 'x']),
  ];

  it('REST: the visitor’s before and the agent’s queue after are 1000 / HTTP 400, nothing logged as an error', async () => {
    const v = await visitorToken(t.url);
    const client = new HttpClient(t.url);
    const alice = await agentSession(t.url, 'alice');
    const before = errorLines().length;
    for (const value of crafted) {
      const page = await client.json(`/visitor/message/list?before=${value}`, { headers: bearer(v.token) });
      expect([value, page.status, page.body.code]).toEqual([value, 400, 1000]);
      const queue = await alice.client.json(`/agent/chat/list?scope=queue&after=${value}`, {
        headers: { token: alice.token },
      });
      expect([value, queue.status, queue.body.code]).toEqual([value, 400, 1000]);
    }
    expect(errorLines().slice(before)).toEqual([]);
  });

  it('GraphQL: messages and conversations answer BAD_USER_INPUT', async () => {
    const v = await visitorToken(t.url);
    const client = new HttpClient(t.url);
    const alice = await agentSession(t.url, 'alice');
    const before = errorLines().length;
    for (const value of crafted) {
      const page = await client.graphql(
        'query($c: String) { messages(before: $c) { hasMore } }',
        { c: value },
        bearer(v.token),
      );
      expect(page.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
      const list = await alice.client.graphql(
        'query($c: String) { conversations(scope: queue, after: $c) { pageInfo { hasNextPage } } }',
        { c: value },
        { token: alice.token },
      );
      expect(list.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    }
    expect(errorLines().slice(before)).toEqual([]);
  });
});

describe('POST /pusher/auth (row 9)', () => {
  const sha256 = (s: string, encoding: 'hex' | 'base64url') => createHash('sha256').update(s).digest(encoding);

  it('keeps the grant’s identity as the token’s SHA-256, never the token; budgeted per identity and address', async () => {
    const v = await visitorToken(t.url);
    const client = new HttpClient(t.url);
    const boot = await client.json('/visitor/data/get', { headers: bearer(v.token) });
    const channel = `private-${boot.body.data.visitor.channel}`;
    const authorize = (socketId: string) =>
      fetch(`${t.url}/pusher/auth`, {
        method: 'POST',
        headers: { ...bearer(v.token), 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ socket_id: socketId, channel_name: channel }).toString(),
      });
    const first = await authorize('123.456');
    expect(first.status).toBe(200);
    const stored = await t.app.deps.kv.get(`pusher-grant:123.456:${sha256(channel, 'base64url')}`);
    expect(stored).not.toBeNull();
    expect(stored).not.toContain(v.token);
    expect(JSON.parse(stored as string)).toEqual({ kind: 'visitor', tokenHash: sha256(v.token, 'hex') });
    for (let i = 1; i < PUSHER_AUTHS; i++) expect((await authorize(`123.${457 + i}`)).status).toBe(200);
    const refused = await authorize('999.1');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(refused.headers.get('cache-control')).toBe('no-store');
    expect(await refused.json()).toMatchObject({ code: 'RATE_LIMITED' });
    expect(await t.app.deps.kv.get(`pusher-grant:999.1:${sha256(channel, 'base64url')}`)).toBeNull();
  });
});
