import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type BusinessHoursCalendar,
  calendarInput,
  evaluateBusinessHours,
  isOpenAt,
  nextChangeAt,
  toCalendar,
} from '../../src/resolvers/availability/business-hours.js';

/**
 * Business hours evaluated from the calendar (issue 31, docs/availability.md). The oracle below
 * reads the wall clock with a different Intl call (`toLocaleString` parsed back) and walks the
 * clock in steps, so the evaluator's own arithmetic (offsets, transitions, candidates) is checked
 * against an independent reading.
 */

const MIN = 60_000;
const HOUR = 60 * MIN;

/** Local date (ISO), ISO weekday and minute of the day, read by another Intl path than the evaluator's. */
const oracleFormats = new Map<string, Intl.DateTimeFormat>();
function oracleWall(zone: string, ms: number) {
  let f = oracleFormats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('sv-SE', { timeZone: zone, hourCycle: 'h23', dateStyle: 'short', timeStyle: 'medium' });
    oracleFormats.set(zone, f);
  }
  const s = f.format(ms); // "2026-03-08 02:30:00"
  const [date = '', time = ''] = s.split(' ');
  const [h = 0, m = 0] = time.split(':').map(Number);
  const dow = ((new Date(`${date}T00:00:00Z`).getUTCDay() + 6) % 7) + 1;
  return { date, dow, minute: h * 60 + m };
}
const prevDate = (iso: string) => new Date(Date.parse(`${iso}T00:00:00Z`) - 86_400_000).toISOString().slice(0, 10);
const prevDow = (dow: number) => (dow === 1 ? 7 : dow - 1);

/** The spec of docs/availability.md, written directly. */
function oracleOpen(cal: BusinessHoursCalendar, ms: number): boolean {
  const { date, dow, minute } = oracleWall(cal.timezone, ms);
  const starting = (d: string, w: number) => {
    if (cal.holidays.includes(d)) return [];
    const ex = cal.exceptions.filter((e) => e.date === d);
    return ex.length ? ex : cal.weekly.filter((i) => i.day === w);
  };
  if (starting(date, dow).some((i) => minute >= i.start && (i.end <= i.start || minute < i.end))) return true;
  return starting(prevDate(date), prevDow(dow)).some((i) => i.end <= i.start && minute < i.end);
}

/** Zones with daylight-saving changes (north, south, half-hour) and one without. */
const ZONES = [
  'America/New_York',
  'Europe/Paris',
  'Australia/Sydney',
  'America/Santiago',
  'Australia/Lord_Howe',
  'Europe/London',
  'Asia/Kolkata',
  'Pacific/Chatham',
];
/** DST changes of 2026 in those zones (UTC), and around them the instants the tests pick. */
const DST_CHANGES = [
  '2026-03-08T07:00:00Z', // New York spring forward
  '2026-11-01T06:00:00Z', // New York fall back
  '2026-03-29T01:00:00Z', // Paris, London spring forward
  '2026-10-25T01:00:00Z', // Paris, London fall back
  '2026-04-04T16:00:00Z', // Sydney fall back
  '2026-10-03T16:00:00Z', // Sydney spring forward
  '2026-04-05T03:00:00Z', // Santiago fall back
  '2026-09-06T04:00:00Z', // Santiago spring forward
  '2026-04-04T15:00:00Z', // Lord Howe (30 min)
  '2026-04-04T14:00:00Z', // Chatham
].map(Date.parse);

const quarter = fc.integer({ min: 0, max: 95 }).map((q) => q * 15);
const intervalArb = fc
  .record({ day: fc.integer({ min: 1, max: 7 }), start: quarter, end: quarter })
  .filter((i) => i.start !== i.end);
const calendarArb = fc.record({
  timezone: fc.constantFrom(...ZONES),
  weekly: fc.array(intervalArb, { minLength: 1, maxLength: 6 }),
  holidays: fc.array(fc.integer({ min: -4, max: 4 }), { maxLength: 3 }),
  exceptions: fc.array(
    fc
      .record({ offset: fc.integer({ min: -4, max: 4 }), start: quarter, end: quarter })
      .filter((e) => e.start !== e.end),
    { maxLength: 2 },
  ),
});
const instantArb = fc.record({
  change: fc.constantFrom(...DST_CHANGES),
  shift: fc.integer({ min: -72 * 4, max: 72 * 4 }).map((q) => q * 15 * MIN),
  jitter: fc.integer({ min: 0, max: 14 * MIN }),
});

type GeneratedCalendar = typeof calendarArb extends fc.Arbitrary<infer T> ? T : never;

/** Holidays and exceptions dated relative to the instant, so they fall where the test looks. */
function build(c: GeneratedCalendar, at: number): BusinessHoursCalendar {
  const iso = (d: number) => new Date(at + d * 86_400_000).toISOString().slice(0, 10);
  return {
    timezone: c.timezone,
    weekly: c.weekly,
    holidays: c.holidays.map(iso),
    exceptions: c.exceptions.map((e) => ({ date: iso(e.offset), start: e.start, end: e.end })),
  };
}

describe('business hours: evaluation (property-based, across DST changes in 8 zones)', () => {
  it('open now is what the calendar says at the local wall clock', () => {
    fc.assert(
      fc.property(calendarArb, instantArb, (c, { change, shift, jitter }) => {
        const at = change + shift + jitter;
        const cal = build(c, at);
        expect(isOpenAt(cal, at)).toBe(oracleOpen(cal, at));
      }),
      { numRuns: 400 },
    );
  });

  it('the next change is the first instant the state differs, and nothing changes before it', () => {
    fc.assert(
      fc.property(calendarArb, instantArb, (c, { change, shift, jitter }) => {
        const at = change + shift + jitter;
        const cal = build(c, at);
        const open = oracleOpen(cal, at);
        const next = nextChangeAt(cal, at);
        const horizon = at + 4 * 24 * HOUR;
        // Step the clock by 5 minutes (every edge is on a quarter hour; zones move by 30 or 60 min).
        const firstStep = Math.ceil((at + 1) / (5 * MIN)) * 5 * MIN;
        // The first step whose state differs, checked once (an expect per step cost more than the oracle).
        let changedAt: string | undefined;
        for (let t = firstStep; t < Math.min(next ?? horizon, horizon) && !changedAt; t += 5 * MIN)
          if (oracleOpen(cal, t) !== open) changedAt = new Date(t).toISOString();
        expect(changedAt, `state changed at ${changedAt} before ${next}`).toBeUndefined();
        if (next !== null && next < horizon) {
          expect(next).toBeGreaterThan(at);
          expect(oracleOpen(cal, next)).toBe(!open);
          expect(oracleOpen(cal, next - 1000)).toBe(open);
        }
      }),
      { numRuns: 120 },
    );
  });

  it('a closed calendar tells when it opens next; an open one tells null', () => {
    fc.assert(
      fc.property(calendarArb, instantArb, (c, { change, shift }) => {
        const at = change + shift;
        const cal = build(c, at);
        const state = evaluateBusinessHours(cal, at);
        expect(state.timezone).toBe(cal.timezone);
        if (state.open) expect(state.nextOpenAt).toBeNull();
        else if (state.nextOpenAt !== null) expect(oracleOpen(cal, state.nextOpenAt)).toBe(true);
      }),
      { numRuns: 200 },
    );
  });
});

describe('business hours: the rules, by example', () => {
  const cal = (over: Partial<BusinessHoursCalendar>): BusinessHoursCalendar => ({
    timezone: 'Europe/Paris',
    weekly: [],
    holidays: [],
    exceptions: [],
    ...over,
  });

  it('an overnight span runs into the next morning and belongs to the day it starts', () => {
    // Friday 22:00 – 02:00, Paris (UTC+1 in January). 2027-01-08 is a Friday.
    const c = cal({ weekly: [{ day: 5, start: 22 * 60, end: 2 * 60 }] });
    expect(isOpenAt(c, Date.parse('2027-01-08T21:30:00Z'))).toBe(true); // Fri 22:30
    expect(isOpenAt(c, Date.parse('2027-01-09T00:59:00Z'))).toBe(true); // Sat 01:59
    expect(isOpenAt(c, Date.parse('2027-01-09T01:00:00Z'))).toBe(false); // Sat 02:00
    // A holiday on the Saturday keeps the Friday night; one on the Friday removes it.
    expect(isOpenAt({ ...c, holidays: ['2027-01-09'] }, Date.parse('2027-01-09T00:30:00Z'))).toBe(true);
    expect(isOpenAt({ ...c, holidays: ['2027-01-08'] }, Date.parse('2027-01-09T00:30:00Z'))).toBe(false);
  });

  it('an interval in the hour a spring-forward skips opens when the clock jumps past its start', () => {
    // New York, Sunday 2026-03-08: 02:00 jumps to 03:00. Open 02:30 – 04:00.
    const c = cal({ timezone: 'America/New_York', weekly: [{ day: 7, start: 150, end: 240 }] });
    const before = Date.parse('2026-03-08T06:59:00Z'); // 01:59 EST
    expect(isOpenAt(c, before)).toBe(false);
    expect(evaluateBusinessHours(c, before).nextOpenAt).toBe(Date.parse('2026-03-08T07:00:00Z')); // 03:00 EDT
  });

  it('a weekday opening is told in the next week across a fall-back change', () => {
    // Paris, Monday 09:00 – 17:00; asked on Saturday 2026-10-24 (the clocks go back that night).
    const c = cal({ weekly: [{ day: 1, start: 9 * 60, end: 17 * 60 }] });
    const state = evaluateBusinessHours(c, Date.parse('2026-10-24T12:00:00Z'));
    expect(state).toEqual({ open: false, nextOpenAt: Date.parse('2026-10-26T08:00:00Z'), timezone: 'Europe/Paris' });
  });

  it('an exception replaces the weekday, a holiday closes it, and no calendar is always open', () => {
    const c = cal({
      weekly: [{ day: 1, start: 9 * 60, end: 17 * 60 }],
      exceptions: [{ date: '2027-01-11', start: 12 * 60, end: 13 * 60 }],
      holidays: ['2027-01-18'],
    });
    expect(isOpenAt(c, Date.parse('2027-01-11T09:00:00Z'))).toBe(false); // 10:00, exception day
    expect(isOpenAt(c, Date.parse('2027-01-11T11:30:00Z'))).toBe(true); // 12:30
    expect(isOpenAt(c, Date.parse('2027-01-18T11:30:00Z'))).toBe(false); // holiday
    expect(evaluateBusinessHours(c, Date.parse('2027-01-17T12:00:00Z')).nextOpenAt).toBe(
      Date.parse('2027-01-25T08:00:00Z'),
    );
    expect(evaluateBusinessHours(null, 0)).toEqual({ open: true, nextOpenAt: null, timezone: 'UTC' });
    expect(evaluateBusinessHours(cal({}), 0)).toEqual({ open: false, nextOpenAt: null, timezone: 'Europe/Paris' });
  });

  it('input: HH:MM local times, weekdays by number or name, ISO dates, IANA zones', () => {
    const parsed = toCalendar(
      calendarInput.parse({
        timezone: 'Asia/Tokyo',
        weekly: [
          { day: 'MONDAY', start: '09:00', end: '24:00' },
          { day: 0, start: '22:00', end: '02:30' },
        ],
        holidays: ['2027-01-01', '2027-01-01'],
      }),
    );
    expect(parsed).toEqual({
      timezone: 'Asia/Tokyo',
      weekly: [
        { day: 1, start: 540, end: 1440 },
        { day: 7, start: 1320, end: 150 },
      ],
      holidays: ['2027-01-01'],
      exceptions: [],
    });
    for (const bad of [
      { timezone: 'Mars/Olympus', weekly: [] },
      { timezone: 'UTC', weekly: [{ day: 1, start: '9:00', end: '10:00' }] },
      { timezone: 'UTC', weekly: [{ day: 8, start: '09:00', end: '10:00' }] },
      { timezone: 'UTC', weekly: [{ day: 1, start: '10:00', end: '10:00' }] },
      { timezone: 'UTC', weekly: [], holidays: ['2027-02-30'] },
    ])
      expect(calendarInput.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
  });
});
