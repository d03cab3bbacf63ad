import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Deps } from '../../src/deps.js';
import { createChatService } from '../../src/resolvers/chat-service.js';

/**
 * The chat service's schedule (docs/chat.md): each job on its own interval, a slow run never
 * stacked, one set of timers however often it is started, and stop waits for a run in progress.
 * The clock is vitest's; the database a stand-in whose first call tells which job ran (each job
 * makes its first query synchronously).
 */

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Deps whose database records each job's first call and answers `answer()`. */
function recordingDeps(answer: () => Promise<never>) {
  const calls = { drain: 0, sweep: 0, queue: 0, bots: 0 };
  const warnings: string[] = [];
  const deps = {
    now: () => Date.now(),
    db: {
      // The outbox drain executes its statement; the idle sweep selects (with the conversation's id);
      // the queue retry selects distinct; the bots' deadline sweep selects (merchant and visitor only).
      execute: () => {
        calls.drain++;
        return answer();
      },
      select: (fields: Record<string, unknown> = {}) => {
        if ('id' in fields) calls.sweep++;
        else calls.bots++;
        throw new Error('database down');
      },
      selectDistinct: () => {
        calls.queue++;
        throw new Error('database down');
      },
    },
    log: { warn: (_: unknown, msg: string) => warnings.push(msg) },
  } as unknown as Deps;
  return { deps, calls, warnings };
}

const failing = () => Promise.reject(new Error('database down'));

describe('The chat service', () => {
  it('runs the outbox drain every second, the queue retry and the bots’ deadline sweep every 5 s and the idle sweep every 30 s by default', async () => {
    const { deps, calls } = recordingDeps(failing);
    const service = createChatService(deps);
    service.start();
    await vi.advanceTimersByTimeAsync(999);
    expect(calls).toEqual({ drain: 0, sweep: 0, queue: 0, bots: 0 });
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toEqual({ drain: 1, sweep: 0, queue: 0, bots: 0 });
    await vi.advanceTimersByTimeAsync(4000);
    expect(calls).toEqual({ drain: 5, sweep: 0, queue: 1, bots: 1 });
    await vi.advanceTimersByTimeAsync(25_000);
    expect(calls).toEqual({ drain: 30, sweep: 1, queue: 6, bots: 6 });
    await service.stop();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toEqual({ drain: 30, sweep: 1, queue: 6, bots: 6 });
  });

  it('takes its intervals from the options; a second start adds no timers', async () => {
    const { deps, calls } = recordingDeps(failing);
    const service = createChatService(deps, { outboxDrainMs: 10, idleSweepMs: 30, queueRetryMs: 20, botSweepMs: 60 });
    service.start();
    service.start();
    await vi.advanceTimersByTimeAsync(60);
    expect(calls).toEqual({ drain: 6, sweep: 2, queue: 3, bots: 1 });
    await service.stop();
  });

  it('a failing job is logged and runs again at its next tick', async () => {
    const { deps, calls, warnings } = recordingDeps(failing);
    const service = createChatService(deps, { outboxDrainMs: 10, idleSweepMs: 10, queueRetryMs: 10, botSweepMs: 10 });
    service.start();
    await vi.advanceTimersByTimeAsync(20);
    expect(calls).toEqual({ drain: 2, sweep: 2, queue: 2, bots: 2 });
    expect(new Set(warnings)).toEqual(
      new Set([
        'chat: outbox drain failed',
        'chat: idle sweep failed',
        'chat: queue drain failed',
        'chat: bot hand-off sweep failed',
      ]),
    );
    await service.stop();
  });

  it('a slow run is not stacked, and stop waits for it', async () => {
    let release: (value: never) => void = () => {};
    const blocked = () =>
      new Promise<never>((_, reject) => {
        release = () => reject(new Error('released'));
      });
    const { deps, calls } = recordingDeps(blocked);
    const service = createChatService(deps, { outboxDrainMs: 10, idleSweepMs: 1000, queueRetryMs: 1000 });
    service.start();
    await vi.advanceTimersByTimeAsync(100);
    expect(calls.drain).toBe(1);
    let stopped = false;
    const stopping = service.stop().then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(100);
    expect(stopped).toBe(false);
    release(undefined as never);
    await stopping;
    expect(stopped).toBe(true);
    expect(calls.drain).toBe(1);
  });
});
