import type { Request } from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notLoggedIn } from '../src/errors.js';
import { publishEvent } from '../src/resolvers/channels.js';
import type { VisitorViewer } from '../src/resolvers/viewer.js';
import type { GraphQLContext } from '../src/schema/builder.js';
import { createGraphQLServer } from '../src/schema/yoga.js';
import type { EventBus } from '../src/stores/bus.js';
import { eventually, factories, releaseTestDeps, type TestDeps, testDeps } from './support/deps.js';

/**
 * The fan-out plugin in the gateway's own GraphQL server (src/schema/yoga.ts over the real schema
 * and deps), subscribed the way the WebSocket adapter does: through `getEnveloped` with a socket
 * context. The bus is only observed, to count the subscriptions it holds open.
 */
let deps: TestDeps;
let make: ReturnType<typeof factories>;
beforeAll(async () => {
  deps = await testDeps();
  make = factories(deps);
});
afterAll(async () => {
  await make?.cleanup();
  await releaseTestDeps();
});

type Result = { data?: { [field: string]: { id: string; event: string; data: unknown } }; errors?: unknown[] };

async function fixture() {
  const open = { count: 0 };
  const observed: EventBus = {
    publish: (...args) => deps.bus.publish(...args),
    close: () => deps.bus.close(),
    async *subscribe(channel, opts) {
      open.count++;
      try {
        yield* deps.bus.subscribe(channel, opts);
      } finally {
        open.count--;
      }
    },
  };
  const observedDeps = { ...deps, bus: observed };
  const yoga = createGraphQLServer(observedDeps);
  const merchant = await make.merchant();
  const visitor: VisitorViewer = await make.visitor(merchant);
  const socketContext: GraphQLContext = {
    deps: observedDeps,
    agent: () => Promise.reject(notLoggedIn()),
    visitor: async () => visitor,
    identity: 'visitor',
    wsAddress: 'ws://127.0.0.1/graphql',
    clientIp: '127.0.0.1',
  };
  const subscribe = async (query: string, variables: Record<string, unknown> = {}) => {
    const { parse, subscribe, contextFactory, schema } = yoga.getEnveloped({
      req: {} as Request,
      socketContext,
    });
    const result = await subscribe({
      schema,
      document: parse(query),
      variableValues: variables,
      contextValue: await contextFactory(),
    });
    if (!(Symbol.asyncIterator in (result as object))) throw new Error(`not a stream: ${JSON.stringify(result)}`);
    const stream = (result as AsyncGenerator<Result>)[Symbol.asyncIterator]();
    // The first event of a subscription without `since` is `subscribed`: from then on it is live.
    const first = await stream.next();
    expect(first.value?.data).toMatchObject({
      [Object.keys(first.value?.data ?? {})[0] as string]: { event: 'subscribed' },
    });
    return stream;
  };
  const publish = (event: string) => publishEvent(deps, { channel: visitor.channel, event, data: { n: event } });
  return { subscribe, publish, open, channel: visitor.channel };
}

const query = 'subscription($name: String!) { channel(name: $name) { id event data } }';

describe('fan-out: one execution per event for all channel subscribers', () => {
  it('subscribers asking the same of the same event share one executed result', async () => {
    const f = await fixture();
    const subscribers = await Promise.all([1, 2, 3].map(() => f.subscribe(query, { name: f.channel })));
    const pending = subscribers.map((s) => s.next());
    await f.publish('shared.one');
    const results = (await Promise.all(pending)).map((r) => r.value as Result);
    expect(results[0]?.data?.channel).toMatchObject({ event: 'shared.one', data: { n: 'shared.one' } });
    // One execution: the very same result object reaches every subscriber.
    expect(results[1]).toBe(results[0]);
    expect(results[2]).toBe(results[0]);
    for (const s of subscribers) await s.return?.(undefined);
  });

  it('another selection gets its own result; any other document is executed per subscriber', async () => {
    const f = await fixture();
    const same = await f.subscribe(query, { name: f.channel });
    const other = await f.subscribe('subscription($name: String!) { channel(name: $name) { id event } }', {
      name: f.channel,
    });
    // The same selection under an inline fragment: not recognised as a plain `channel` document.
    const fragment = 'subscription($name: String!) { ... on Subscription { channel(name: $name) { id event } } }';
    const unshared = await Promise.all([1, 2].map(() => f.subscribe(fragment, { name: f.channel })));
    const pending = [same.next(), other.next()];
    const unsharedPending = unshared.map((s) => s.next());
    await f.publish('shared.two');
    const [a, b] = (await Promise.all(pending)).map((r) => r.value as Result);
    expect(a?.data?.channel).toMatchObject({ event: 'shared.two', data: { n: 'shared.two' } });
    expect(b?.data?.channel).toEqual({ id: a?.data?.channel?.id, event: 'shared.two' });
    expect(b).not.toBe(a);
    const [c, d] = (await Promise.all(unsharedPending)).map((r) => r.value as Result);
    expect(c?.data?.channel).toEqual({ id: a?.data?.channel?.id, event: 'shared.two' });
    expect(d).toEqual(c);
    expect(d).not.toBe(c);
    for (const s of [same, other, ...unshared]) await s.return?.(undefined);
  });

  it('unsubscribing releases the bus subscription', async () => {
    const f = await fixture();
    const a = await f.subscribe(query, { name: f.channel });
    const b = await f.subscribe(query, { name: f.channel });
    expect(f.open.count).toBe(2);
    await a.return?.(undefined);
    await eventually(() => f.open.count === 1, 'one subscription released');
    const pending = b.next();
    await f.publish('after.leave');
    expect(((await pending).value as Result).data?.channel).toMatchObject({ event: 'after.leave' });
    await b.return?.(undefined);
    await eventually(() => f.open.count === 0, 'every subscription released');
  });
});
