import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { DomainError } from '../../../src/errors.js';
import { createSendGate } from '../../../src/resolvers/budgets/chat.js';
import { createFairShare, eventLoopLoad, type LoadSignal } from '../../../src/resolvers/budgets/fair-share.js';

/**
 * The fair share of a busy instance (fair-share.ts) and the send gate built on it (chat.ts
 * `createSendGate`), judged directly: the event loop's lateness probe on fake timers and a
 * `performance.now` the test moves, the share's window on a clock the test moves.
 */

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe('eventLoopLoad: busy when the event loop ran, on average over the last 10 samples, at least the threshold late', () => {
  /**
   * A probe whose interval fires only when `tick` says, each time `lateMs` after it was due (the
   * probe's clock, `performance.now`, moved by the test; negative: early).
   */
  function probe(thresholdMs: number) {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    let clock = 1_000;
    vi.spyOn(performance, 'now').mockImplementation(() => clock);
    const load = eventLoopLoad(thresholdMs);
    const tick = (...lateMs: number[]) => {
      for (const late of lateMs) {
        clock += 50 + late;
        vi.advanceTimersByTime(50); // one run of the 50 ms interval
      }
    };
    return { load, tick };
  }
  const onTime = (n: number) => Array.from({ length: n }, () => 0);

  it('a threshold of 0 (or below) is busy all the time, with no probe running', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    for (const threshold of [0, -5]) {
      const load = eventLoopLoad(threshold);
      expect(load.busy()).toBe(true);
      expect(vi.getTimerCount()).toBe(0);
      load.stop();
    }
  });

  it('is not busy before the first sample, nor while the loop runs on time', () => {
    const { load, tick } = probe(20);
    expect(vi.getTimerCount()).toBe(1);
    expect(load.busy()).toBe(false);
    tick(0);
    expect(load.busy()).toBe(false);
    tick(...onTime(5));
    expect(load.busy()).toBe(false);
  });

  it('busy from a mean lateness equal to the threshold, not below it', () => {
    const { load, tick } = probe(20);
    tick(0, 30); // mean 15
    expect(load.busy()).toBe(false);
    tick(30); // mean 20
    expect(load.busy()).toBe(true);
    const late = probe(20);
    late.tick(25); // one sample, 25 ms late
    expect(late.load.busy()).toBe(true);
  });

  it('an early run counts as on time, not as negative lateness', () => {
    const { load, tick } = probe(20);
    tick(-40, 40); // [0, 40]: mean 20 (a negative sample would make it 0)
    expect(load.busy()).toBe(true);
  });

  it('the mean is over the last 10 samples: a late run weighs for 10 samples, then is forgotten', () => {
    const { load, tick } = probe(20);
    tick(300, ...onTime(9)); // [300, 0 × 9]: mean 30
    expect(load.busy()).toBe(true);
    tick(0); // the 300 leaves the window: mean 0
    expect(load.busy()).toBe(false);
  });

  it('each sample is measured from the previous run, not from the start', () => {
    const { load, tick } = probe(20);
    tick(100); // 100 ms late; the next run is due 50 ms after this one
    tick(...onTime(9)); // mean 10
    expect(load.busy()).toBe(false);
  });

  it('stop ends the probe: no timer left, and no sample taken after it', () => {
    const { load, tick } = probe(20);
    tick(0);
    load.stop();
    expect(vi.getTimerCount()).toBe(0);
    tick(500);
    expect(load.busy()).toBe(false);
  });
});

/** A load signal the test turns on and off. */
function switchable(busy = true) {
  const state = { busy };
  const load: LoadSignal = { busy: () => state.busy, stop: () => {} };
  return { state, load };
}

/** A fair share on a clock the test moves (`clock.t`), the instance busy unless `state.busy` is unset. */
function share(what = 'test tenants') {
  const clock = { t: 0 };
  const { state, load } = switchable();
  const fair = createFairShare({ load, now: () => clock.t, what });
  /** `n` requests of `tenant` admitted (or refused), and `done` of them recorded as done. */
  const ask = (tenant: string, n: number, done = 0) => {
    for (let i = 0; i < n; i++) fair.admit(tenant);
    for (let i = 0; i < done; i++) fair.record(tenant);
  };
  return { fair, clock, state, ask };
}

const busyRefusal = (what: string) => ({
  code: 'RATE_LIMITED',
  message: `The instance is busy and ${what} have more than their share of it: retry in 1 s`,
  retryAfterSeconds: 1,
});

describe('createFairShare: refusal (what admit answers)', () => {
  it('refuses a tenant that asked more than an equal share and more than it got, having got an equal share of the work', () => {
    const { fair, ask } = share();
    ask('other', 1, 1);
    ask('flood', 3, 1); // asks 3 of 4, got 1 of 2: exactly an equal share of the work
    const refused = fair.refusal('flood');
    expect(refused).toBeInstanceOf(DomainError);
    expect(refused).toMatchObject(busyRefusal('test tenants'));
    expect(fair.refusal('other')).toBeUndefined();
  });

  it('admit throws that refusal and still counts the request; refusal counts nothing', () => {
    const { fair, ask } = share();
    ask('other', 1, 1);
    ask('flood', 3, 1);
    for (let i = 0; i < 5; i++) fair.refusal('other');
    // The other tenant's refusal() calls did not count: it still asks less than its share.
    expect(fair.overShare('other')).toBe(false);
    expect(() => fair.admit('flood')).toThrow(expect.objectContaining(busyRefusal('test tenants')));
    // Two more asks of the other tenant: 3 of 7. The refused request counted: the flood's 4 of 7
    // are over an equal share (uncounted, its 3 of 6 would be exactly one).
    ask('other', 2);
    expect(fair.overShare('other')).toBe(false);
    expect(fair.overShare('flood')).toBe(true);
  });

  it('refuses nobody when the instance is not busy', () => {
    const { fair, state, ask } = share();
    ask('other', 1, 1);
    ask('flood', 3, 1);
    state.busy = false;
    expect(fair.refusal('flood')).toBeUndefined();
    expect(() => fair.admit('flood')).not.toThrow();
    state.busy = true;
    expect(fair.refusal('flood')).toMatchObject({ code: 'RATE_LIMITED' });
  });

  it('a tenant asking exactly an equal share is not refused', () => {
    const { fair, ask } = share();
    ask('a', 2, 1);
    ask('b', 2, 1); // each asks 2 of 4, got 1 of 2
    expect(fair.refusal('a')).toBeUndefined();
    expect(fair.refusal('b')).toBeUndefined();
  });

  it('a tenant that got all it asked is not refused, however many it asked', () => {
    const { fair, ask } = share();
    ask('other', 1, 1);
    ask('flood', 3, 3);
    expect(fair.refusal('flood')).toBeUndefined();
    fair.admit('flood'); // 4 asked, 3 got: now it asks more than it gets
    expect(fair.refusal('flood')).toMatchObject({ code: 'RATE_LIMITED' });
  });

  it('a tenant that got nothing yet is not refused', () => {
    const { fair, ask } = share();
    ask('other', 1);
    ask('flood', 3);
    expect(fair.refusal('flood')).toBeUndefined();
  });

  it('a tenant that got less than an equal share of the work is not refused', () => {
    const { fair, ask } = share();
    ask('other', 2, 2);
    ask('flood', 4, 1); // asks 4 of 6, got 1 of 3 (an equal share is 1.5)
    expect(fair.refusal('flood')).toBeUndefined();
    fair.record('flood'); // got 2 of 4: an equal share
    expect(fair.refusal('flood')).toMatchObject({ code: 'RATE_LIMITED' });
  });

  it('a tenant alone is never refused, nor over its share', () => {
    const { fair, ask } = share();
    ask('alone', 10, 1);
    expect(fair.refusal('alone')).toBeUndefined();
    expect(fair.overShare('alone')).toBe(false);
  });

  it('an equal share is of the tenants asking: with three tenants, 2 of 6 asks is within it, 3 of 7 over it', () => {
    const { fair, ask } = share();
    ask('a', 2, 1);
    ask('b', 2, 1);
    ask('c', 2, 1);
    expect(fair.refusal('c')).toBeUndefined();
    expect(fair.overShare('c')).toBe(false);
    fair.admit('c');
    expect(fair.overShare('c')).toBe(true);
    expect(fair.refusal('c')).toMatchObject({ code: 'RATE_LIMITED' });
  });
});

describe('createFairShare: overShare (whose work waits for the others’)', () => {
  it('over an equal share of the asks, refused or not; exactly an equal share is not over', () => {
    const { fair, ask } = share();
    ask('a', 2);
    ask('b', 2);
    expect([fair.overShare('a'), fair.overShare('b')]).toEqual([false, false]);
    ask('a', 1);
    expect([fair.overShare('a'), fair.overShare('b')]).toEqual([true, false]);
  });

  it('nobody is over its share while the instance is not busy', () => {
    const { fair, state, ask } = share();
    ask('a', 3);
    ask('b', 1);
    state.busy = false;
    expect(fair.overShare('a')).toBe(false);
  });

  it('a tenant never seen is not over its share', () => {
    const { fair, ask } = share();
    ask('a', 3);
    ask('b', 1);
    expect(fair.overShare('c')).toBe(false);
  });
});

describe('createFairShare: the window is the current 1 s bucket and the one before', () => {
  it('asks count until the bucket after next starts', () => {
    const { fair, clock, ask } = share();
    ask('a', 3);
    ask('b', 1);
    for (const t of [0, 999, 1000, 1999]) {
      clock.t = t;
      expect([t, fair.overShare('a')]).toEqual([t, true]);
    }
    clock.t = 2000;
    expect(fair.overShare('a')).toBe(false);
  });

  it('after a whole bucket with nothing asked, everything before it is forgotten', () => {
    const { fair, clock, ask } = share();
    ask('a', 3);
    ask('b', 1);
    clock.t = 2000; // the first look after t = 0: the bucket 1000–2000 was empty
    expect(fair.overShare('a')).toBe(false);
    expect(fair.overShare('b')).toBe(false);
  });

  it('a tenant’s asks in both buckets add up, and the totals over both buckets too', () => {
    const { fair, clock, ask } = share();
    ask('a', 2);
    ask('b', 2);
    clock.t = 1000;
    ask('a', 1);
    // a: 2 + 1 of 5 asks: over; b: 2 of 5: within.
    expect([fair.overShare('a'), fair.overShare('b')]).toEqual([true, false]);
    ask('b', 2);
    // a: 3 of 7, b: 4 of 7.
    expect([fair.overShare('a'), fair.overShare('b')]).toEqual([false, true]);
  });

  it('buckets start on whole seconds from the first: asks at 1.5 s still count at 2 s, those at 0 s no longer', () => {
    const { fair, clock, ask } = share();
    ask('b', 5);
    clock.t = 1500;
    ask('a', 3);
    ask('b', 1);
    // Window 0–2000: a 3 of 9, within.
    expect(fair.overShare('a')).toBe(false);
    clock.t = 2000;
    // Window 1000–3000: a 3 of 4, over.
    expect(fair.overShare('a')).toBe(true);
    clock.t = 2999;
    expect(fair.overShare('a')).toBe(true);
    clock.t = 3000;
    expect(fair.overShare('a')).toBe(false);
  });

  it('work done is counted over the same window', () => {
    const { fair, clock, ask } = share();
    ask('other', 1, 1);
    ask('flood', 3, 1);
    clock.t = 1000;
    expect(fair.refusal('flood')).toMatchObject({ code: 'RATE_LIMITED' });
    // At 2 s the asks and the work of the first second are forgotten.
    clock.t = 2000;
    ask('other', 1, 1);
    ask('flood', 3);
    expect(fair.refusal('flood')).toBeUndefined(); // got nothing in the window
  });
});

describe('createSendGate: the fair share and the slots of the visitor sends of each merchant', () => {
  const defaults = loadConfig({ NODE_ENV: 'test' }).chatLimits;
  /** A gate over `inFlight` slots and `queued` places per merchant, busy as `state.busy` says, on a clock that stands still. */
  function gate(inFlight = 4, queued = 16) {
    const { state, load } = switchable();
    const limits = { ...defaults, merchantSendsInFlight: inFlight, merchantSendsQueued: queued };
    const sends = createSendGate(limits, load, () => 0);
    return { sends, state };
  }
  /** A send being stored until `finish` is called. */
  function storing<T>(value: T) {
    let finish: () => void = () => {};
    const started = { yes: false };
    const work = () =>
      new Promise<T>((resolve) => {
        started.yes = true;
        finish = () => resolve(value);
      });
    return { work, started, finish: () => finish() };
  }

  it('admit refuses a merchant over its share with the words of the merchant’s visitors; its sends count once stored', async () => {
    const { sends } = gate();
    sends.admit('other');
    await sends.run('other', async () => 'o');
    for (let i = 0; i < 3; i++) sends.admit('flood');
    // Nothing stored for it yet: not refused.
    expect(() => sends.admit('flood')).not.toThrow();
    expect(await sends.run('flood', async () => 'f')).toBe('f');
    expect(() => sends.admit('flood')).toThrow(expect.objectContaining(busyRefusal('this merchant’s visitors')));
    expect(() => sends.admit('other')).not.toThrow();
  });

  it('refuseEarly refuses (and counts) what admit would refuse, and counts nothing otherwise', async () => {
    const { sends } = gate();
    sends.admit('other');
    await sends.run('other', async () => undefined);
    sends.admit('flood');
    sends.admit('flood');
    await sends.run('flood', async () => undefined);
    // flood asked 2 of 3, got 1 of 2: refused.
    for (let i = 0; i < 3; i++) expect(() => sends.refuseEarly('other')).not.toThrow();
    // The other merchant's early checks counted nothing: the flood is still over its share.
    expect(() => sends.refuseEarly('flood')).toThrow(expect.objectContaining(busyRefusal('this merchant’s visitors')));
    // That refusal was counted: flood 3 of 4 asks, still refused by admit too.
    expect(() => sends.admit('flood')).toThrow(expect.objectContaining({ code: 'RATE_LIMITED' }));
    sends.admit('other');
    sends.admit('other');
    // other 3 of 7: the flood's 4 are still over an equal share.
    expect(() => sends.refuseEarly('flood')).toThrow(expect.objectContaining({ code: 'RATE_LIMITED' }));
  });

  it('run answers the work’s value; past the merchant’s slots a send waits, past its line it is refused at once', async () => {
    const { sends } = gate(1, 1);
    const first = storing('first');
    const second = storing('second');
    const running = sends.run('m', first.work);
    const waiting = sends.run('m', second.work);
    expect(sends.load()).toEqual({ running: 1, waiting: 1 });
    await expect(sends.run('m', async () => 'third')).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: 'Sending for this merchant’s visitors is busy (1 jobs already waiting), retry in 5 s',
      retryAfterSeconds: 5,
    });
    // Another merchant has slots of its own.
    expect(await sends.run('other', async () => 'other')).toBe('other');
    expect(second.started.yes).toBe(false);
    first.finish();
    expect(await running).toBe('first');
    await vi.waitFor(() => expect(second.started.yes).toBe(true));
    expect(sends.load()).toEqual({ running: 1, waiting: 0 });
    second.finish();
    expect(await waiting).toBe('second');
    expect(sends.load()).toEqual({ running: 0, waiting: 0 });
  });

  it('on a busy instance a merchant over its share stores only once no other send is being stored', async () => {
    const { sends } = gate();
    sends.admit('other');
    for (let i = 0; i < 3; i++) sends.admit('flood');
    const other = storing('o');
    const otherRun = sends.run('other', other.work);
    const flood = storing('f');
    const floodRun = sends.run('flood', flood.work);
    expect(flood.started.yes).toBe(false);
    expect(sends.load()).toEqual({ running: 1, waiting: 1 });
    other.finish();
    await otherRun;
    await vi.waitFor(() => expect(flood.started.yes).toBe(true));
    flood.finish();
    expect(await floodRun).toBe('f');
  });

  it('a merchant within its share is not held back on a busy instance', async () => {
    const { sends } = gate();
    sends.admit('flood');
    sends.admit('other');
    const flood = storing('f');
    const floodRun = sends.run('flood', flood.work);
    const other = storing('o');
    const otherRun = sends.run('other', other.work);
    expect([flood.started.yes, other.started.yes]).toEqual([true, true]);
    flood.finish();
    other.finish();
    expect(await Promise.all([floodRun, otherRun])).toEqual(['f', 'o']);
  });
});
