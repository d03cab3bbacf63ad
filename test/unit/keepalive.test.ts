import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createKeepAlive } from '../../src/subscriptions/keepalive.js';

/** A socket that counts pings and answers them only while `answers` is true. */
class FakeSocket extends EventEmitter {
  readonly OPEN = 1;
  readyState = 1;
  pings = 0;
  terminated = false;
  constructor(public answers = true) {
    super();
  }
  ping() {
    this.pings++;
    if (this.answers) queueMicrotask(() => this.emit('pong'));
  }
  terminate() {
    this.terminated = true;
    this.readyState = 3;
  }
}

describe('keep-alive sweep (src/subscriptions/keepalive.ts)', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('pings every socket once per interval, spread over the slices, and keeps those that answer', async () => {
    const keepAlive = createKeepAlive<FakeSocket>(12_000, 12);
    try {
      const sockets = Array.from({ length: 24 }, () => new FakeSocket());
      for (const socket of sockets) keepAlive.add(socket);
      await vi.advanceTimersByTimeAsync(1000); // one slice: 2 of 24
      expect(sockets.filter((s) => s.pings === 1)).toHaveLength(2);
      await vi.advanceTimersByTimeAsync(11_000);
      expect(sockets.map((s) => s.pings)).toEqual(sockets.map(() => 1));
      await vi.advanceTimersByTimeAsync(36_000);
      expect(sockets.map((s) => s.pings)).toEqual(sockets.map(() => 4));
      expect(sockets.some((s) => s.terminated)).toBe(false);
    } finally {
      keepAlive.stop();
    }
  });

  it('terminates a socket that has not answered its ping by its next turn, and only that one', async () => {
    const keepAlive = createKeepAlive<FakeSocket>(12_000, 12);
    try {
      const [silent, alive] = [new FakeSocket(false), new FakeSocket()];
      for (const socket of [silent, alive]) keepAlive.add(socket);
      await vi.advanceTimersByTimeAsync(12_000);
      expect(silent.pings).toBe(1);
      expect(silent.terminated).toBe(false); // its ping is not due yet
      await vi.advanceTimersByTimeAsync(12_000);
      expect(silent.terminated).toBe(true);
      expect(silent.pings).toBe(1);
      expect(alive.terminated).toBe(false);
      expect(alive.pings).toBe(2);
    } finally {
      keepAlive.stop();
    }
  });

  it('a closed socket is neither pinged nor terminated; stop ends the sweep', async () => {
    const keepAlive = createKeepAlive<FakeSocket>(12_000, 12);
    const [gone, other] = [new FakeSocket(false), new FakeSocket()];
    for (const socket of [gone, other]) keepAlive.add(socket);
    await vi.advanceTimersByTimeAsync(12_000);
    keepAlive.delete(gone);
    await vi.advanceTimersByTimeAsync(24_000);
    expect(gone.pings).toBe(1);
    expect(gone.terminated).toBe(false);
    expect(other.pings).toBe(3);
    keepAlive.stop();
    await vi.advanceTimersByTimeAsync(24_000);
    expect(other.pings).toBe(3);
  });
});
