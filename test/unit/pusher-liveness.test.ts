import { afterEach, describe, expect, it, vi } from 'vitest';
import type { WebSocket } from 'ws';
import type { Connection } from '../../src/subscriptions/connection.js';
import {
  ACTIVITY_TIMEOUT_SECONDS,
  PusherConnection,
  type PusherServices,
} from '../../src/subscriptions/pusher-connection.js';

// A Pusher socket's liveness (src/subscriptions/pusher-connection.ts) on fake timers, over a
// recording socket: a client silent for the activity timeout is pinged and has 30 s to answer;
// any message counts as activity and an answer in time keeps the socket.

afterEach(() => {
  vi.useRealTimers();
});

function pusherSocket() {
  const sent: { event: string }[] = [];
  const closes: { code: number; reason: string }[] = [];
  const socket = {
    OPEN: 1,
    readyState: 1,
    send: (frame: string) => sent.push(JSON.parse(frame)),
    close: (code: number, reason: string) => closes.push({ code, reason }),
  } as unknown as WebSocket;
  const connection = { closed: async () => {} } as unknown as Connection;
  const fanout = { end: () => {} } as unknown as PusherServices['fanout'];
  const pusher = new PusherConnection({ fanout } as PusherServices, socket, connection);
  pusher.begin({ id: 'm_1', appkey: 'k' });
  const pings = () => sent.filter((m) => m.event === 'pusher:ping').length;
  return { pusher, pings, closes };
}

const ACTIVITY_MS = ACTIVITY_TIMEOUT_SECONDS * 1000;

describe('Pusher liveness', () => {
  it('a silent client is pinged after the activity timeout and closed 4201 when no answer comes in 30 s', async () => {
    vi.useFakeTimers();
    const { pusher, pings, closes } = pusherSocket();
    await vi.advanceTimersByTimeAsync(ACTIVITY_MS - 1);
    expect(pings()).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(pings()).toBe(1);
    await vi.advanceTimersByTimeAsync(29_999);
    expect(closes).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(closes).toEqual([{ code: 4201, reason: 'Pong reply not received' }]);
    // One ping is outstanding at a time: the next tick sends no second one.
    await vi.advanceTimersByTimeAsync(ACTIVITY_MS);
    expect(pings()).toBe(1);
    pusher.closed();
  });

  it('an answer in time keeps the socket, and activity puts off the next ping', async () => {
    vi.useFakeTimers();
    const { pusher, pings, closes } = pusherSocket();
    await vi.advanceTimersByTimeAsync(ACTIVITY_MS);
    expect(pings()).toBe(1);
    await vi.advanceTimersByTimeAsync(10_000);
    pusher.receive(JSON.stringify({ event: 'pusher:pong', data: {} }));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(closes).toEqual([]);
    // The pong (at 130 s) was activity: the tick at 240 s finds it 110 s old and sends nothing, the
    // tick at 360 s pings again.
    await vi.advanceTimersByTimeAsync(360_000 - 190_000 - 1);
    expect(pings()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(pings()).toBe(2);
    pusher.closed();
    // Closed: its timers stop (none is left to run).
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(10 * ACTIVITY_MS);
    expect(pings()).toBe(2);
    expect(closes).toEqual([]);
  });
});
