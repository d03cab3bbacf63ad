import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishEvent } from '../../src/resolvers/channels.js';
import { CSRF_HEADERS } from '../../src/schema/security.js';
import { HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { type ChannelSubscription, closeAllSockets, connectSocket, eventually } from '../support/ws.js';

// The GraphQL HTTP plugins at their edges, answers compared whole: the subscription refusal, the
// CSRF rule, error formatting, and the hold of a visitor's refusal. One gateway for the file, its
// refusal hold 1 s (an answer not held comes well under half of it, even beside a busy core) and its
// message burst small, so a refusal is cheap to reach.

const HOLD_MS = 1000;
const BURST = 3;
const REPLAYS = 1;
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    env: {
      VISITOR_REFUSAL_DELAY_MS: String(HOLD_MS),
      CHAT_MESSAGE_BURST: String(BURST),
      WS_HISTORY_REPLAYS_PER_MINUTE: String(REPLAYS),
    },
  });
});
afterAll(async () => {
  await closeAllSockets();
  await t.stop();
});

/** A POST to /graphql with exactly these headers and body; the answer's status and parsed body. */
async function post(body: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }) {
  const res = await new HttpClient(t.url).request('/graphql', { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

const SUBSCRIPTION_REFUSED = {
  status: 400,
  body: {
    errors: [
      {
        message:
          'Subscriptions are served over WebSocket only: graphql-ws (subprotocol graphql-transport-ws) at /graphql',
        extensions: { code: 'SUBSCRIPTION_OVER_HTTP' },
      },
    ],
  },
};

describe('graphql over HTTP: subscriptions are refused, queries beside them are not', () => {
  const both = 'query Q { __typename } subscription S { channel(name: "global-demo") { id } }';

  it('a subscription operation answers 400 SUBSCRIPTION_OVER_HTTP before it runs', async () => {
    expect(await post({ query: 'subscription { channel(name: "global-demo") { id } }' })).toEqual(SUBSCRIPTION_REFUSED);
    expect(await post({ query: both, operationName: 'S' })).toEqual(SUBSCRIPTION_REFUSED);
  });

  it('the query named beside a subscription runs; a query or mutation is untouched', async () => {
    expect(await post({ query: both, operationName: 'Q' })).toEqual({
      status: 200,
      body: { data: { __typename: 'Query' } },
    });
    expect(await post({ query: 'mutation { __typename }' })).toEqual({
      status: 200,
      body: { data: { __typename: 'Mutation' } },
    });
  });

  it('two operations without operationName: graphql-js’s own error, with BAD_USER_INPUT', async () => {
    expect(await post({ query: both })).toEqual({
      status: 200,
      body: {
        errors: [
          {
            message: 'Must provide operation name if query contains multiple operations.',
            extensions: { code: 'BAD_USER_INPUT' },
          },
        ],
      },
    });
  });
});

const CSRF_REFUSED = {
  status: 403,
  body: {
    errors: [
      {
        message: `Cross-site request refused: send the operation as JSON (Content-Type: application/json) or with one of the headers ${CSRF_HEADERS.join(', ')}; a GET without them may run a query only`,
        extensions: { code: 'CSRF_REFUSED' },
      },
    ],
  },
};

describe('graphql over HTTP: the CSRF rule', () => {
  it('a POST of a simple content type (with parameters too) is refused with 403 and the whole message', async () => {
    expect(CSRF_REFUSED.body.errors[0]?.message).toContain(
      'headers x-parley-csrf, apollo-require-preflight, x-apollo-operation-name, x-graphql-yoga-csrf;',
    );
    for (const type of ['text/plain;charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded']) {
      expect(await post({ query: '{ __typename }' }, { 'content-type': type }), type).toEqual(CSRF_REFUSED);
    }
  });

  it('a JSON type that merely mentions text/plain, or a simple type with a CSRF header, passes', async () => {
    const ok = { status: 200, body: { data: { __typename: 'Query' } } };
    expect(await post({ query: '{ __typename }' }, { 'content-type': 'application/json;text/plain' })).toEqual(ok);
    expect(
      await post({ query: '{ __typename }' }, { 'content-type': 'application/json', 'x-parley-csrf': '1' }),
    ).toEqual(ok);
  });

  it('a simple GET may run a named query beside a mutation, not the mutation', async () => {
    const client = new HttpClient(t.url);
    const get = async (query: string, operationName: string) => {
      const res = await client.request(`/graphql?query=${encodeURIComponent(query)}&operationName=${operationName}`, {
        headers: { accept: 'application/json' },
      });
      return { status: res.status, body: await res.json() };
    };
    const doc = 'query Q { __typename } mutation M { __typename }';
    expect(await get(doc, 'Q')).toEqual({ status: 200, body: { data: { __typename: 'Query' } } });
    expect(await get(doc, 'M')).toEqual(CSRF_REFUSED);
  });
});

describe('graphql over HTTP: errors', () => {
  it('a variable graphql-js cannot coerce keeps its message, with BAD_USER_INPUT', async () => {
    const { status, body } = await new HttpClient(t.url).graphql(
      'query ($b: Boolean!) { __typename @include(if: $b) }',
      { b: 'x' },
    );
    expect({ status, body }).toEqual({
      status: 200,
      body: {
        errors: [
          {
            message: 'Variable "$b" got invalid value "x"; Boolean cannot represent a non boolean value: "x"',
            locations: [{ line: 1, column: 8 }],
            extensions: { code: 'BAD_USER_INPUT' },
          },
        ],
      },
    });
  });

  it('a domain error keeps its message and code and is not logged as a resolver failure', async () => {
    const before = t.logs.length;
    const { body } = await new HttpClient(t.url).graphql('{ currentAgent { agentId } }');
    expect(body).toEqual({
      data: null,
      errors: [{ message: '请先登录', path: ['currentAgent'], extensions: { code: 'UNAUTHENTICATED' } }],
    });
    expect(t.logs.slice(before).filter((line) => line.msg === 'graphql resolver failed')).toEqual([]);
  });
});

describe('graphql over HTTP: a visitor’s refusal is held, other answers are not', () => {
  it('a visitor’s sendMessage past its budget: RATE_LIMITED with retryAfter, answered no sooner than the hold', async () => {
    const { token } = await visitorToken(t.url);
    const client = new HttpClient(t.url);
    const send = (id: string) =>
      client.graphql(
        'mutation ($id: String!) { sendMessage(clientMsgId: $id, content: "hello") { __typename } }',
        { id },
        { authorization: `Bearer ${token}` },
      );
    for (let i = 0; i < BURST; i++) expect((await send(`m-${i}`)).body.errors).toBeUndefined();
    const sentAt = performance.now();
    const { status, body } = await send('m-over');
    const elapsed = performance.now() - sentAt;
    const retryAfter = body.errors?.[0]?.extensions?.retryAfter;
    expect(retryAfter).toBeGreaterThan(0);
    expect({ status, errors: body.errors?.map((e: { extensions: unknown }) => e.extensions) }).toEqual({
      status: 200,
      errors: [{ code: 'RATE_LIMITED', retryAfter }],
    });
    // Timers never fire early: a lower bound whatever the load (the hold is at most Retry-After).
    expect(elapsed).toBeGreaterThanOrEqual(Math.min(HOLD_MS, retryAfter * 1000) - 5);
  });

  it('a visitor’s refusal other than RATE_LIMITED is not held', async () => {
    const { token } = await visitorToken(t.url);
    const visitor = new HttpClient(t.url);
    const timed = async <T>(fn: () => Promise<T>) => {
      const at = performance.now();
      const value = await fn();
      return { value, ms: performance.now() - at };
    };
    const refused = await timed(() =>
      visitor.graphql('{ currentAgent { agentId } }', {}, { authorization: `Bearer ${token}` }),
    );
    expect(refused.value.body.errors?.[0]?.extensions).toEqual({ code: 'UNAUTHENTICATED' });
    expect(refused.ms).toBeLessThan(HOLD_MS / 2);
  });
});

/** A fresh visitor: its token, its channel and its acknowledged graphql-ws socket. */
async function visitorSocket() {
  const { token } = await visitorToken(t.url);
  const { body } = await new HttpClient(t.url).json<{ visitor: { channel: string } }>('/visitor/data/get', {
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
  });
  const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', authorization: `Bearer ${token}` });
  await socket.acked;
  return { token, channel: body.data.visitor.channel, socket };
}

/**
 * 'refused' when the subscription ends with errors, else 'live' once it started: its `subscribed`
 * position, or (with `since`, which has no such marker) the first event it replays.
 */
async function outcome(sub: ChannelSubscription, since?: string) {
  const started = since
    ? sub.until((events) => events.length > 0, 'the replayed event', 5000)
    : eventually(() => sub.cursor, 'the subscribed position', 5000);
  return Promise.race([sub.ended.then((how) => (sub.errors ? 'refused' : how)), started.then(() => 'live')]);
}

describe('graphql over a socket', () => {
  it('only a subscription with since is charged to the replay budget', async () => {
    const { socket, channel } = await visitorSocket();
    // More subscriptions without since than the budget: none is charged.
    const first = socket.channel(channel);
    expect(await outcome(first)).toBe('live');
    const since = first.cursor as string;
    // One event after `since`: a subscription with it that is let through replays it.
    await publishEvent(t.app.deps, { channel, event: 'test.marker', data: {} });
    for (let i = 0; i < REPLAYS + 1; i++) expect(await outcome(socket.channel(channel))).toBe('live');
    for (let i = 0; i < REPLAYS; i++) expect(await outcome(socket.channel(channel, since), since)).toBe('live');
    const refused = socket.channel(channel, since);
    expect(await outcome(refused, since)).toBe('refused');
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED' });
    expect(refused.errors?.[0]?.message).toContain('WS_HISTORY_REPLAYS_PER_MINUTE');
  });

  it('a visitor’s RATE_LIMITED over a socket is not held', async () => {
    const { socket } = await visitorSocket();
    const send = (id: string) =>
      new Promise<readonly { extensions?: Record<string, unknown> }[] | undefined>((resolve, reject) => {
        let errors: readonly { extensions?: Record<string, unknown> }[] | undefined;
        socket.client.subscribe(
          {
            query: 'mutation ($id: String!) { sendMessage(clientMsgId: $id, content: "hello") { __typename } }',
            variables: { id },
          },
          {
            next: (result) => {
              errors = result.errors as typeof errors;
            },
            error: (error) => (Array.isArray(error) ? resolve(error) : reject(error)),
            complete: () => resolve(errors),
          },
        );
      });
    for (let i = 0; i < BURST; i++) expect(await send(`s-${i}`)).toBeUndefined();
    const sentAt = performance.now();
    const errors = await send('s-over');
    const elapsed = performance.now() - sentAt;
    expect(errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');
    expect(elapsed).toBeLessThan(HOLD_MS / 2);
  });
});
