import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { visitorToken } from '../support/clients.js';
import { freshStores, startTestApp, type TestApp, type TestStores } from '../support/test-app.js';
import { rawSocket } from '../support/ws.js';

/**
 * src/subscriptions/ws.ts through a real gateway, by value: the init timeout's close code and
 * reason, queries and refused subscriptions answered on the operation (and their slot released),
 * the client document's errors with their codes, and introspection off in production only.
 */

const INIT_TIMEOUT_MS = 800;
/** Subscriptions one identity may hold: the operations below outnumber it, so a leaked slot refuses one. */
const IDENTITY_CAP = 3;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    env: {
      WS_CONNECTION_INIT_TIMEOUT_MS: String(INIT_TIMEOUT_MS),
      WS_MAX_SUBSCRIPTIONS_PER_IDENTITY: String(IDENTITY_CAP),
    },
  });
});
afterAll(() => t?.stop());

type Frame = { id?: string; type: string; payload?: unknown };

/** A raw socket acknowledged as a visitor of demo-appkey, with every frame it received. */
async function ackedSocket(app: TestApp) {
  const { token } = await visitorToken(app.url);
  const socket = rawSocket(app.wsUrl);
  const frames: Frame[] = [];
  const waiters: { test: (f: Frame) => boolean; resolve: (f: Frame) => void }[] = [];
  socket.ws.on('message', (raw) => {
    const frame = JSON.parse(String(raw)) as Frame;
    frames.push(frame);
    for (const w of [...waiters]) {
      if (w.test(frame)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(frame);
      }
    }
  });
  const frame = (test: (f: Frame) => boolean) =>
    new Promise<Frame>((resolve) => {
      const seen = frames.find(test);
      if (seen) resolve(seen);
      else waiters.push({ test, resolve });
    });
  await socket.opened;
  socket.ws.send(
    JSON.stringify({ type: 'connection_init', payload: { appkey: 'demo-appkey', authorization: `Bearer ${token}` } }),
  );
  await frame((f) => f.type === 'connection_ack');
  /** Sends `subscribe` with `id` and answers its first frame (next or error) and whether it completed. */
  const operation = async (id: string, payload: Record<string, unknown>) => {
    socket.ws.send(JSON.stringify({ id, type: 'subscribe', payload }));
    const first = await frame((f) => f.id === id && (f.type === 'next' || f.type === 'error'));
    if (first.type === 'next') await frame((f) => f.id === id && f.type === 'complete');
    return first;
  };
  return { ...socket, frames, frame, operation };
}

/** The gateway's Prometheus samples by series (name and labels as printed). */
async function metrics(app: TestApp): Promise<Map<string, number>> {
  const text = await (await fetch(`${app.url}/metrics`)).text();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^(\S+) (\S+)$/.exec(line);
    if (match?.[1] && !line.startsWith('#')) samples.set(match[1], Number(match[2]));
  }
  return samples;
}

describe('graphql-ws connection_init', () => {
  it('a socket that never sends connection_init is closed with 4408 and its reason', async () => {
    const { opened, closed } = rawSocket(t.wsUrl);
    await opened;
    expect(await closed).toEqual({ code: 4408, reason: 'Connection initialisation timeout' });
  });
});

describe('graphql-ws operations', () => {
  it('a query over the socket is executed and answered with its data', async () => {
    const s = await ackedSocket(t);
    const answer = await s.operation('q1', { query: '{ __typename }' });
    expect(answer).toEqual({ id: 'q1', type: 'next', payload: { data: { __typename: 'Query' } } });
    s.ws.close();
  });

  it('a syntax error is answered on the operation with GRAPHQL_VALIDATION_FAILED and the parser message', async () => {
    const s = await ackedSocket(t);
    const answer = await s.operation('p1', { query: 'subscription {' });
    expect(answer.type).toBe('error');
    expect(answer.payload).toEqual([
      { message: 'Syntax Error: Expected Name, found <EOF>.', extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } },
    ]);
    // The socket stays usable.
    expect(await s.operation('q2', { query: '{ __typename }' })).toMatchObject({ type: 'next' });
    s.ws.close();
  });

  it('a document that does not validate is answered with its validation errors', async () => {
    const s = await ackedSocket(t);
    const answer = await s.operation('v1', { query: 'subscription { channel(name: "x") { nope } }' });
    expect(answer.type).toBe('error');
    const errors = answer.payload as { message: string }[];
    expect(errors.map((e) => e.message)).toEqual(['Cannot query field "nope" on type "ChannelEvent".']);
    s.ws.close();
  });

  it('a subscription refused by its resolver is answered with the masked error and its code', async () => {
    const s = await ackedSocket(t);
    const answer = await s.operation('s1', { query: 'subscription { channel(name: "agent-nope") { id } }' });
    expect(answer.type).toBe('next');
    const { errors } = answer.payload as { errors: { message: string; extensions: { code: string } }[] };
    expect(errors).toHaveLength(1);
    expect(errors[0]?.extensions.code).toBe('FORBIDDEN');
    s.ws.close();
  });

  it('queries, refusals and document errors release their slot: more of them than the cap all get answers', async () => {
    const s = await ackedSocket(t);
    const answers: Frame[] = [];
    for (let i = 0; i < IDENTITY_CAP + 2; i++) {
      answers.push(await s.operation(`q${i}`, { query: '{ __typename }' }));
      answers.push(await s.operation(`r${i}`, { query: 'subscription { channel(name: "agent-nope") { id } }' }));
      answers.push(await s.operation(`e${i}`, { query: 'subscription {' }));
      answers.push(await s.operation(`v${i}`, { query: 'subscription { channel(name: "x") { nope } }' }));
    }
    expect(JSON.stringify(answers)).not.toContain('At most');
    expect(answers.filter((a) => a.id?.startsWith('q')).map((a) => a.payload)).toEqual(
      Array.from({ length: IDENTITY_CAP + 2 }, () => ({ data: { __typename: 'Query' } })),
    );
    s.ws.close();
  });

  it('a refused subscription counts one subscription operation and one error by its code', async () => {
    const s = await ackedSocket(t);
    const operations = 'parley_graphql_operations_total{operation_type="subscription",field="channel"}';
    const errors = 'parley_graphql_errors_total{operation_type="subscription",field="channel",code="FORBIDDEN"}';
    const before = await metrics(t);
    await s.operation('m1', { query: 'subscription { channel(name: "agent-nope") { id } }' });
    const after = await metrics(t);
    expect((after.get(operations) ?? 0) - (before.get(operations) ?? 0)).toBe(1);
    expect((after.get(errors) ?? 0) - (before.get(errors) ?? 0)).toBe(1);
    s.ws.close();
  });

  it('introspection is answered outside production', async () => {
    const s = await ackedSocket(t);
    const answer = await s.operation('i1', { query: '{ __schema { queryType { name } } }' });
    expect(answer).toEqual({
      id: 'i1',
      type: 'next',
      payload: { data: { __schema: { queryType: { name: 'Query' } } } },
    });
    s.ws.close();
  });
});

describe('graphql-ws in production', () => {
  let prod: TestApp;
  let stores: TestStores;
  beforeAll(async () => {
    stores = await freshStores();
    // A production gateway never loads the demo data: on PostgreSQL a development gateway seeds
    // the database first; the embedded database starts from the seeded template.
    if (stores.databaseUrl) {
      await (await startTestApp({ stores })).stop();
      prod = await startTestApp({ stores, config: { env: 'production', demoSeed: false } });
    } else {
      prod = await startTestApp({ stores, config: { env: 'production' } });
    }
  }, 120_000);
  afterAll(async () => {
    await prod?.stop();
    await stores?.drop();
  });

  it('introspection is refused by validation, and a plain query still answers', async () => {
    const s = await ackedSocket(prod);
    const answer = await s.operation('i1', { query: '{ __schema { queryType { name } } }' });
    expect(answer.type).toBe('error');
    const errors = answer.payload as { message: string }[];
    expect(errors.map((e) => e.message)).toEqual([
      'GraphQL introspection has been disabled, but the requested query contained the field "__schema".',
      'GraphQL introspection has been disabled, but the requested query contained the field "queryType".',
    ]);
    expect(await s.operation('q1', { query: '{ __typename }' })).toEqual({
      id: 'q1',
      type: 'next',
      payload: { data: { __typename: 'Query' } },
    });
    s.ws.close();
  });
});
