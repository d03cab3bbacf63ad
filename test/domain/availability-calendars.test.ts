import { and, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { agentGroups, auditLog, merchants } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { loadBusinessHours, updateBusinessHours } from '../../src/resolvers/availability/calendars.js';
import { createHoursScheduler } from '../../src/resolvers/availability/hours-events.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { globalChannel } from '../../src/resolvers/events.js';
import { loadVisitorBootstrap } from '../../src/resolvers/visitor.js';
import { codeOf, eventually, type Factories, recordEvents, type TestDeps, useTestDeps } from '../support/deps.js';

/** Business hours as admins set them and as visitors and agents are told (docs/availability.md). */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const MIN = 60_000;
const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);
/** Every day of the week, in UTC, from `from` for `minutes`. */
const daily = (from: number, minutes: number) =>
  [1, 2, 3, 4, 5, 6, 7].map((day) => ({ day, start: hhmm(from), end: hhmm(from + minutes * MIN) }));

describe('business hours: setting them', () => {
  it('an admin sets the merchant’s calendar; the bootstrap tells open, next opening and zone, computed now', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const visitor = await f.visitor(m);
    expect((await loadVisitorBootstrap(deps, visitor, { wsAddress: 'ws://x' })).businessHours).toEqual({
      open: true,
      nextOpenAt: null,
      timezone: 'UTC',
    });
    // Opens in 2 hours, for an hour, every day (whole minutes, UTC).
    const opens = Math.ceil((Date.now() + 120 * MIN) / MIN) * MIN;
    const set = await updateBusinessHours(deps, admin, {
      timezone: 'UTC',
      weekly: daily(opens, 60),
      holidays: ['2030-01-01'],
    });
    expect(set).toMatchObject({ groupId: null, configured: true, timezone: 'UTC', holidays: ['2030-01-01'] });
    expect(set.weekly).toHaveLength(7);
    expect(set.state).toEqual({ open: false, nextOpenAt: opens / 1000, timezone: 'UTC' });
    const [row] = await deps.db.select().from(merchants).where(eq(merchants.id, m.merchantId));
    expect(row?.businessHours?.weekly[0]).toEqual({
      day: 1,
      start: (opens % (1440 * MIN)) / MIN,
      end: ((opens % (1440 * MIN)) / MIN + 60) % 1440,
    });
    expect((await loadVisitorBootstrap(deps, visitor, { wsAddress: 'ws://x' })).businessHours).toEqual(set.state);
    // Evaluated at each ask: at the opening instant it is open, with no next opening.
    const real = deps.now;
    deps.now = () => opens + 1000;
    try {
      expect((await loadVisitorBootstrap(deps, visitor, { wsAddress: 'ws://x' })).businessHours).toEqual({
        open: true,
        nextOpenAt: null,
        timezone: 'UTC',
      });
    } finally {
      deps.now = real;
    }
  });

  it('only admins set them (FORBIDDEN), every change is audited, and a group has its own', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const agent = await f.agent(m);
    const input = { timezone: 'Europe/Paris', weekly: [{ day: 'monday', start: '09:00', end: '18:00' }] };
    expect(await codeOf(updateBusinessHours(deps, agent, input))).toBe('FORBIDDEN');
    const [group] = await deps.db
      .insert(agentGroups)
      .values({ id: `g_${m.merchantId}`, merchantId: m.merchantId, name: 'Night' })
      .returning();
    await updateBusinessHours(deps, admin, {
      groupId: group?.id,
      timezone: 'Asia/Tokyo',
      weekly: [{ day: 5, start: '22:00', end: '02:00' }],
    });
    const own = await loadBusinessHours(deps, agent, { groupId: group?.id });
    expect(own).toMatchObject({ groupId: group?.id, configured: true, timezone: 'Asia/Tokyo' });
    expect(own.weekly).toEqual([{ day: 5, start: '22:00', end: '02:00' }]);
    expect(await loadBusinessHours(deps, agent)).toMatchObject({ groupId: null, configured: false, timezone: 'UTC' });
    const audits = await deps.db
      .select()
      .from(auditLog)
      .where(and(eq(auditLog.merchantId, m.merchantId), eq(auditLog.action, 'business_hours.updated')));
    expect(audits.map((a) => [a.actorId, a.targetType, a.targetId])).toEqual([
      [admin.agentId, 'agent_group', group?.id],
    ]);
    expect(await codeOf(loadBusinessHours(deps, agent, { groupId: 'g_nope' }))).toBe('NOT_FOUND');
    expect(await codeOf(updateBusinessHours(deps, admin, { ...input, timezone: 'Moon/Base' }))).toBe('BAD_USER_INPUT');
  });

  it("the bootstrap tells the visitor's group: the default group's own calendar, else the merchant's", async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const visitor = await f.visitor(m);
    const [group] = await deps.db
      .select()
      .from(agentGroups)
      .where(and(eq(agentGroups.merchantId, m.merchantId), eq(agentGroups.isDefault, true)));
    const merchantOpens = Math.ceil((Date.now() + 120 * MIN) / MIN) * MIN;
    await updateBusinessHours(deps, admin, { timezone: 'UTC', weekly: daily(merchantOpens, 60) });
    const bootstrap = async () => (await loadVisitorBootstrap(deps, visitor, { wsAddress: 'ws://x' })).businessHours;
    expect(await bootstrap()).toEqual({ open: false, nextOpenAt: merchantOpens / 1000, timezone: 'UTC' });
    const own = await updateBusinessHours(deps, admin, {
      groupId: group?.id,
      timezone: 'Europe/Paris',
      weekly: [1, 2, 3, 4, 5, 6, 7].map((day) => ({ day, start: '00:00', end: '00:01' })),
    });
    expect(await bootstrap()).toEqual(own.state);
    expect((await bootstrap()).timezone).toBe('Europe/Paris');
  });

  it("a visitor whose conversation is in another group is told that group's hours", async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const visitor = await f.visitor(m);
    const sales = `g_sales_${m.merchantId}`;
    await deps.db.insert(agentGroups).values({ id: sales, merchantId: m.merchantId, name: 'Sales' });
    const opens = Math.ceil((Date.now() + 120 * MIN) / MIN) * MIN;
    // The merchant (and so the default group) is open all day; Sales keeps its own, closed now.
    await updateBusinessHours(deps, admin, {
      timezone: 'Europe/Paris',
      weekly: [1, 2, 3, 4, 5, 6, 7].map((day) => ({ day, start: '00:00', end: '24:00' })),
    });
    await updateBusinessHours(deps, admin, { groupId: sales, timezone: 'UTC', weekly: daily(opens, 60) });
    const bootstrap = async () => (await loadVisitorBootstrap(deps, visitor, { wsAddress: 'ws://x' })).businessHours;
    // No conversation yet: the default group's (the merchant's) hours.
    expect(await bootstrap()).toEqual({ open: true, nextOpenAt: null, timezone: 'Europe/Paris' });
    // Its conversation waits in Sales: Sales' hours, closed until it opens.
    const assigned = await assignAgent(deps, visitor, { groupId: sales });
    expect(assigned.messageLeft?.reason).toBe('closed');
    expect(await bootstrap()).toEqual({ open: false, nextOpenAt: opens / 1000, timezone: 'UTC' });
    // Closed: back to the default group's.
    await closeConversation(deps, visitor);
    expect(await bootstrap()).toEqual({ open: true, nextOpenAt: null, timezone: 'Europe/Paris' });
  });

  it('a change that closes the merchant now tells the workbench at once', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const rec = recordEvents(deps, [globalChannel(m.bid)]);
    await rec.ready;
    const opens = Math.ceil((Date.now() + 180 * MIN) / MIN) * MIN;
    await updateBusinessHours(deps, admin, { timezone: 'UTC', weekly: daily(opens, 30) });
    const event = await rec.first('business_hours.changed');
    expect(event.data).toEqual({ group_id: null, open: false, next_open_at: opens / 1000, timezone: 'UTC' });
    rec.stop();
  });
});

describe('business hours: the open/close event at the boundary', () => {
  it('reaches the workbench and the visitors within a second of the boundary, once, from two schedulers', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const visitor = await f.visitor(m);
    // A clock 1.5 s before a whole minute, at which the calendar opens (for 5 minutes, every day).
    const boundary = Math.ceil((Date.now() + 2 * MIN) / MIN) * MIN;
    const shift = boundary - 1500 - Date.now();
    const clock: Deps = { ...deps, now: () => Date.now() + shift };
    await updateBusinessHours(clock, admin, { timezone: 'UTC', weekly: daily(boundary, 5) });
    const rec = recordEvents(deps, [globalChannel(m.bid), `agent-${admin.agentId}`, visitor.channel]);
    await rec.ready;
    const local = () => [{ channel: visitor.channel, merchantId: m.merchantId }];
    const one = createHoursScheduler(clock, { localVisitorChannels: local, reloadMs: 60_000 });
    const two = createHoursScheduler(clock, { localVisitorChannels: local, reloadMs: 60_000 });
    await Promise.all([one.reload(), two.reload()]);
    one.start();
    two.start();
    try {
      const seen = await rec.first('business_hours.changed', globalChannel(m.bid));
      const late = clock.now() - boundary;
      expect(late).toBeGreaterThanOrEqual(0);
      expect(late).toBeLessThan(1000);
      expect(seen.data).toEqual({ group_id: null, open: true, next_open_at: null, timezone: 'UTC' });
      await eventually(() => rec.of('business_hours.changed', visitor.channel).length === 1, 'the visitor’s event');
      await eventually(() => rec.of('business_hours.changed', `agent-${admin.agentId}`).length === 1, 'the agent’s');
      await new Promise((r) => setTimeout(r, 300));
      // Two instances, one event per channel.
      expect(
        rec
          .of('business_hours.changed')
          .map((e) => e.channel)
          .sort(),
      ).toEqual([globalChannel(m.bid), `agent-${admin.agentId}`, visitor.channel].sort());
    } finally {
      rec.stop();
      await Promise.all([one.stop(), two.stop()]);
    }
  });

  it("visitors get the boundaries of the calendar they follow: the default group's own over the merchant's", async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const visitor = await f.visitor(m);
    const [group] = await deps.db
      .select()
      .from(agentGroups)
      .where(and(eq(agentGroups.merchantId, m.merchantId), eq(agentGroups.isDefault, true)));
    const boundary = Math.ceil((Date.now() + 2 * MIN) / MIN) * MIN;
    const shift = boundary - 1500 - Date.now();
    const clock: Deps = { ...deps, now: () => Date.now() + shift };
    // Both calendars open at the same instant: the visitor is told once, by its group's.
    await updateBusinessHours(clock, admin, { timezone: 'UTC', weekly: daily(boundary, 5) });
    await updateBusinessHours(clock, admin, { groupId: group?.id, timezone: 'UTC', weekly: daily(boundary, 10) });
    const rec = recordEvents(deps, [globalChannel(m.bid), visitor.channel]);
    await rec.ready;
    const local = () => [{ channel: visitor.channel, merchantId: m.merchantId }];
    const one = createHoursScheduler(clock, { localVisitorChannels: local, reloadMs: 60_000 });
    await one.reload();
    one.start();
    try {
      await eventually(() => rec.of('business_hours.changed', globalChannel(m.bid)).length === 2, 'both calendars');
      await eventually(() => rec.of('business_hours.changed', visitor.channel).length === 1, 'the visitor’s event');
      await new Promise((r) => setTimeout(r, 300));
      expect(rec.of('business_hours.changed', visitor.channel).map((e) => e.data)).toEqual([
        { group_id: group?.id, open: true, next_open_at: null, timezone: 'UTC' },
      ]);
    } finally {
      rec.stop();
      await one.stop();
    }
  });

  it("a visitor whose conversation is in another group gets that group's boundaries, not the default's", async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const [inSales, elsewhere] = [await f.visitor(m), await f.visitor(m)];
    const sales = `g_sales_${m.merchantId}`;
    await deps.db.insert(agentGroups).values({ id: sales, merchantId: m.merchantId, name: 'Sales' });
    const boundary = Math.ceil((Date.now() + 2 * MIN) / MIN) * MIN;
    // The set-up runs well before the boundary; the clock is moved to 1.5 s before it only when
    // the scheduler starts (a busy machine can take longer than that over the set-up).
    let shift = boundary - 30_000 - Date.now();
    const clock: Deps = { ...deps, now: () => Date.now() + shift };
    // The merchant and Sales both open at the boundary, each by its own calendar.
    await updateBusinessHours(clock, admin, { timezone: 'UTC', weekly: daily(boundary, 5) });
    await updateBusinessHours(clock, admin, { groupId: sales, timezone: 'UTC', weekly: daily(boundary, 10) });
    // One visitor's conversation waits in Sales (closed now: a message left); the other has none.
    expect((await assignAgent(clock, inSales, { groupId: sales })).messageLeft?.reason).toBe('closed');
    const rec = recordEvents(deps, [inSales.channel, elsewhere.channel]);
    await rec.ready;
    const local = () => [
      { channel: inSales.channel, merchantId: m.merchantId },
      { channel: elsewhere.channel, merchantId: m.merchantId },
    ];
    const one = createHoursScheduler(clock, { localVisitorChannels: local, reloadMs: 60_000 });
    shift = boundary - 1500 - Date.now();
    await one.reload();
    one.start();
    try {
      await eventually(() => rec.of('business_hours.changed', inSales.channel).length === 1, 'Sales’ event');
      await eventually(() => rec.of('business_hours.changed', elsewhere.channel).length === 1, 'the merchant’s event');
      await new Promise((r) => setTimeout(r, 300));
      expect(rec.of('business_hours.changed', inSales.channel).map((e) => e.data)).toEqual([
        { group_id: sales, open: true, next_open_at: null, timezone: 'UTC' },
      ]);
      expect(rec.of('business_hours.changed', elsewhere.channel).map((e) => e.data)).toEqual([
        { group_id: null, open: true, next_open_at: null, timezone: 'UTC' },
      ]);
    } finally {
      rec.stop();
      await one.stop();
    }
  });
});
