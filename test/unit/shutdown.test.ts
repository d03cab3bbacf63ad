import { afterEach, describe, expect, it, vi } from 'vitest';
import type { WebSocket, WebSocketServer } from 'ws';
import type { Connection } from '../../src/subscriptions/connection.js';
import { closeEverySocket, type HeldSocket } from '../../src/subscriptions/shutdown.js';

// Graceful shutdown of a transport's sockets (src/subscriptions/shutdown.ts) over recording
// sockets and fake timers: who is ended how, and who is cut after the close handshake's time.

afterEach(() => {
  vi.useRealTimers();
});

function recordingSocket(name: string, log: string[]) {
  return {
    close: (code: number, reason: string) => log.push(`${name} close ${code} ${reason}`),
    terminate: () => log.push(`${name} terminate`),
  } as unknown as WebSocket;
}

function recordingConnection(name: string, log: string[]) {
  return { end: (why: string, reason: string) => log.push(`${name} end ${why} ${reason}`) } as unknown as Connection;
}

describe('closeEverySocket', () => {
  it('ends each connection going_away, closes a socket without one with the code, cuts one that never finishes', async () => {
    vi.useFakeTimers();
    const log: string[] = [];
    const [withConnection, early, unknown, stuck] = ['with', 'early', 'unknown', 'stuck'].map((n) =>
      recordingSocket(n, log),
    );
    let finishWith = () => {};
    const held = new Map<WebSocket | undefined, HeldSocket>([
      [
        withConnection,
        { connection: recordingConnection('with', log), finished: new Promise((r) => (finishWith = r)) },
      ],
      // Held but no connection yet (still connecting); its close handling already ran.
      [early, { finished: Promise.resolve() }],
      // Finishes never: cut after the handshake's time.
      [stuck, { connection: recordingConnection('stuck', log), finished: new Promise(() => {}) }],
    ]);
    const wss = { clients: new Set([withConnection, early, unknown, stuck]) } as unknown as WebSocketServer;
    let done = false;
    void closeEverySocket(wss, (socket) => held.get(socket), 4200).then(() => {
      done = true;
    });
    expect(log).toEqual([
      'with end going_away Server shutting down',
      'early close 4200 Server shutting down',
      'unknown close 4200 Server shutting down',
      'stuck end going_away Server shutting down',
    ]);
    finishWith();
    await vi.advanceTimersByTimeAsync(2999);
    expect(log.filter((l) => l.endsWith('terminate'))).toEqual([]);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    // Only the socket that never finished is cut; a finished one's timer was cleared.
    expect(log.filter((l) => l.endsWith('terminate'))).toEqual(['stuck terminate']);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(log.filter((l) => l.endsWith('terminate'))).toEqual(['stuck terminate']);
    expect(done).toBe(false);
  });

  it('resolves once every held socket finished (one without an entry at once)', async () => {
    const log: string[] = [];
    const a = recordingSocket('a', log);
    const b = recordingSocket('b', log);
    let finishA = () => {};
    const held = new Map<WebSocket, HeldSocket>([[a, { finished: new Promise((r) => (finishA = r)) }]]);
    const wss = { clients: new Set([a, b]) } as unknown as WebSocketServer;
    let done = false;
    const closing = closeEverySocket(wss, (socket) => held.get(socket), 1001).then(() => {
      done = true;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(done).toBe(false);
    finishA();
    await closing;
    expect(log).toEqual(['a close 1001 Server shutting down', 'b close 1001 Server shutting down']);
    // Resolved without waiting for the cut (3 s).
    expect(done).toBe(true);
  });
});
