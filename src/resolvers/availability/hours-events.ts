import { and, eq, inArray, isNotNull, ne } from 'drizzle-orm';
import {
  agentGroups,
  agents,
  type BusinessHoursCalendar,
  conversations,
  merchants,
  visitors,
} from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { agentChannel, globalChannel, publishQuietly } from '../events.js';
import { businessHoursAt, nextChangeAt } from './business-hours.js';

/**
 * The open/close event (`business_hours.changed`) at each calendar boundary. Every instance
 * runs this scheduler: it keeps every calendar's next boundary (computed from the calendar, so
 * daylight-saving changes and holidays are right) and sets one timer for the earliest, so the
 * event goes out within a second of the boundary even when an instance is down. Each instance
 * tries; a set-if-absent key per calendar and boundary in the shared store lets one publish on
 * `global-{bid}` and the agents' channels, and each visitor channel subscribed on an instance
 * gets it from the first instance holding it (a key per channel and boundary).
 */

/** A visitor channel subscribed on this instance (from the fan-out). */
export interface LocalChannel {
  channel: string;
  merchantId: string;
}

export interface HoursSchedulerOptions {
  /** The visitor channels subscribed on this instance; none when absent. */
  localVisitorChannels?: () => Iterable<LocalChannel>;
  /**
   * How often the calendars are re-read (a change on another instance is seen within this).
   * @default 10000
   */
  reloadMs?: number;
}

export interface HoursScheduler {
  start(): void;
  stop(): Promise<void>;
  /** Re-reads the calendars now (after a change on this instance). */
  reload(): Promise<void>;
}

interface Entry {
  merchantId: string;
  bid: string;
  groupId: string | null;
  /** The merchant's default group (a visitor without an open conversation follows it). */
  defaultGroupId: string | null;
  calendar: BusinessHoursCalendar;
  json: string;
  /** Unix ms of the next boundary, null when none within the horizon. */
  next: number | null;
}

/** How long the dedupe keys live: far longer than any instance's lateness. */
const DEDUPE_TTL_SECONDS = 3600;

/** The key of a calendar: its merchant and group (none for the merchant's own). */
const entryKey = (merchantId: string, groupId: string | null) => `${merchantId}/${groupId ?? ''}`;

export function createHoursScheduler(deps: Deps, opts: HoursSchedulerOptions = {}): HoursScheduler {
  const reloadMs = opts.reloadMs ?? 10_000;
  let entries = new Map<string, Entry>();
  let timer: NodeJS.Timeout | undefined;
  let reloader: NodeJS.Timeout | undefined;
  let running = false;
  let work: Promise<unknown> = Promise.resolve();

  async function reload() {
    const rows = await readCalendars(deps);
    const loaded = calendarEntries(rows, entries, deps.now());
    entries = new Map(loaded.map((e) => [entryKey(e.merchantId, e.groupId), e]));
    schedule();
  }

  function schedule() {
    if (!running) return;
    clearTimeout(timer);
    let earliest = deps.now() + reloadMs;
    for (const e of entries.values()) if (e.next !== null && e.next < earliest) earliest = e.next;
    timer = setTimeout(
      () => {
        work = fire().catch((error: unknown) =>
          deps.log.warn({ err: (error as Error).message }, 'business hours: boundary event failed'),
        );
      },
      Math.max(0, earliest - deps.now()),
    );
    timer.unref();
  }

  async function fire() {
    const now = deps.now();
    for (const e of entries.values()) {
      if (e.next === null || e.next > now) continue;
      const boundary = Math.floor(e.next / 1000);
      e.next = nextChangeAt(e.calendar, now);
      const state = { groupId: e.groupId, ...businessHoursAt(e.calendar, now) };
      await announceToStaff(deps, e, boundary, state);
      // A getter: a reload during the announcement is seen, as everywhere else.
      await announceToLocalVisitors(deps, e, boundary, state, opts.localVisitorChannels, () => entries);
    }
    schedule();
  }

  return {
    start() {
      if (running) return;
      running = true;
      const again = () => {
        work = reload().catch((error: unknown) =>
          deps.log.warn({ err: (error as Error).message }, 'business hours: calendars not loaded'),
        );
      };
      again();
      reloader = setInterval(again, reloadMs);
      reloader.unref();
    },
    async stop() {
      running = false;
      clearTimeout(timer);
      clearInterval(reloader);
      await work;
    },
    reload,
  };
}

/** Every calendar set (merchants' and groups'), and each merchant's default group. */
function readCalendars(deps: Pick<Deps, 'db'>) {
  return Promise.all([
    deps.db
      .select({ id: merchants.id, bid: merchants.bid, hours: merchants.businessHours })
      .from(merchants)
      .where(isNotNull(merchants.businessHours)),
    deps.db
      .select({
        id: agentGroups.id,
        merchantId: agentGroups.merchantId,
        bid: merchants.bid,
        hours: agentGroups.businessHours,
      })
      .from(agentGroups)
      .innerJoin(merchants, eq(merchants.id, agentGroups.merchantId))
      .where(isNotNull(agentGroups.businessHours)),
    deps.db
      .select({ id: agentGroups.id, merchantId: agentGroups.merchantId })
      .from(agentGroups)
      .where(eq(agentGroups.isDefault, true)),
  ]);
}

/** The scheduler's entries for the calendars read, each with its next boundary after `now`. */
function calendarEntries(
  [ms, gs, defaults]: Awaited<ReturnType<typeof readCalendars>>,
  previous: Map<string, Entry>,
  now: number,
): Entry[] {
  const defaultOf = new Map(defaults.map((g) => [g.merchantId, g.id]));
  const make = (merchantId: string, bid: string, groupId: string | null, calendar: BusinessHoursCalendar): Entry => {
    const json = JSON.stringify(calendar);
    const old = previous.get(entryKey(merchantId, groupId));
    // An unchanged calendar keeps its pending boundary (it may be due right now).
    const next = old && old.json === json ? old.next : nextChangeAt(calendar, now);
    return { merchantId, bid, groupId, defaultGroupId: defaultOf.get(merchantId) ?? null, calendar, json, next };
  };
  return [
    ...ms.flatMap((m) => (m.hours ? [make(m.id, m.bid, null, m.hours)] : [])),
    ...gs.flatMap((g) => (g.hours ? [make(g.merchantId, g.bid, g.id, g.hours)] : [])),
  ];
}

type HoursState = { groupId: string | null } & ReturnType<typeof businessHoursAt>;

/** The first instance to claim this calendar's boundary publishes it on `global-{bid}` and the agents' channels. */
async function announceToStaff(deps: Deps, e: Entry, boundary: number, state: HoursState) {
  const key = `business-hours:${e.merchantId}:${e.groupId ?? '-'}:${boundary}`;
  if (!(await deps.kv.setIfAbsent(key, '1', DEDUPE_TTL_SECONDS))) return;
  await publishQuietly(deps, globalChannel(e.bid), 'business_hours.changed', state);
  const staff = await deps.db
    .select({ id: agents.id })
    .from(agents)
    .where(
      and(
        eq(agents.merchantId, e.merchantId),
        eq(agents.disabled, false),
        e.groupId ? eq(agents.groupId, e.groupId) : undefined,
      ),
    );
  for (const a of staff) await publishQuietly(deps, agentChannel(a.id), 'business_hours.changed', state);
}

/** Each visitor channel subscribed here that follows this calendar gets the event once (the first instance's). */
async function announceToLocalVisitors(
  deps: Deps,
  e: Entry,
  boundary: number,
  state: HoursState,
  localVisitorChannels: HoursSchedulerOptions['localVisitorChannels'],
  calendars: () => Map<string, Entry>,
) {
  // A visitor follows its group's own calendar, else the merchant's; its group is that of its open
  // conversation, else the default group (docs/availability.md).
  const locals = [...(localVisitorChannels?.() ?? [])].filter((l) => l.merchantId === e.merchantId);
  if (locals.length === 0) return;
  // Without a group calendar every visitor follows the merchant's: no statement on the event's path.
  const groupCalendars = [...calendars().values()].some((x) => x.merchantId === e.merchantId && x.groupId !== null);
  const groupOf = groupCalendars
    ? await openConversationGroups(
        deps,
        e.merchantId,
        locals.map((l) => l.channel),
      )
    : new Map<string, string | null>();
  for (const local of locals) {
    const group = groupOf.has(local.channel) ? (groupOf.get(local.channel) ?? e.defaultGroupId) : e.defaultGroupId;
    const follows = group && calendars().has(entryKey(e.merchantId, group)) ? group : null;
    if (follows !== e.groupId) continue;
    if (await deps.kv.setIfAbsent(`business-hours:${local.channel}:${boundary}`, '1', DEDUPE_TTL_SECONDS))
      await publishQuietly(deps, local.channel, 'business_hours.changed', state);
  }
}

/** The group of each of these visitor channels' open conversation (null: no group), when it has one. */
async function openConversationGroups(deps: Pick<Deps, 'db'>, merchantId: string, channels: string[]) {
  const groups = new Map<string, string | null>();
  // In slices: a statement's parameters are bounded.
  for (let i = 0; i < channels.length; i += 5000) {
    const rows = await deps.db
      .select({ channel: visitors.channel, groupId: conversations.groupId })
      .from(conversations)
      .innerJoin(visitors, eq(visitors.id, conversations.visitorId))
      .where(
        and(
          eq(conversations.merchantId, merchantId),
          ne(conversations.state, 'closed'),
          inArray(visitors.channel, channels.slice(i, i + 5000)),
        ),
      );
    for (const r of rows) groups.set(r.channel, r.groupId);
  }
  return groups;
}
