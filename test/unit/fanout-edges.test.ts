import { describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import type { Deps } from '../../src/deps.js';
import type { ChannelViewer } from '../../src/resolvers/channels.js';
import { adminChannel, agentChannel, globalChannel, sessionFingerprint } from '../../src/resolvers/events.js';
import type { HeldAgentViewer, VisitorViewer } from '../../src/resolvers/viewer.js';
import {
  type ChannelEvent,
  DEFAULT_MAX_QUEUED_EVENTS,
  type EventBus,
  SlowConsumerError,
} from '../../src/stores/bus.js';
import type { EventId } from '../../src/stores/event-id.js';
import type { Connection } from '../../src/subscriptions/connection.js';
import { frameWriter, textFrame } from '../../src/subscriptions/fanout/frames.js';
import { createFanout, type FanoutSocket, type FrameFormat } from '../../src/subscriptions/fanout.js';
import { eventually } from '../support/deps.js';

/**
 * Edges of the fan-out (src/subscriptions/fanout.ts and fanout/) over a bus the test drives: each
 * channel's live feed and each replay are released by the test, so the order of catch-up and live
 * events is chosen here, not left to timing. Sockets record their frames; metrics record calls.
 */

const idOf = (n: number) => `${1764201600000 + n}-0` as EventId;
const ev = (channel: string, n: number, event = `e.${n}`, data: unknown = { n }): ChannelEvent => ({
  id: idOf(n),
  channel,
  event,
  data,
  at: '2026-11-27T03:00:00.000Z',
});

/** An async queue: `push` values, `fail` or `end` it; iteration stops on `signal`. */
function queue<T>(signal?: AbortSignal) {
  const items: T[] = [];
  let done = false;
  let failure: unknown;
  let wake = () => {};
  const poke = () => wake();
  signal?.addEventListener('abort', () => {
    done = true;
    poke();
  });
  return {
    push(item: T) {
      items.push(item);
      poke();
    },
    fail(error: unknown) {
      failure = error;
      poke();
    },
    end() {
      done = true;
      poke();
    },
    async *[Symbol.asyncIterator]() {
      for (;;) {
        if (failure !== undefined) throw failure;
        const item = items.shift();
        if (item !== undefined) yield item;
        else if (done) return;
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
}

type Q = ReturnType<typeof queue<ChannelEvent>>;

/** A bus whose feeds (live subscriptions) and replays are queues the test fills. */
function drivenBus() {
  const feeds: { channel: string; q: Q }[] = [];
  const replays: { channel: string; since?: string; q: Q }[] = [];
  const bus: EventBus = {
    publish: () => Promise.reject(new Error('not used')),
    close: async () => {},
    subscribe(channel, opts) {
      const q = queue<ChannelEvent>(opts?.signal);
      if (opts?.replayOnly) replays.push({ channel, since: opts.since, q });
      else feeds.push({ channel, q });
      return q[Symbol.asyncIterator]();
    },
  } as EventBus;
  const feed = async (channel: string, i = 0): Promise<Q> =>
    (await eventually(() => feeds.filter((f) => f.channel === channel)[i]?.q, `feed ${i} of ${channel}`)) as Q;
  const replay = async (channel: string, i = 0): Promise<Q> =>
    (await eventually(() => replays.filter((r) => r.channel === channel)[i]?.q, `replay ${i} of ${channel}`)) as Q;
  return { bus, feeds, replays, feed, replay };
}

function recordingMetrics() {
  const calls: [string, unknown?][] = [];
  const metrics = {
    subscriptionStarted: () => calls.push(['started']),
    subscriptionEnded: () => calls.push(['ended']),
    eventDelivered: (count?: number) => calls.push(['delivered', count]),
    eventDropped: (reason: string) => calls.push(['dropped', reason]),
  };
  return { metrics, calls, of: (name: string) => calls.filter(([n]) => n === name).map(([, v]) => v) };
}

function setup() {
  const driven = drivenBus();
  const m = recordingMetrics();
  const log = { info() {}, warn() {}, error() {}, debug() {}, child: () => log };
  const fanout = createFanout({ bus: driven.bus, metrics: m.metrics, log } as unknown as Pick<
    Deps,
    'bus' | 'metrics' | 'log'
  >);
  return { fanout, ...driven, m };
}

/** A socket that records its frames (ws's `send`, or the pre-framed path when `preframed`). */
function recordingSocket(viewer?: ChannelViewer, opts: { preframed?: boolean } = {}) {
  const frames: string[] = [];
  const stop = new AbortController();
  const endings: [string, string][] = [];
  const socket: Record<string, unknown> = {
    OPEN: 1,
    readyState: 1,
    bufferedAmount: 0,
    send: (frame: string) => frames.push(frame),
  };
  if (opts.preframed) {
    socket._socket = { write: (frame: Buffer) => frames.push(`raw:${frame.subarray(2).toString()}`) };
    socket._sender = { _state: 0, _queue: [] };
  }
  const connection = {
    signal: stop.signal,
    viewer,
    end: (code: string, reason: string) => {
      endings.push([code, reason]);
      stop.abort();
    },
  } as unknown as Connection;
  const to: FanoutSocket = {
    socket: socket as unknown as WebSocket,
    connection,
    slowReason: 'too slow',
    subscriptions: new Set(),
  };
  return { to, frames, endings };
}

/** `{event,n}` of each event, or nothing for events named `quiet.*`. */
const plain = (key: string): FrameFormat => ({
  key,
  payload: (e) => (e.event.startsWith('quiet.') ? undefined : JSON.stringify({ event: e.event, channel: e.channel })),
});

const agent = (over: Partial<HeldAgentViewer> = {}): HeldAgentViewer => ({
  kind: 'agent',
  agentId: 'ag1',
  merchantId: 'm1',
  bid: 'b1',
  level: 'agent',
  session: { id: 'sess-1' },
  ...over,
});
const visitor = (over: Partial<VisitorViewer> = {}): VisitorViewer => ({
  kind: 'visitor',
  visitorId: 'v1',
  merchantId: 'm1',
  bid: 'b1',
  channel: 'visitor-v1',
  ...over,
});

type Setup = ReturnType<typeof setup>;

function sub(
  s: Setup,
  to: FanoutSocket,
  channel: string,
  viewer: ChannelViewer,
  o: { format?: FrameFormat; id?: string; before?: string; after?: string; since?: EventId } = {},
) {
  const ended: unknown[] = [];
  const format = o.format ?? plain('plain');
  const subscription = s.fanout.subscribe({
    channel,
    viewer,
    to,
    format: s.fanout.format(format.key, () => format),
    before: o.before ?? `{"id":"${o.id ?? 'op'}","payload":`,
    after: o.after ?? '}',
    owner: { ended: (error) => ended.push(error) },
    ...(o.since ? { since: o.since } : {}),
  });
  return { sub: subscription, ended };
}

/** Makes the feed of `channel` listen at position `n`, and answers the first replay with `subscribed` at `n`. */
async function goLive(s: Setup, channel: string, n: number, replayIndex = 0, feedIndex = 0) {
  const feed = await s.feed(channel, feedIndex);
  feed.push(ev(channel, n, 'subscribed', {}));
  const replay = await s.replay(channel, replayIndex);
  replay.push(ev(channel, n, 'subscribed', {}));
  replay.end();
  return feed;
}

const events = (frames: string[]) => frames.map((f) => JSON.parse(f.replace(/^raw:/, '')).payload?.event ?? f);
const tick = () => new Promise((r) => setTimeout(r, 20));

describe('fan-out: the viewer a subscription keeps', () => {
  it("an agent subscription shares its socket's viewer only for the same agent and Session", () => {
    const s = setup();
    const own = agent();
    const socket = recordingSocket(own);
    expect(sub(s, socket.to, 'c1', { ...own }).sub.viewer).toBe(own);
    const otherSession = agent({ session: { id: 'sess-2' } });
    const kept = sub(s, socket.to, 'c1', { ...otherSession, agent: { x: 1 } } as never).sub.viewer;
    expect(kept).not.toBe(own);
    expect(kept).toEqual(otherSession); // the held part only (no `agent` row)
    const otherAgent = agent({ agentId: 'ag2' });
    expect(sub(s, socket.to, 'c1', { ...otherAgent }).sub.viewer).toEqual(otherAgent);
    expect(sub(s, socket.to, 'c1', { ...otherAgent }).sub.viewer).not.toBe(own);
    // A visitor subscription on an agent's socket keeps its own.
    const v = visitor();
    expect(sub(s, socket.to, 'c1', v).sub.viewer).toBe(v);
  });

  it("a visitor subscription shares its socket's viewer only for the same visitor and channel", () => {
    const s = setup();
    const own = visitor();
    const socket = recordingSocket(own);
    expect(sub(s, socket.to, 'visitor-v1', { ...own }).sub.viewer).toBe(own);
    const otherChannel = visitor({ channel: 'visitor-v9' });
    expect(sub(s, socket.to, 'visitor-v1', otherChannel).sub.viewer).toBe(otherChannel);
    const otherVisitor = visitor({ visitorId: 'v2' });
    expect(sub(s, socket.to, 'visitor-v1', otherVisitor).sub.viewer).toBe(otherVisitor);
    // No socket viewer: an agent's is held.
    const anon = recordingSocket();
    const a = agent();
    const held = sub(s, anon.to, 'c1', { ...a, agent: {} } as never).sub.viewer;
    expect(held).toEqual(a);
  });
});

describe('fan-out: an agent level change', () => {
  it('ends with FORBIDDEN only the subscriptions of that agent the new level no longer allows; the others take the level', () => {
    const s = setup();
    const admin = agent({ level: 'admin' });
    const socket = recordingSocket(admin);
    const onAdmin = sub(s, socket.to, adminChannel('b1'), { ...admin });
    const onOwn = sub(s, socket.to, agentChannel('ag1'), { ...admin });
    const onGlobal = sub(s, socket.to, globalChannel('b1'), { ...admin });
    const otherAdmin = agent({ agentId: 'ag2', level: 'admin', session: { id: 'sess-9' } });
    const ofOther = sub(s, socket.to, adminChannel('b1'), otherAdmin);
    const ofVisitor = sub(s, socket.to, 'visitor-v1', visitor());
    s.fanout.levelChanged(socket.to, 'ag1', 'agent');
    expect(onAdmin.ended).toHaveLength(1);
    expect(onAdmin.ended[0]).toMatchObject({ code: 'FORBIDDEN' });
    expect(onAdmin.sub.ended).toBe(true);
    for (const kept of [onOwn, onGlobal, ofOther, ofVisitor]) expect(kept.ended).toEqual([]);
    expect([...socket.to.subscriptions]).toEqual([onOwn.sub, onGlobal.sub, ofOther.sub, ofVisitor.sub]);
    expect(onOwn.sub.viewer).toMatchObject({ level: 'agent' });
    expect(onGlobal.sub.viewer).toMatchObject({ level: 'agent' });
    expect(ofOther.sub.viewer).toMatchObject({ level: 'admin' });
    // A ticket agent loses online reception altogether.
    s.fanout.levelChanged(socket.to, 'ag1', 'ticket_agent');
    expect(onOwn.ended).toHaveLength(1);
    expect(onGlobal.ended).toHaveLength(1);
    expect([...socket.to.subscriptions]).toEqual([ofOther.sub, ofVisitor.sub]);
  });
});

describe('fan-out: a Session end on the socket', () => {
  it("gives the session.ended event as the last frame of the agent's subscriptions on other channels, and ends them", async () => {
    const s = setup();
    const own = agent();
    const socket = recordingSocket(own);
    const onOwn = sub(s, socket.to, agentChannel('ag1'), { ...own }, { id: 'own' });
    const onGlobal = sub(s, socket.to, globalChannel('b1'), { ...own }, { id: 'global' });
    const quiet = sub(
      s,
      socket.to,
      'other-quiet',
      { ...own },
      { id: 'quiet', format: { key: 'none', payload: () => undefined } },
    );
    const otherSession = sub(s, socket.to, 'other-sess', agent({ session: { id: 'sess-2' } }), { id: 'o' });
    const ofVisitor = sub(s, socket.to, 'visitor-v1', visitor(), { id: 'v' });
    const ended = ev(agentChannel('ag1'), 5, 'session.ended', { sessions: [sessionFingerprint('sess-1')] });
    s.fanout.sessionEnded(socket.to, ended);
    expect(socket.frames.map((f) => JSON.parse(f))).toEqual([
      { id: 'global', payload: { event: 'session.ended', channel: globalChannel('b1') } },
    ]);
    expect(onGlobal.ended).toEqual([undefined]);
    expect(quiet.ended).toEqual([undefined]);
    for (const kept of [onOwn, otherSession, ofVisitor]) expect(kept.ended).toEqual([]);
    expect([...socket.to.subscriptions]).toEqual([onOwn.sub, otherSession.sub, ofVisitor.sub]);
    // Another Session's end ends nothing.
    s.fanout.sessionEnded(socket.to, { ...ended, data: { sessions: [sessionFingerprint('sess-3')] } });
    expect(socket.to.subscriptions.size).toBe(3);
    expect(socket.frames).toHaveLength(1);
  });
});

describe('fan-out: visitor channels and shared formats', () => {
  it('lists the visitor channels subscribed (with their merchant), not agent ones, while subscribed', () => {
    const s = setup();
    const socket = recordingSocket();
    expect([...s.fanout.visitorChannels()]).toEqual([]);
    const v = sub(s, socket.to, 'visitor-v1', visitor({ merchantId: 'm7' }));
    const a = sub(s, socket.to, 'agent-ag1', agent());
    expect([...s.fanout.visitorChannels()]).toEqual([{ channel: 'visitor-v1', merchantId: 'm7' }]);
    s.fanout.end(v.sub);
    s.fanout.end(a.sub);
    expect([...s.fanout.visitorChannels()]).toEqual([]);
  });

  it('a format lives while any subscription uses it; ending one twice counts once', () => {
    const s = setup();
    const socket = recordingSocket();
    const first = plain('k');
    const one = sub(s, socket.to, 'c', agent(), { format: first });
    const two = sub(s, socket.to, 'c', agent(), { format: plain('k') });
    expect(two.sub.format).toBe(first);
    s.fanout.end(one.sub);
    s.fanout.end(one.sub);
    expect(one.ended).toEqual([undefined]);
    expect(s.m.of('ended')).toHaveLength(1);
    const again = plain('k');
    expect(s.fanout.format('k', () => again)).toBe(first); // still used by `two`
    s.fanout.end(two.sub);
    expect(s.fanout.format('k', () => again)).toBe(again); // released with its last user
  });
});

describe('fan-out: live delivery', () => {
  it('counts the frames written per event; a format that sends nothing writes and counts nothing', async () => {
    const s = setup();
    const sockets = [recordingSocket(), recordingSocket(), recordingSocket()];
    const silent: FrameFormat = { key: 'silent', payload: () => undefined };
    sub(s, sockets[0]!.to, 'c', agent(), { id: 'a' });
    sub(s, sockets[1]!.to, 'c', agent(), { id: 'b' });
    sub(s, sockets[2]!.to, 'c', agent(), { id: 'c', format: silent });
    const feed = await goLive(s, 'c', 1);
    for (const i of [1, 2]) {
      const r = await s.replay('c', i);
      r.push(ev('c', 1, 'subscribed', {}));
      r.end();
    }
    await eventually(() => sockets[1]!.frames.length === 1, 'subscribed');
    s.m.calls.length = 0;
    feed.push(ev('c', 2, 'hello'));
    feed.push(ev('c', 3, 'quiet.one'));
    feed.push(ev('c', 4, 'bye'));
    await eventually(() => sockets[0]!.frames.length === 3, 'the live events');
    expect(events(sockets[0]!.frames)).toEqual(['subscribed', 'hello', 'bye']);
    expect(sockets[1]!.frames.slice(1)).toEqual([
      '{"id":"b","payload":{"event":"hello","channel":"c"}}',
      '{"id":"b","payload":{"event":"bye","channel":"c"}}',
    ]);
    expect(sockets[2]!.frames).toEqual([]);
    expect(s.m.calls).toEqual([
      ['delivered', 2],
      ['delivered', 2],
    ]);
  });

  it('a subscription catching up holds up to the queue limit of live events; one more ends its socket as a slow consumer, once', async () => {
    const s = setup();
    const socket = recordingSocket();
    sub(s, socket.to, 'c', agent(), { id: 'a' });
    sub(s, socket.to, 'c', agent(), { id: 'b' });
    const feed = await s.feed('c');
    feed.push(ev('c', 1, 'subscribed', {}));
    await s.replay('c', 1); // both catching up, their replays held
    for (let n = 2; n < 2 + DEFAULT_MAX_QUEUED_EVENTS; n++) feed.push(ev('c', n));
    await eventually(() => s.feeds[0]!.q, 'feed');
    await tick();
    expect(socket.endings).toEqual([]);
    feed.push(ev('c', 2 + DEFAULT_MAX_QUEUED_EVENTS));
    await eventually(() => socket.endings.length > 0, 'the slow consumer ended');
    expect(socket.endings).toEqual([['slow_consumer', 'too slow']]);
    expect(s.m.of('dropped')).toEqual(['slow_consumer']);
  });

  it('pre-framed writes: subscriptions differing in before or after each get their own frame', async () => {
    const s = setup();
    const socket = recordingSocket(undefined, { preframed: true });
    sub(s, socket.to, 'c', agent(), { before: '[1,', after: ']' });
    sub(s, socket.to, 'c', agent(), { before: '[1,', after: ',2]' });
    sub(s, socket.to, 'c', agent(), { before: '[3,', after: ',2]' });
    const feed = await goLive(s, 'c', 1);
    for (const i of [1, 2]) {
      const r = await s.replay('c', i);
      r.end();
    }
    await eventually(() => socket.frames.length === 1, 'the first subscribed');
    await tick();
    socket.frames.length = 0;
    feed.push(ev('c', 2, 'x'));
    await eventually(() => socket.frames.length === 3, 'three frames');
    const p = '{"event":"x","channel":"c"}';
    expect(socket.frames).toEqual([`raw:[1,${p}]`, `raw:[1,${p},2]`, `raw:[3,${p},2]`]);
  });
});

describe('fan-out: catching up', () => {
  it('a subscription ended before its feed listens writes nothing', async () => {
    const s = setup();
    const keeper = recordingSocket();
    const gone = recordingSocket();
    sub(s, keeper.to, 'c', agent());
    const early = sub(s, gone.to, 'c', agent());
    s.fanout.end(early.sub);
    await goLive(s, 'c', 1);
    await eventually(() => keeper.frames.length === 1, 'the keeper live');
    await tick();
    expect(s.replays).toHaveLength(1);
    expect(gone.frames).toEqual([]);
  });

  it('a subscription ended during its replay gets nothing more of it', async () => {
    const s = setup();
    const socket = recordingSocket();
    const one = sub(s, socket.to, 'c', agent(), { since: idOf(1) });
    await goLiveFeedOnly(s, 'c', 1);
    const replay = await s.replay('c');
    replay.push(ev('c', 2, 'r.2'));
    await eventually(() => socket.frames.length === 1, 'the first replayed');
    s.fanout.end(one.sub);
    replay.push(ev('c', 3, 'r.3'));
    replay.end();
    await tick();
    expect(events(socket.frames)).toEqual(['r.2']);
  });

  it('after the replay: the waiting live events it did not cover, once, counted; none after a last one; covered ones not again', async () => {
    const s = setup();
    const own = agent();
    const socket = recordingSocket(own);
    const channel = agentChannel('ag1');
    sub(s, socket.to, channel, { ...own }, { since: idOf(1) });
    const feed = await goLiveFeedOnly(s, channel, 1);
    const replay = await s.replay(channel);
    replay.push(ev(channel, 2, 'r.2'));
    replay.push(ev(channel, 3, 'r.3'));
    await eventually(() => socket.frames.length === 2, 'the replay so far');
    feed.push(ev(channel, 3, 'r.3')); // also in the replay
    feed.push(ev(channel, 4, 'w.4'));
    feed.push(ev(channel, 5, 'w.5'));
    await tick();
    s.m.calls.length = 0;
    replay.end();
    await eventually(() => socket.frames.length === 4, 'the waiting events');
    expect(events(socket.frames)).toEqual(['r.2', 'r.3', 'w.4', 'w.5']);
    expect(s.m.calls).toEqual([['delivered', 2]]);

    // A second subscription whose waiting events hold its own Session's end, then more.
    const first = [...socket.to.subscriptions][0];
    const second = recordingSocket(own);
    const last = sub(s, second.to, channel, { ...own }, { since: idOf(5) });
    const replay2 = await s.replay(channel, 1);
    replay2.push(ev(channel, 6, 'r.6'));
    await eventually(() => second.frames.length === 1, 'its replay');
    s.m.calls.length = 0;
    feed.push(ev(channel, 6, 'r.6'));
    feed.push(ev(channel, 7, 'session.ended', { sessions: [sessionFingerprint('sess-1')] }));
    feed.push(ev(channel, 8, 'w.8'));
    await eventually(() => socket.frames.length === 6, 'the first one live');
    expect(events(socket.frames).slice(4)).toEqual(['r.6', 'session.ended']);
    expect(first?.ended).toBe(true);
    replay2.end();
    await eventually(() => last.ended.length === 1, 'ended by its session end');
    await tick();
    expect(events(second.frames)).toEqual(['r.6', 'session.ended']);
    // r.6 and session.ended live to the first; session.ended from the waiting ones to the second.
    expect(s.m.calls.filter(([n]) => n === 'delivered')).toEqual([
      ['delivered', 1],
      ['delivered', 1],
      ['delivered', 1],
    ]);
  });

  it('a caught-up subscription with nothing waiting counts no delivery', async () => {
    const s = setup();
    const socket = recordingSocket();
    sub(s, socket.to, 'c', agent());
    await goLive(s, 'c', 1);
    await eventually(() => socket.frames.length === 1, 'subscribed');
    await tick();
    expect(s.m.of('delivered')).toEqual([]);
  });

  it('a replay that fails ends the subscription with its error', async () => {
    const s = setup();
    const socket = recordingSocket();
    const one = sub(s, socket.to, 'c', agent(), { since: idOf(1) });
    await goLiveFeedOnly(s, 'c', 1);
    const boom = new Error('replay failed');
    (await s.replay('c')).fail(boom);
    await eventually(() => one.ended.length === 1, 'ended');
    expect(one.ended).toEqual([boom]);
    expect(socket.to.subscriptions.size).toBe(0);
  });
});

describe('fan-out: a feed that stops', () => {
  it('a failed feed ends every subscription with its error; the next subscription gets a new feed', async () => {
    const s = setup();
    const a = recordingSocket();
    const b = recordingSocket();
    const one = sub(s, a.to, 'c', agent());
    const two = sub(s, b.to, 'c', agent());
    const feed = await goLive(s, 'c', 1);
    const boom = new Error('bus down');
    feed.fail(boom);
    await eventually(() => one.ended.length && two.ended.length, 'both ended');
    expect([one.ended, two.ended]).toEqual([[boom], [boom]]);
    expect([a.endings, b.endings]).toEqual([[], []]);
    expect(s.m.of('dropped')).toEqual([]);
    const c = recordingSocket();
    sub(s, c.to, 'c', agent());
    const next = await goLive(s, 'c', 2, 2, 1);
    expect(s.feeds).toHaveLength(2);
    next.push(ev('c', 3, 'after'));
    await eventually(() => c.frames.length === 2, 'a live event on the new feed');
    expect(events(c.frames)).toEqual(['subscribed', 'after']);
  });

  it('a feed that fell behind ends each socket as a slow consumer, once per socket', async () => {
    const s = setup();
    const a = recordingSocket();
    const one = sub(s, a.to, 'c', agent());
    const two = sub(s, a.to, 'c', agent());
    const feed = await goLive(s, 'c', 1);
    const error = new SlowConsumerError('c');
    feed.fail(error);
    await eventually(() => one.ended.length && two.ended.length, 'both ended');
    expect([one.ended, two.ended]).toEqual([[error], [error]]);
    expect(a.endings).toEqual([['slow_consumer', 'too slow']]);
    expect(s.m.of('dropped')).toEqual(['slow_consumer']);
  });

  it('a feed that ends ends its subscriptions with "channel feed stopped"', async () => {
    const s = setup();
    const a = recordingSocket();
    const one = sub(s, a.to, 'c', agent());
    const feed = await goLive(s, 'c', 1);
    feed.end();
    await eventually(() => one.ended.length, 'ended');
    expect(one.ended).toEqual([new Error('channel feed stopped')]);
    expect((one.ended[0] as Error).message).toBe('channel feed stopped');
  });

  it("a stopped feed's late end does not drop the channel's new feed", async () => {
    const s = setup();
    const a = recordingSocket();
    const first = sub(s, a.to, 'c', agent());
    await goLive(s, 'c', 1);
    s.fanout.end(first.sub); // stops feed 0; its loop ends later
    sub(s, a.to, 'c', agent());
    await goLive(s, 'c', 2, 1, 1);
    await tick();
    sub(s, a.to, 'c', agent());
    await tick();
    expect(s.feeds).toHaveLength(2); // the third shares the second feed
    expect([...s.fanout.visitorChannels()]).toEqual([]);
  });
});

/** Makes the feed listen only (the replay is the test's). */
async function goLiveFeedOnly(s: Setup, channel: string, n: number) {
  const feed = await s.feed(channel);
  feed.push(ev(channel, n, 'subscribed', {}));
  return feed;
}

describe('fan-out frames (fanout/frames.ts)', () => {
  it('frameWriter: only a socket with a TCP socket and an idle, empty sender', () => {
    const tcp = { write: () => true };
    expect(frameWriter({})).toBeUndefined();
    expect(frameWriter({ _socket: tcp })).toBeUndefined();
    expect(frameWriter({ _socket: tcp, _sender: { _state: 1, _queue: [] } })).toBeUndefined();
    expect(frameWriter({ _socket: tcp, _sender: { _state: 0, _queue: [Buffer.alloc(1)] } })).toBeUndefined();
    expect(frameWriter({ _sender: { _state: 0, _queue: [] } })).toBeUndefined();
    expect(frameWriter({ _socket: tcp, _sender: { _state: 0, _queue: [] } })).toBe(tcp);
  });

  it('textFrame: the length encodings switch at exactly 126 and 65 536 bytes', () => {
    const frame = (n: number) => textFrame('', Buffer.from('a'.repeat(n)), '');
    expect([...frame(125).subarray(0, 2)]).toEqual([0x81, 125]);
    expect(frame(125).length).toBe(127);
    expect([...frame(126).subarray(0, 4)]).toEqual([0x81, 126, 0, 126]);
    expect(frame(126).length).toBe(130);
    expect([...frame(65_535).subarray(0, 4)]).toEqual([0x81, 126, 0xff, 0xff]);
    expect(frame(65_535).length).toBe(65_539);
    expect([...frame(65_536).subarray(0, 10)]).toEqual([0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0]);
    expect(frame(65_536).length).toBe(65_546);
    expect(frame(65_536).subarray(10).toString()).toBe('a'.repeat(65_536));
  });
});
