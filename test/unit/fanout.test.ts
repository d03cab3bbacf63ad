import { describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { publishEvent } from '../../src/resolvers/channels.js';
import type { VisitorViewer } from '../../src/resolvers/viewer.js';
import type { EventBus } from '../../src/stores/bus.js';
import { compareIds } from '../../src/stores/event-id.js';
import type { Connection } from '../../src/subscriptions/connection.js';
import { createFanout, type FanoutSocket, type FrameFormat } from '../../src/subscriptions/fanout.js';
import { eventually, type Factories, metricValue, type TestDeps, useTestDeps } from '../support/deps.js';

/**
 * The fan-out (src/subscriptions/fanout.ts) on the real deps: the bus of this run (in process,
 * or Redis when REDIS_URL is set) is only observed, to count the subscriptions it holds open;
 * sockets are recorders of the frames written to them; formats count their serializations.
 */
let deps: TestDeps;
let make: Factories;
useTestDeps((made) => ({ deps, f: make } = made));

/** A socket that records its frames, open until its connection ends. */
function recordingSocket() {
  const frames: string[] = [];
  const stop = new AbortController();
  const socket = { OPEN: 1, readyState: 1, bufferedAmount: 0, send: (frame: string) => frames.push(frame) };
  const connection = { signal: stop.signal, end: () => stop.abort() } as unknown as Connection;
  const to: FanoutSocket = {
    socket: socket as unknown as WebSocket,
    connection,
    slowReason: 'slow',
    subscriptions: new Set(),
  };
  return { to, frames, socket, ended: () => stop.signal.aborted };
}

/** A format serializing `{event, data}`, counting how often it runs. */
function countingFormat(key: string) {
  const runs = { count: 0 };
  const format: FrameFormat = {
    key,
    payload(event) {
      runs.count++;
      return JSON.stringify({ event: event.event, data: event.data });
    },
  };
  return { format, runs };
}

async function fixture() {
  const open = { count: 0 };
  const observed: EventBus = {
    publish: (...args) => deps.bus.publish(...args),
    close: () => deps.bus.close(),
    async *subscribe(channel, opts) {
      if (!opts?.replayOnly) open.count++;
      try {
        yield* deps.bus.subscribe(channel, opts);
      } finally {
        if (!opts?.replayOnly) open.count--;
      }
    },
  };
  const fanout = createFanout({ ...deps, bus: observed });
  const merchant = await make.merchant();
  const visitor: VisitorViewer = await make.visitor(merchant);
  const subscribe = (to: FanoutSocket, format: FrameFormat, id: string, since?: string) => {
    const ended: unknown[] = [];
    const sub = fanout.subscribe({
      channel: visitor.channel,
      viewer: visitor,
      to,
      format: fanout.format(format.key, () => format),
      before: `{"id":${JSON.stringify(id)},"payload":`,
      after: '}',
      owner: { ended: (error) => ended.push(error) },
      since,
    });
    return { sub, ended };
  };
  const publish = (event: string) => publishEvent(deps, { channel: visitor.channel, event, data: { n: event } });
  /** The subscription is live once its `subscribed` frame is written. */
  const live = (frames: string[]) => eventually(() => frames.some((f) => f.includes('"subscribed"')), 'subscribed');
  return { fanout, subscribe, publish, live, open };
}

const payloadOf = (frame: string | undefined) => JSON.parse(frame ?? 'null').payload;

describe('fan-out: one listener per channel, one serialization per event and format', () => {
  it('subscribers asking the same of the same event share one serialization; only the operation id differs', async () => {
    const f = await fixture();
    const { format, runs } = countingFormat('same');
    const sockets = [1, 2, 3].map(() => recordingSocket());
    for (const [i, s] of sockets.entries()) f.subscribe(s.to, format, `op-${i}`);
    for (const s of sockets) await f.live(s.frames);
    expect(f.open.count).toBe(1); // one bus subscription for the channel, not one per subscriber
    const before = runs.count;
    await f.publish('shared.one');
    await eventually(() => sockets.every((s) => s.frames.length === 2), 'the event at every socket');
    expect(runs.count - before).toBe(1);
    sockets.forEach((s, i) => {
      expect(s.frames[1]).toBe(`{"id":"op-${i}","payload":{"event":"shared.one","data":{"n":"shared.one"}}}`);
    });
  });

  it('another format gets its own serialization', async () => {
    const f = await fixture();
    const one = countingFormat('one');
    const other = countingFormat('other');
    const a = recordingSocket();
    const b = recordingSocket();
    f.subscribe(a.to, one.format, 'a');
    f.subscribe(b.to, other.format, 'b');
    await f.live(a.frames);
    await f.live(b.frames);
    const before = [one.runs.count, other.runs.count];
    await f.publish('shared.two');
    await eventually(() => a.frames.length === 2 && b.frames.length === 2, 'the event at both');
    expect([one.runs.count - (before[0] as number), other.runs.count - (before[1] as number)]).toEqual([1, 1]);
    expect(payloadOf(a.frames[1])).toEqual(payloadOf(b.frames[1]));
  });

  it('a resuming subscriber gets the replay, then live events, with no gap and no duplicate', async () => {
    const f = await fixture();
    const { format } = countingFormat('resume');
    const first = recordingSocket();
    f.subscribe(first.to, format, 'first');
    await f.live(first.frames);
    const since = (await f.publish('before.one')).id;
    await f.publish('before.two');
    await f.publish('before.three');
    const resumed = recordingSocket();
    f.subscribe(resumed.to, format, 'resumed', since);
    await f.publish('after.one');
    await eventually(() => resumed.frames.length >= 3, 'replay and live');
    expect(resumed.frames.map((frame) => payloadOf(frame).event)).toEqual(['before.two', 'before.three', 'after.one']);
  });

  it('unsubscribing releases the bus subscription; a slow socket is ended', async () => {
    const f = await fixture();
    const { format } = countingFormat('leave');
    const a = recordingSocket();
    const b = recordingSocket();
    const subA = f.subscribe(a.to, format, 'a');
    f.subscribe(b.to, format, 'b');
    await f.live(a.frames);
    await f.live(b.frames);
    f.fanout.end(subA.sub);
    expect(subA.ended).toEqual([undefined]);
    expect(f.open.count).toBe(1);
    b.socket.bufferedAmount = 2 * 1024 * 1024; // the client stopped reading
    await f.publish('after.leave');
    await eventually(() => b.ended(), 'the slow consumer ended');
    expect(a.frames.some((frame) => frame.includes('after.leave'))).toBe(false);
    f.fanout.end([...b.to.subscriptions][0] as never);
    await eventually(() => f.open.count === 0, 'every subscription released');
  });
});

describe('fan-out: subscribers joining while events flow', () => {
  it('each subscriber gets every event after its position exactly once, in order (resuming or not)', async () => {
    const f = await fixture();
    // Records each event's id, so order, gaps and duplicates show.
    const format: FrameFormat = {
      key: 'ids',
      payload: (event) => JSON.stringify({ id: event.id, event: event.event }),
    };
    const published: string[] = [];
    const publishMany = async (n: number) => {
      // Published in one go: the channel's feed takes them after the store has them.
      const ids = await Promise.all(Array.from({ length: n }, (_, i) => f.publish(`flow.${i}`)));
      published.push(...ids.map((e) => e.id));
    };
    await publishMany(5);
    const subscribers: { frames: string[]; since?: string }[] = [];
    for (let round = 0; round < 10; round++) {
      const sinceId = published[published.length - 3];
      const batch = Array.from({ length: 10 }, (_, i) => ({
        ...recordingSocket(),
        since: i % 2 ? sinceId : undefined,
      }));
      for (const s of batch) f.subscribe(s.to, format, `s${subscribers.length}`, s.since);
      subscribers.push(...batch);
      await publishMany(10); // while the new ones catch up
    }
    await publishMany(50);
    const last = published[published.length - 1];
    await eventually(
      () => subscribers.every((s) => s.frames.some((frame) => payloadOf(frame).id === last)),
      'the last event at every subscriber',
    );
    for (const s of subscribers) {
      const ids: string[] = s.frames.map((frame) => payloadOf(frame).id);
      // A resuming subscriber's position is its since; a new one's is its `subscribed` event's id.
      const position = s.since ?? (ids.shift() as string);
      expect(ids).toEqual(published.filter((id) => compareIds(id, position) > 0));
    }
  });
});

describe('fan-out: a reconnect storm', () => {
  it('every tab of a conversation resuming with since at once: one read of the history, each tab every event once, in order', async () => {
    const f = await fixture();
    const format: FrameFormat = { key: 'storm', payload: (event) => JSON.stringify({ id: event.id }) };
    // Seen by every tab before the drop; then three events while no socket is connected.
    const seen = await f.publish('seen');
    const missed = [await f.publish('m1'), await f.publish('m2'), await f.publish('m3')];
    await eventually(() => f.open.count === 0, 'no listener left on the channel');
    const readsBefore = await metricValue(deps, 'parley_history_reads_total');
    const tabs = Array.from({ length: 50 }, () => recordingSocket());
    // They come back in two waves: the second after the first one's read is over.
    const wave = async (from: number, to: number) => {
      for (let i = from; i < to; i++)
        f.subscribe((tabs[i] as ReturnType<typeof recordingSocket>).to, format, `tab-${i}`, seen.id);
      await eventually(() => tabs.slice(from, to).every((tab) => tab.frames.length === 3), 'the replay at every tab');
    };
    await wave(0, 25);
    await wave(25, 50);
    expect((await metricValue(deps, 'parley_history_reads_total')) - readsBefore).toBe(1);
    const live = await f.publish('live');
    await eventually(() => tabs.every((tab) => tab.frames.length === 4), 'the live event at every tab');
    const expected = [...missed, live].map((event) => event.id);
    for (const tab of tabs) expect(tab.frames.map((frame) => payloadOf(frame).id)).toEqual(expected);
  });
});
