import { createSchema, createYoga } from 'graphql-yoga';
import { describe, expect, it } from 'vitest';
import { sharedChannelResults } from '../src/schema/shared-results.js';

/** A `channel` subscription over one shared source, counting how often the selection executes. */
function fixture() {
  let executions = 0;
  const listeners = new Set<(event: object) => void>();
  const schema = createSchema({
    typeDefs: /* GraphQL */ `
      type Query { ok: Boolean }
      type Event { id: String! }
      type Subscription { channel(name: String!): Event!, other: Event! }
    `,
    resolvers: {
      Event: {
        id: (e: { id: string }) => {
          executions++;
          return e.id;
        },
      },
      Subscription: {
        channel: { subscribe: () => source(), resolve: (e: unknown) => e },
        other: { subscribe: () => source(), resolve: (e: unknown) => e },
      },
    },
  });
  async function* source() {
    const queue: object[] = [];
    let wake = () => {};
    const listener = (event: object) => {
      queue.push(event);
      wake();
    };
    listeners.add(listener);
    try {
      for (;;) {
        const next = queue.shift();
        if (next) yield next;
        else await new Promise<void>((r) => (wake = r));
      }
    } finally {
      listeners.delete(listener);
    }
  }
  const yoga = createYoga({ schema, plugins: [sharedChannelResults()] });
  const subscribe = async (query: string) => {
    const { parse, subscribe, contextFactory, schema: s } = yoga.getEnveloped({});
    const result = await subscribe({ schema: s, document: parse(query), contextValue: await contextFactory() });
    return (result as AsyncGenerator<{ data: unknown }>)[Symbol.asyncIterator]();
  };
  const publish = (event: object) => {
    for (const l of listeners) l(event);
  };
  return { subscribe, publish, executions: () => executions, listeners };
}

describe('fan-out: one execution per event for all channel subscribers', () => {
  it('subscribers asking the same of the same event share one executed result', async () => {
    const f = fixture();
    const subscribers = await Promise.all(
      [1, 2, 3].map(() => f.subscribe('subscription { channel(name: "c") { id } }')),
    );
    const pending = subscribers.map((s) => s.next()); // a source starts listening on its first pull
    await new Promise((r) => setTimeout(r, 10));
    f.publish({ id: 'e1' });
    const results = await Promise.all(pending);
    expect(results.map((r) => r.value)).toEqual(Array(3).fill({ data: { channel: { id: 'e1' } } }));
    expect(results[0]?.value).toBe(results[1]?.value);
    expect(f.executions()).toBe(1);
  });

  it('other subscriptions are executed per subscriber, and unsubscribing releases the source', async () => {
    const f = fixture();
    const a = await f.subscribe('subscription { other { id } }');
    const b = await f.subscribe('subscription { other { id } }');
    const pending = [a.next(), b.next()];
    await new Promise((r) => setTimeout(r, 10));
    f.publish({ id: 'e2' });
    await Promise.all(pending);
    expect(f.executions()).toBe(2);

    const c = await f.subscribe('subscription { channel(name: "c") { id } }');
    const waiting = c.next();
    await new Promise((r) => setTimeout(r, 10));
    expect(f.listeners.size).toBe(3);
    f.publish({ id: 'e3' });
    await waiting;
    await c.return?.(undefined);
    expect(f.listeners.size).toBe(2);
  });
});
