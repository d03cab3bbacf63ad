import { type ExecutionArgs, GraphQLNonNull, GraphQLObjectType, GraphQLSchema, GraphQLString, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import type { Deps } from '../../src/deps.js';
import { DomainError } from '../../src/errors.js';
import type { ChannelEvent } from '../../src/stores/bus.js';
import type { ChannelSubscription, Fanout, FanoutSocket } from '../../src/subscriptions/fanout.js';
import { documentFormatKeys, graphqlFormat, OperationHandle } from '../../src/subscriptions/ws-operation.js';

/**
 * src/subscriptions/ws-operation.ts driven directly: the format keys by value, the built and the
 * executed payload of a format, and an OperationHandle's ends on a recording socket and fan-out.
 */

const logged: unknown[] = [];
const deps = {
  log: { error: (...args: unknown[]) => logged.push(args), warn: () => {}, info: () => {}, debug: () => {} },
} as unknown as Deps;

const event = {
  id: '1700000000000-0',
  channel: 'visitor-abc',
  event: 'message.created',
  data: { text: 'hi' },
  at: '2026-01-01T00:00:00.000Z',
} as unknown as ChannelEvent;

/** A schema whose `channel` resolver counts its runs, with a computed field and a failing one. */
function testSchema() {
  const runs = { count: 0 };
  const ChannelEventType = new GraphQLObjectType({
    name: 'ChannelEvent',
    fields: {
      channel: { type: new GraphQLNonNull(GraphQLString) },
      event: { type: new GraphQLNonNull(GraphQLString) },
      shout: { type: GraphQLString, resolve: (e: ChannelEvent) => e.event.toUpperCase() },
      refused: {
        type: GraphQLString,
        resolve: () => {
          throw new DomainError('FORBIDDEN', 'Not your channel');
        },
      },
    },
  });
  const schema = new GraphQLSchema({
    query: new GraphQLObjectType({ name: 'Query', fields: { ok: { type: GraphQLString } } }),
    subscription: new GraphQLObjectType({
      name: 'Subscription',
      fields: {
        channel: {
          type: ChannelEventType,
          args: { name: { type: GraphQLString } },
          resolve: (root: ChannelEvent) => {
            runs.count++;
            return root;
          },
        },
      },
    }),
  });
  return { schema, runs };
}

const args = (query: string, rest: Partial<ExecutionArgs> = {}): ExecutionArgs =>
  ({ schema: testSchema().schema, document: parse(query), ...rest }) as ExecutionArgs;

describe('documentFormatKeys', () => {
  it('numbers documents from 1, with an empty operation name and {} variables when absent', () => {
    const key = documentFormatKeys();
    const first = args('subscription { channel { event } }');
    const second = args('subscription { channel { channel } }');
    expect(key(first)).toBe('graphql:1::{}');
    expect(key(second)).toBe('graphql:2::{}');
    // The same document keeps its number.
    expect(key(first)).toBe('graphql:1::{}');
    expect(key({ ...first })).toBe('graphql:1::{}');
  });

  it('keys the operation name and the variables, so two operations or variables never share a key', () => {
    const key = documentFormatKeys();
    const doc = parse('subscription A { channel(name: "x") { event } } subscription B { channel { event } }');
    const base = { schema: testSchema().schema, document: doc } as ExecutionArgs;
    expect(key({ ...base, operationName: 'A' })).toBe('graphql:1:A:{}');
    expect(key({ ...base, operationName: 'B' })).toBe('graphql:1:B:{}');
    expect(key({ ...base, operationName: 'A', variableValues: { n: 'x' } })).toBe('graphql:1:A:{"n":"x"}');
    expect(key({ ...base, operationName: 'A', variableValues: { n: 'y' } })).toBe('graphql:1:A:{"n":"y"}');
    expect(key({ ...base, operationName: null })).toBe('graphql:1::{}');
  });
});

describe('graphqlFormat', () => {
  it('builds a plain selection without executing it', () => {
    const { schema, runs } = testSchema();
    const format = graphqlFormat(
      'k1',
      { schema, document: parse('subscription { channel { channel event } }') } as ExecutionArgs,
      deps,
    );
    expect(format.key).toBe('k1');
    expect(format.payload(event)).toBe('{"data":{"channel":{"channel":"visitor-abc","event":"message.created"}}}');
    expect(runs.count).toBe(0);
  });

  it('executes a selection it cannot build', () => {
    const { schema, runs } = testSchema();
    const format = graphqlFormat(
      'k2',
      { schema, document: parse('subscription { channel { event shout } }') } as ExecutionArgs,
      deps,
    );
    expect(format.payload(event)).toBe('{"data":{"channel":{"event":"message.created","shout":"MESSAGE.CREATED"}}}');
    expect(runs.count).toBe(1);
  });

  it('executes with the operation name and variables, and masks a resolver error to its code', () => {
    const { schema } = testSchema();
    const document = parse(
      'subscription Other { channel { channel } } subscription Mine($n: String) { channel(name: $n) { event refused } }',
    );
    const format = graphqlFormat(
      'k3',
      { schema, document, operationName: 'Mine', variableValues: { n: 'x' } } as ExecutionArgs,
      deps,
    );
    const payload = JSON.parse(format.payload(event) as string);
    expect(payload.data).toEqual({ channel: { event: 'message.created', refused: null } });
    expect(payload.errors).toEqual([
      {
        message: 'Not your channel',
        path: ['channel', 'refused'],
        extensions: { code: 'FORBIDDEN' },
      },
    ]);
  });
});

/** A socket recording its frames; `readyState` settable. */
function recorder(readyState = 1) {
  const frames: string[] = [];
  const socket = { OPEN: 1, readyState, send: (frame: string) => frames.push(frame) };
  const to = { socket: socket as unknown as WebSocket } as unknown as FanoutSocket;
  return { to, frames };
}

function fakeFanout() {
  const ends: unknown[] = [];
  const fanout = { end: (subscription: unknown) => ends.push(subscription) } as unknown as Fanout;
  return { fanout, ends };
}

/** Whether `promise` is already settled (it wins over a macrotask), and with what. */
async function settled<T>(promise: Promise<T>): Promise<T | 'pending'> {
  return Promise.race([promise, new Promise<'pending'>((resolve) => setImmediate(() => resolve('pending')))]);
}

describe('OperationHandle', () => {
  it('is its own iterator; next waits until it ends, then answers done at once', async () => {
    const { to } = recorder();
    const { fanout } = fakeFanout();
    const handle = new OperationHandle(to, 'op1', undefined, deps, fanout);
    expect(handle[Symbol.asyncIterator]()).toBe(handle);
    const pending = handle.next();
    expect(await settled(pending)).toBe('pending');
    handle.ended();
    expect(await settled(pending)).toEqual({ done: true, value: undefined });
    expect(await settled(handle.next())).toEqual({ done: true, value: undefined });
  });

  it('ends without a waiting next and without a release', () => {
    const { to, frames } = recorder();
    const handle = new OperationHandle(to, 'op1', undefined, deps, fakeFanout().fanout);
    expect(() => handle.ended()).not.toThrow();
    expect(frames).toEqual([]);
  });

  it('releases its slot once, however often it ends', () => {
    const { to } = recorder();
    const releases = { count: 0 };
    const handle = new OperationHandle(to, 'op1', () => releases.count++, deps, fakeFanout().fanout);
    handle.ended();
    handle.ended();
    handle.ended(new Error('late'));
    expect(releases.count).toBe(1);
  });

  it('return ends a subscription through the fan-out, not by itself', async () => {
    const { to } = recorder();
    const { fanout, ends } = fakeFanout();
    const releases = { count: 0 };
    const handle = new OperationHandle(to, 'op1', () => releases.count++, deps, fanout);
    const subscription = { channel: 'visitor-abc' } as unknown as ChannelSubscription;
    handle.subscription = subscription;
    expect(await handle.return()).toEqual({ done: true, value: undefined });
    expect(ends).toEqual([subscription]);
    expect(releases.count).toBe(0);
  });

  it('return without a subscription ends the handle itself; throw does the same', async () => {
    for (const end of ['return', 'throw'] as const) {
      const { to } = recorder();
      const { fanout, ends } = fakeFanout();
      const releases = { count: 0 };
      const handle = new OperationHandle(to, 'op1', () => releases.count++, deps, fanout);
      const pending = handle.next();
      expect(await handle[end]()).toEqual({ done: true, value: undefined });
      expect(ends).toEqual([]);
      expect(releases.count).toBe(1);
      expect(await settled(pending)).toEqual({ done: true, value: undefined });
    }
  });

  it('an error end sends one masked next frame with the id to an open socket', async () => {
    const { to, frames } = recorder();
    const handle = new OperationHandle(to, 'op7', undefined, deps, fakeFanout().fanout);
    const pending = handle.next();
    handle.ended(new DomainError('FORBIDDEN', 'Not your channel'));
    expect(frames.map((f) => JSON.parse(f))).toEqual([
      {
        id: 'op7',
        type: 'next',
        payload: { errors: [{ message: 'Not your channel', extensions: { code: 'FORBIDDEN' } }] },
      },
    ]);
    expect(await settled(pending)).toEqual({ done: true, value: undefined });
  });

  it('an unexpected error is masked as an internal error', () => {
    const { to, frames } = recorder();
    const handle = new OperationHandle(to, 'op8', undefined, deps, fakeFanout().fanout);
    handle.ended(new Error('database password is hunter2'));
    expect(frames.map((f) => JSON.parse(f))).toEqual([
      {
        id: 'op8',
        type: 'next',
        payload: { errors: [{ message: 'Internal error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] },
      },
    ]);
  });

  it('an error end sends nothing to a socket no longer open, and a plain end sends nothing', async () => {
    const closing = recorder(2);
    const handle = new OperationHandle(closing.to, 'op9', undefined, deps, fakeFanout().fanout);
    const pending = handle.next();
    handle.ended(new DomainError('FORBIDDEN', 'Not your channel'));
    expect(closing.frames).toEqual([]);
    expect(await settled(pending)).toEqual({ done: true, value: undefined });

    const open = recorder();
    new OperationHandle(open.to, 'op10', undefined, deps, fakeFanout().fanout).ended();
    expect(open.frames).toEqual([]);
  });
});
