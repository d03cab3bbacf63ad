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

export function createHoursScheduler(deps: Deps, opts: HoursSchedulerOptions = {}): HoursScheduler {
  const reloadMs = opts.reloadMs ?? 10_000;
  let entries = new Map<string, Entry>();
  let timer: NodeJS.Timeout | undefined;
  let reloader: NodeJS.Timeout | undefined;
  let running = false;
  let work: Promise<unknown> = Promise.resolve();

  async function load(): Promise<Entry[]> {
    const [ms, gs, defaults] = await Promise.all([
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
    const now = deps.now();
    const defaultOf = new Map(defaults.map((g) => [g.merchantId, g.id]));
    const make = (merchantId: string, bid: string, groupId: string | null, calendar: BusinessHoursCalendar): Entry => {
      const json = JSON.stringify(calendar);
      const old = entries.get(`${merchantId}/${groupId ?? ''}`);
      // An unchanged calendar keeps its pending boundary (it may be due right now).
      const next = old && old.json === json ? old.next : nextChangeAt(calendar, now);
      return { merchantId, bid, groupId, defaultGroupId: defaultOf.get(merchantId) ?? null, calendar, json, next };
    };
    return [
      ...ms.flatMap((m) => (m.hours ? [make(m.id, m.bid, null, m.hours)] : [])),
      ...gs.flatMap((g) => (g.hours ? [make(g.merchantId, g.bid, g.id, g.hours)] : [])),
    ];
  }

  async function reload() {
    const loaded = await load();
    entries = new Map(loaded.map((e) => [`${e.merchantId}/${e.groupId ?? ''}`, e]));
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
      await announce(e, boundary, now);
    }
    schedule();
  }

  async function announce(e: Entry, boundary: number, now: number) {
    const state = { groupId: e.groupId, ...businessHoursAt(e.calendar, now) };
    const key = `business-hours:${e.merchantId}:${e.groupId ?? '-'}:${boundary}`;
    if (await deps.kv.setIfAbsent(key, '1', DEDUPE_TTL_SECONDS)) {
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
    // A visitor follows its group's own calendar, else the merchant's; its group is that of its open
    // conversation, else the default group (docs/availability.md).
    const locals = [...(opts.localVisitorChannels?.() ?? [])].filter((l) => l.merchantId === e.merchantId);
    if (locals.length === 0) return;
    // Without a group calendar every visitor follows the merchant's: no statement on the event's path.
    const groupCalendars = [...entries.values()].some((x) => x.merchantId === e.merchantId && x.groupId !== null);
    const groupOf = groupCalendars
      ? await openConversationGroups(
          e.merchantId,
          locals.map((l) => l.channel),
        )
      : new Map<string, string | null>();
    for (const local of locals) {
      const group = groupOf.has(local.channel) ? (groupOf.get(local.channel) ?? e.defaultGroupId) : e.defaultGroupId;
      const follows = group && entries.has(`${e.merchantId}/${group}`) ? group : null;
      if (follows !== e.groupId) continue;
      if (await deps.kv.setIfAbsent(`business-hours:${local.channel}:${boundary}`, '1', DEDUPE_TTL_SECONDS))
        await publishQuietly(deps, local.channel, 'business_hours.changed', state);
    }
  }

  /** The group of each of these visitor channels' open conversation (null: no group), when it has one. */
  async function openConversationGroups(merchantId: string, channels: string[]) {
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
