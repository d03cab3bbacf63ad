import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { Deps } from '../src/deps.js';
import { createSessionEndWatches } from '../src/resolvers/channels.js';
import { publishSessionEnded } from '../src/resolvers/events.js';
import type { AgentViewer } from '../src/resolvers/viewer.js';
import { type EventBus, memoryEventBus } from '../src/stores/bus.js';

/** Deps with an in-process bus that counts its open subscriptions. */
function fixture() {
  const bus = memoryEventBus({ historySize: 100 });
  const open = { count: 0, started: 0 };
  const counted: EventBus = {
    ...bus,
    async *subscribe(channel, opts) {
      open.count++;
      open.started++;
      try {
        yield* bus.subscribe(channel, opts);
      } finally {
        open.count--;
      }
    },
  };
  const log = { warn: () => {}, error: () => {}, info: () => {}, debug: () => {} };
  const deps = { bus: counted, log } as unknown as Deps;
  const viewer = (sessionId: string) =>
    ({ kind: 'agent', agentId: 'a_one', session: { id: sessionId } }) as AgentViewer;
  return { deps, open, viewer, watches: createSessionEndWatches(deps) };
}

describe('Session-end watches', () => {
  it('every wait on one agent channel shares one bus subscription; an end settles only its own Session', async () => {
    const { deps, open, viewer, watches } = fixture();
    const first = Array.from({ length: 30 }, () => new AbortController());
    const second = Array.from({ length: 30 }, () => new AbortController());
    const settled = { first: 0, second: 0 };
    const waits = [
      ...first.map((c) =>
        watches.watch(viewer('session-one-0123456789'), c.signal).then((e) => {
          settled.first++;
          return e;
        }),
      ),
      ...second.map((c) =>
        watches.watch(viewer('session-two-0123456789'), c.signal).then((e) => {
          settled.second++;
          return e;
        }),
      ),
    ];
    await sleep(20);
    expect(open.count).toBe(1);

    await publishSessionEnded(deps, 'a_one', ['session-one-0123456789'], 'logout');
    const ends = await Promise.all(waits.slice(0, 30));
    expect(ends.every((e) => e?.event === 'session.ended' && (e.data as { reason: string }).reason === 'logout')).toBe(
      true,
    );
    await sleep(20);
    expect(settled).toEqual({ first: 30, second: 0 });
    expect(open.count).toBe(1);

    // When the last waiter leaves, the shared subscription is released; a later wait opens a new one.
    for (const c of second) c.abort();
    expect(await Promise.all(waits.slice(30))).toEqual(Array(30).fill(undefined));
    await sleep(20);
    expect(open.count).toBe(0);
    const later = new AbortController();
    const wait = watches.watch(viewer('session-two-0123456789'), later.signal);
    await sleep(20);
    expect(open).toEqual({ count: 1, started: 2 });
    await publishSessionEnded(deps, 'a_one', ['session-two-0123456789'], 'disabled');
    expect((await wait)?.data).toMatchObject({ reason: 'disabled' });
    await sleep(20);
    expect(open.count).toBe(0);
  });

  it('an already aborted signal resolves at once without subscribing', async () => {
    const { open, viewer, watches } = fixture();
    expect(await watches.watch(viewer('session-one-0123456789'), AbortSignal.abort())).toBeUndefined();
    expect(open.started).toBe(0);
  });
});
