import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import { agentGroups, type BusinessHoursCalendar, merchants } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { auditedAgent, recordAudit } from '../desk/audit.js';
import { globalChannel } from '../events.js';
import { parseInput, text } from '../inputs.js';
import { enqueueEvent, merchantKey, type Tx } from '../outbox/enqueue.js';
import { publishOutbox } from '../outbox/publish.js';
import { type AgentViewer, requireAdmin } from '../viewer.js';
import { type BusinessHoursView, businessHoursAt, calendarInput, hhmmOf, toCalendar } from './business-hours.js';

/**
 * Reading and writing business-hours calendars: the merchant's, and optionally a group's own
 * (a group without one follows the merchant's). An admin writes them; every agent reads them.
 */

const groupRef = text(64).refine((s) => s.trim().length > 0, 'is required');
export const updateBusinessHoursInput = calendarInput.extend({ groupId: groupRef.nullish() });
export type UpdateBusinessHoursInput = z.input<typeof updateBusinessHoursInput>;
export const businessHoursQuery = z.object({ groupId: groupRef.nullish() });

/** A calendar as admins typed it (HH:MM, ISO weekdays), with its state now. */
export interface BusinessHoursSettings {
  /** Null: the merchant's calendar. */
  groupId: string | null;
  /** False when no calendar is set here (the group follows the merchant's; the merchant is always open). */
  configured: boolean;
  timezone: string;
  weekly: { day: number; start: string; end: string }[];
  holidays: string[];
  exceptions: { date: string; start: string; end: string }[];
  /** The state now of the calendar in effect (the group's, else the merchant's). */
  state: BusinessHoursView;
}

function settingsOf(
  groupId: string | null,
  own: BusinessHoursCalendar | null,
  effective: BusinessHoursCalendar | null,
  now: number,
): BusinessHoursSettings {
  return {
    groupId,
    configured: own !== null,
    timezone: own?.timezone ?? effective?.timezone ?? 'UTC',
    weekly: (own?.weekly ?? []).map((w) => ({ day: w.day, start: hhmmOf(w.start), end: hhmmOf(w.end) })),
    holidays: own?.holidays ?? [],
    exceptions: (own?.exceptions ?? []).map((e) => ({ date: e.date, start: hhmmOf(e.start), end: hhmmOf(e.end) })),
    state: businessHoursAt(effective, now),
  };
}

/**
 * The merchant's calendar and the group's own, in one query: `group` is undefined when `groupId`
 * is not one of the merchant's groups (or not given), null when the group has no calendar.
 */
async function calendarRow(db: Deps['db'] | Tx, merchantId: string, groupId: string | null | undefined) {
  const [row] = await db
    .select({ merchant: merchants.businessHours, groupId: agentGroups.id, group: agentGroups.businessHours })
    .from(merchants)
    // No group id matches '' (ids are prefixed), so without one the join finds nothing.
    .leftJoin(agentGroups, and(eq(agentGroups.id, groupId ?? ''), eq(agentGroups.merchantId, merchants.id)))
    .where(eq(merchants.id, merchantId));
  return { merchant: row?.merchant ?? null, group: row?.groupId ? row.group : undefined };
}

/** The merchant's calendar and, when `groupId` is given, the group's own (NOT_FOUND when not the merchant's). */
export async function calendarsOf(
  db: Deps['db'] | Tx,
  merchantId: string,
  groupId: string | null | undefined,
): Promise<{ merchant: BusinessHoursCalendar | null; group: BusinessHoursCalendar | null }> {
  const { merchant, group } = await calendarRow(db, merchantId, groupId);
  if (!groupId) return { merchant, group: null };
  if (group === undefined) throw new DomainError('NOT_FOUND', 'No such agent group');
  return { merchant, group };
}

/** The business hours of the merchant (or of one of its groups), as set and as they stand now. */
export async function loadBusinessHours(
  deps: Deps,
  viewer: AgentViewer,
  input: z.input<typeof businessHoursQuery> = {},
): Promise<BusinessHoursSettings> {
  const { groupId } = parseInput(businessHoursQuery, input);
  const cals = await calendarsOf(deps.db, viewer.merchantId, groupId);
  const own = groupId ? cals.group : cals.merchant;
  return settingsOf(groupId ?? null, own, cals.group ?? cals.merchant, deps.now());
}

/**
 * Sets the business hours of the merchant (`groupId` absent) or of one group; admins only,
 * audited. When the change opens or closes it now, `business_hours.changed` goes out at once.
 */
export async function updateBusinessHours(
  deps: Deps,
  viewer: AgentViewer,
  raw: UpdateBusinessHoursInput,
): Promise<BusinessHoursSettings> {
  requireAdmin(viewer);
  const input = parseInput(updateBusinessHoursInput, raw);
  const calendar = toCalendar(input);
  const groupId = input.groupId ?? null;
  const now = deps.now();
  await deps.db.transaction(async (tx) => {
    const before = await calendarsOf(tx, viewer.merchantId, groupId);
    if (groupId)
      await tx
        .update(agentGroups)
        .set({ businessHours: calendar })
        .where(and(eq(agentGroups.id, groupId), eq(agentGroups.merchantId, viewer.merchantId)));
    else
      await tx
        .update(merchants)
        .set({ businessHours: calendar, settingsVersion: sql`${merchants.settingsVersion} + 1` })
        .where(eq(merchants.id, viewer.merchantId));
    await recordAudit(tx, {
      ...auditedAgent(viewer),
      action: 'business_hours.updated',
      target: groupId ? { type: 'agent_group', id: groupId } : { type: 'merchant', id: viewer.merchantId },
      before: { businessHours: groupId ? before.group : before.merchant },
      after: { businessHours: calendar },
    });
    const was = businessHoursAt(groupId ? (before.group ?? before.merchant) : before.merchant, now);
    const is = businessHoursAt(calendar, now);
    if (was.open !== is.open)
      await enqueueEvent(tx, merchantKey(viewer.merchantId), globalChannel(viewer.bid), 'business_hours.changed', {
        groupId,
        ...is,
      });
  });
  await deps.configCache.announceChanged(viewer.merchantId);
  await publishOutbox(deps, merchantKey(viewer.merchantId));
  return loadBusinessHours(deps, viewer, { groupId });
}

/**
 * Whether a group (its own calendar, else the merchant's) is open at `now`. Routing serves a
 * group's queue only while it is open: out of hours its conversations wait as messages left.
 */
export async function groupOpenAt(
  db: Deps['db'] | Tx,
  merchantId: string,
  groupId: string | null,
  now: number,
): Promise<boolean> {
  const { merchant, group } = await calendarRow(db, merchantId, groupId);
  return businessHoursAt(group ?? merchant, now).open;
}
