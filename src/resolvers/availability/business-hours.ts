import { z } from 'zod';
import type { BusinessHoursCalendar } from '../../db/schema.js';

/**
 * Business hours: a calendar (an IANA time zone, intervals per weekday, dated holidays and
 * exceptions) evaluated at an instant, every time it is asked — never a stored "open" flag, so
 * a daylight-saving change, a holiday or an edit is right at once (DESIGN.md "merchant side").
 *
 * Rules (docs/availability.md):
 * - An interval `{day, start, end}` is local wall-clock time, `start` inclusive, `end` exclusive;
 *   `end` before `start` runs overnight into the next day (`22:00`–`02:00`), `24:00` is midnight.
 * - An interval belongs to the day it starts on: a holiday (an ISO date) removes the intervals
 *   that start that day; an exception (`{date, start, end}`) replaces that date's weekly
 *   intervals by its own (several exceptions of one date add up).
 * - Wall-clock times a daylight-saving change skips never happen (an interval starting in the gap
 *   opens when the clock jumps past its start); repeated ones are open both times.
 */

export type { BusinessHoursCalendar };

/** What the visitor bootstrap and the open/close event tell. */
export interface BusinessHoursState {
  open: boolean;
  /** Unix milliseconds of the next opening; null when open now or never within a year. */
  nextOpenAt: number | null;
  timezone: string;
}

const DAY_MS = 86_400_000;
/** How far ahead the next change is looked for (holidays may close a calendar for months). */
const HORIZON_DAYS = 400;
/** UTC offsets lie within ±14 h: a local day's instants lie within these margins of its UTC day. */
const OFFSET_MARGIN_MS = 15 * 3_600_000;

// ---- input ---------------------------------------------------------------------------------

const hhmm = z
  .string()
  .regex(/^([01]\d|2[0-3]):[0-5]\d$|^24:00$/, 'must be a local time HH:MM (00:00 to 24:00)')
  .transform((s) => Number(s.slice(0, 2)) * 60 + Number(s.slice(3)));
const isoDate = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be an ISO date YYYY-MM-DD')
  .refine((s) => new Date(`${s}T00:00:00Z`).toISOString().startsWith(s), 'must be a real date');
const DAY_NAMES = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'];
/** ISO weekday 1 (Monday) … 7 (Sunday); 0 is Sunday too, and names (`MONDAY`, `mon`) are read. */
export const weekday = z.union([
  z
    .number()
    .int()
    .min(0)
    .max(7)
    .transform((n) => (n === 0 ? 7 : n)),
  z
    .string()
    .transform((s) => s.toLowerCase())
    .refine((s) => s.length >= 3 && DAY_NAMES.some((d) => d.startsWith(s)), 'must be a weekday')
    .transform((s) => DAY_NAMES.findIndex((d) => d.startsWith(s)) + 1),
]);
export const timeZone = z
  .string()
  .max(64)
  .refine((zone) => {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: zone });
      return true;
    } catch {
      return false;
    }
  }, 'must be an IANA time zone such as Europe/Paris');

const interval = { start: hhmm, end: hhmm };
const spans = (i: { start: number; end: number }) => i.start !== i.end && i.start < 1440;
export const calendarInput = z.object({
  timezone: timeZone,
  weekly: z
    .array(z.object({ day: weekday, ...interval }).refine(spans, 'start must differ from end and be before 24:00'))
    .max(100),
  holidays: z.array(isoDate).max(400).default([]),
  exceptions: z
    .array(z.object({ date: isoDate, ...interval }).refine(spans, 'start must differ from end and be before 24:00'))
    .max(400)
    .default([]),
});
export type CalendarInput = z.input<typeof calendarInput>;

/** The stored form of a validated calendar (minutes of the day, ISO weekdays). */
export function toCalendar(input: z.output<typeof calendarInput>): BusinessHoursCalendar {
  return {
    timezone: input.timezone,
    weekly: input.weekly.map((w) => ({ day: w.day, start: w.start, end: w.end })),
    holidays: [...new Set(input.holidays)].sort(),
    exceptions: input.exceptions.map((e) => ({ date: e.date, start: e.start, end: e.end })),
  };
}

/** `HH:MM` of minutes of the day (the form admins typed). */
export const hhmmOf = (minutes: number) =>
  `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;

// ---- wall clock ----------------------------------------------------------------------------

const formats = new Map<string, Intl.DateTimeFormat>();
function formatOf(zone: string) {
  let f = formats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formats.set(zone, f);
  }
  return f;
}

/** The local wall clock of an instant: day number (days since 1970-01-01 of the local date) and ms into that day. */
export function wallClock(zone: string, ms: number): { day: number; msOfDay: number } {
  const p: Record<string, number> = {};
  for (const part of formatOf(zone).formatToParts(ms)) if (part.type !== 'literal') p[part.type] = Number(part.value);
  const local = Date.UTC(p.year ?? 1970, (p.month ?? 1) - 1, p.day ?? 1, p.hour ?? 0, p.minute ?? 0, p.second ?? 0);
  const withMs = local + (((ms % 1000) + 1000) % 1000);
  const day = Math.floor(withMs / DAY_MS);
  return { day, msOfDay: withMs - day * DAY_MS };
}

/** UTC offset (ms) of the zone at an instant. */
const offsetAt = (zone: string, ms: number) => {
  const w = wallClock(zone, ms);
  return w.day * DAY_MS + w.msOfDay - ms;
};

const isoOfDay = (day: number) => new Date(day * DAY_MS).toISOString().slice(0, 10);
/** ISO weekday (1 Monday … 7 Sunday) of a day number. */
const weekdayOf = (day: number) => ((new Date(day * DAY_MS).getUTCDay() + 6) % 7) + 1;

// ---- evaluation ----------------------------------------------------------------------------

/** The intervals that start on a local day: none on a holiday, the exceptions of that date, else the weekly ones. */
function intervalsStarting(cal: BusinessHoursCalendar, day: number): { start: number; end: number }[] {
  const iso = isoOfDay(day);
  if (cal.holidays.includes(iso)) return [];
  const exceptions = cal.exceptions.filter((e) => e.date === iso);
  if (exceptions.length > 0) return exceptions;
  const dow = weekdayOf(day);
  return cal.weekly.filter((w) => w.day === dow);
}

/** Whether the calendar is open at an instant (Unix ms). */
export function isOpenAt(cal: BusinessHoursCalendar, ms: number): boolean {
  const { day, msOfDay } = wallClock(cal.timezone, ms);
  const minute = msOfDay / 60_000;
  for (const i of intervalsStarting(cal, day)) {
    const overnight = i.end <= i.start;
    if (minute >= i.start && (overnight || minute < i.end)) return true;
  }
  for (const i of intervalsStarting(cal, day - 1)) if (i.end <= i.start && minute < i.end) return true;
  return false;
}

/**
 * Instants around a local day where the open state may change: each interval edge of the
 * calendar at that day's wall clock (both readings of a repeated hour), and the day's
 * daylight-saving transitions (where the clock jumps over an edge in a skipped hour).
 */
function candidatesOfDay(cal: BusinessHoursCalendar, day: number, edges: number[]): number[] {
  const zone = cal.timezone;
  const from = day * DAY_MS - OFFSET_MARGIN_MS;
  const to = (day + 1) * DAY_MS + OFFSET_MARGIN_MS;
  const offsets = new Set([offsetAt(zone, from), offsetAt(zone, to)]);
  const out: number[] = [];
  for (const minute of edges) {
    const local = day * DAY_MS + minute * 60_000;
    for (const offset of offsets) {
      const instant = local - offset;
      const w = wallClock(zone, instant);
      if (w.day * DAY_MS + w.msOfDay === local) out.push(instant);
    }
  }
  if (offsets.size > 1) out.push(transitionBetween(zone, from, to));
  return out;
}

/** The first instant (to the second) in (from, to] whose offset is `to`'s. */
function transitionBetween(zone: string, from: number, to: number): number {
  const target = offsetAt(zone, to);
  let lo = Math.floor(from / 1000);
  let hi = Math.ceil(to / 1000);
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (offsetAt(zone, mid * 1000) === target) hi = mid;
    else lo = mid;
  }
  return hi * 1000;
}

/**
 * The first instant after `ms` at which the open state differs from the state at `ms`; null
 * when it does not change within the horizon (a calendar with no interval never opens).
 */
export function nextChangeAt(cal: BusinessHoursCalendar, ms: number): number | null {
  if (cal.weekly.length === 0 && cal.exceptions.length === 0) return null;
  const openNow = isOpenAt(cal, ms);
  const edges = [...new Set([0, ...[...cal.weekly, ...cal.exceptions].flatMap((i) => [i.start, i.end % 1440])])].sort(
    (a, b) => a - b,
  );
  const first = wallClock(cal.timezone, ms).day - 1;
  let pending: number[] = [];
  for (let day = first; day < first + HORIZON_DAYS; ) {
    for (let k = 0; k < 7; k++, day++) pending.push(...candidatesOfDay(cal, day, edges));
    // Candidates of later days all lie after this instant: those before it are final.
    const settled = day * DAY_MS - OFFSET_MARGIN_MS;
    pending.sort((a, b) => a - b);
    const ready = pending.filter((c) => c < settled);
    pending = pending.filter((c) => c >= settled);
    for (const c of ready) if (c > ms && isOpenAt(cal, c) !== openNow) return c;
  }
  return null;
}

/** The state as clients get it (the bootstrap, the event): `nextOpenAt` in Unix seconds. */
export interface BusinessHoursView {
  open: boolean;
  /** Unix seconds of the next opening; null when open now or not opening within a year. */
  nextOpenAt: number | null;
  timezone: string;
}

/** The calendar's state at `ms`, as clients get it. */
export function businessHoursAt(cal: BusinessHoursCalendar | null | undefined, ms: number): BusinessHoursView {
  const state = evaluateBusinessHours(cal, ms);
  return { ...state, nextOpenAt: state.nextOpenAt === null ? null : Math.floor(state.nextOpenAt / 1000) };
}

/** Open now, and when it opens next (ms) when closed. No calendar: always open, in UTC. */
export function evaluateBusinessHours(cal: BusinessHoursCalendar | null | undefined, ms: number): BusinessHoursState {
  if (!cal) return { open: true, nextOpenAt: null, timezone: 'UTC' };
  const open = isOpenAt(cal, ms);
  return { open, nextOpenAt: open ? null : nextChangeAt(cal, ms), timezone: cal.timezone };
}
