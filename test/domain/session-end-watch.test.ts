import { describe, expect, it } from 'vitest';
import { createSessionEndWatches } from '../../src/resolvers/channels.js';
import { publishSessionEnded } from '../../src/resolvers/events.js';
import type { AgentViewer } from '../../src/resolvers/viewer.js';
import type { EventBus } from '../../src/stores/bus.js';
import { eventually, type Factories, type TestDeps, useTestDeps } from '../support/deps.js';

/**
 * The Session-end watches on the real deps (the bus of this run: in process, or Redis when
 * REDIS_URL is set), with real agents. The bus is only observed: each subscription it opens is
 * counted on its way through.
 */
let deps: TestDeps;
let make: Factories;
useTestDeps((made) => ({ deps, f: make } = made));

function counted(bus: EventBus) {
  // `live`: subscriptions past their first (`subscribed`) event, so listening for what follows.
  const open = { count: 0, started: 0, live: 0 };
  const observed: EventBus = {
    publish: (...args) => bus.publish(...args),
    close: () => bus.close(),
    async *subscribe(channel, opts) {
      open.count++;
      open.started++;
      let live = false;
      try {
        for await (const event of bus.subscribe(channel, opts)) {
          if (!live) open.live++;
          live = true;
          yield event;
        }
      } finally {
        open.count--;
        if (live) open.live--;
      }
    },
  };
  return { open, watches: createSessionEndWatches({ ...deps, bus: observed }) };
}

/** Resolves once every pending promise callback has run (no timer involved). */
const settledCallbacks = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('Session-end watches', () => {
  it('every wait on one agent channel shares one bus subscription; an end settles only its own Session', async () => {
    const { open, watches } = counted(deps.bus);
    const merchant = await make.merchant();
    const agent = await make.agent(merchant);
    // Two Sessions of the same agent (two browsers).
    const one: AgentViewer = await make.agentViewer(agent.agentId);
    const two: AgentViewer = await make.agentViewer(agent.agentId);
    expect(one.session.id).not.toBe(two.session.id);

    const first = Array.from({ length: 30 }, () => new AbortController());
    const second = Array.from({ length: 30 }, () => new AbortController());
    const settled = { first: 0, second: 0 };
    const waits = [
      ...first.map((c) =>
        watches.watch(one, c.signal).then((e) => {
          settled.first++;
          return e;
        }),
      ),
      ...second.map((c) =>
        watches.watch(two, c.signal).then((e) => {
          settled.second++;
          return e;
        }),
      ),
    ];
    await eventually(() => open.live === 1, 'the shared subscription');
    expect(open.started).toBe(1);

    await publishSessionEnded(deps, agent.agentId, [one.session.id], 'logout');
    const ends = await Promise.all(waits.slice(0, 30));
    for (const end of ends) expect(end).toMatchObject({ event: 'session.ended', data: { reason: 'logout' } });
    await settledCallbacks();
    expect(settled).toEqual({ first: 30, second: 0 });
    expect(open).toEqual({ count: 1, started: 1, live: 1 });

    // When the last waiter leaves, the shared subscription is released; a later wait opens a new one.
    for (const c of second) c.abort();
    expect(await Promise.all(waits.slice(30))).toEqual(Array(30).fill(undefined));
    await eventually(() => open.count === 0, 'the shared subscription to be released');
    const later = new AbortController();
    const wait = watches.watch(two, later.signal);
    await eventually(() => open.live === 1, 'a new subscription');
    expect(open.started).toBe(2);
    await publishSessionEnded(deps, agent.agentId, [two.session.id], 'disabled');
    expect(await wait).toMatchObject({ event: 'session.ended', data: { reason: 'disabled' } });
    await eventually(() => open.count === 0, 'the subscription to be released');
  });

  it('an already aborted signal resolves at once without subscribing', async () => {
    const { open, watches } = counted(deps.bus);
    const merchant = await make.merchant();
    const viewer = await make.agent(merchant);
    expect(await watches.watch(viewer, AbortSignal.abort())).toBeUndefined();
    expect(open.started).toBe(0);
  });

  it('stop() settles every wait with undefined and releases the subscriptions (graceful shutdown)', async () => {
    const { open, watches } = counted(deps.bus);
    const merchant = await make.merchant();
    const viewer = await make.agent(merchant);
    const wait = watches.watch(viewer, new AbortController().signal);
    await eventually(() => open.live === 1, 'the subscription');
    watches.stop();
    expect(await wait).toBeUndefined();
    await eventually(() => open.count === 0, 'the subscription to be released');
  });
});
