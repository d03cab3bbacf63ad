import { and, asc, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { type Agent, agentGroups, agents, auditLog, conversations } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { loadBusinessHours, updateBusinessHours } from '../../src/resolvers/availability/calendars.js';
import { createHoursScheduler } from '../../src/resolvers/availability/hours-events.js';
import {
  leaveContactDetails,
  leaveMessage,
  listMessagesLeft,
  updateContactFields,
} from '../../src/resolvers/availability/messages-left.js';
import { chooseAgent } from '../../src/resolvers/availability/routing/policies.js';
import { evaluateRules, updateRoutingRules } from '../../src/resolvers/availability/routing/rules.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { drainQueue } from '../../src/resolvers/conversations/queue.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { globalChannel } from '../../src/resolvers/events.js';
import {
  codeOf,
  eventually,
  type Factories,
  recordEvents,
  refusalOf,
  type TestDeps,
  type TestMerchant,
  useTestDeps,
} from '../support/deps.js';

/** The edges of messages left (docs/availability.md "Messages left"), each checked by value. */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

/** A merchant's audit rows of one action, oldest first: target, before and after. */
const auditRows = async (merchantId: string, action: string) =>
  (
    await deps.db
      .select()
      .from(auditLog)
      .where(and(eq(auditLog.merchantId, merchantId), eq(auditLog.action, action)))
      .orderBy(asc(auditLog.id))
  ).map((r) => [r.targetType, r.targetId, r.before, r.after]);

const KEPT =
  ' Your message is kept and nothing is lost: an agent will answer it here as soon as possible. Come back to this page to read the answer.';

/** Runs `work` with the deps' clock stopped at `at` (Unix ms). */
async function at<T>(when: number, work: () => Promise<T>): Promise<T> {
  const real = deps.now;
  deps.now = () => when;
  try {
    return await work();
  } finally {
    deps.now = real;
  }
}

const defaultGroupOf = async (m: TestMerchant) =>
  (
    await deps.db
      .select({ id: agentGroups.id })
      .from(agentGroups)
      .where(and(eq(agentGroups.merchantId, m.merchantId), eq(agentGroups.isDefault, true)))
  )[0]?.id;

describe('messages left: what the visitor is told', () => {
  it('closed: the notice names the next opening in the calendar’s zone, and the event carries the same sentence', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    // Weekdays 09:00–17:00 in Paris; Monday 30 Nov 2026 04:00 in Paris (03:00 UTC) is before the opening.
    await updateBusinessHours(deps, admin, {
      timezone: 'Europe/Paris',
      weekly: [1, 2, 3, 4, 5].map((day) => ({ day, start: '09:00', end: '17:00' })),
    });
    const visitor = await f.visitor(m);
    const rec = recordEvents(deps, [globalChannel(m.bid)]);
    await rec.ready;
    const assigned = await at(Date.UTC(2026, 10, 30, 3, 0), () => assignAgent(deps, visitor));
    const notice = `We are closed right now; we open again on 30 Nov 2026, 09:00 (Europe/Paris).${KEPT}`;
    expect(assigned.messageLeft).toEqual({
      reason: 'closed',
      notice,
      nextOpenAt: Date.UTC(2026, 10, 30, 8, 0) / 1000,
      contactFields: [],
    });
    const event = await rec.first('conversation.message_left', globalChannel(m.bid));
    expect(event.data).toMatchObject({ reason: 'closed', next_open_at: Date.UTC(2026, 10, 30, 8, 0) / 1000, notice });
    rec.stop();
  });

  it('no agent: the notice says nobody is online', async () => {
    const m = await f.merchant();
    const assigned = await assignAgent(deps, await f.visitor(m));
    expect(assigned.messageLeft?.notice).toBe(`No agent is online right now.${KEPT}`);
  });
});

describe('messages left: who counts as able to answer', () => {
  it('an agent online in another group does not answer the default group: the conversation is a message left', async () => {
    const m = await f.merchant();
    const sales = `g_sales_${m.merchantId}`;
    await deps.db.insert(agentGroups).values({ id: sales, merchantId: m.merchantId, name: 'Sales' });
    await f.online(await f.agent(m, { group: 'Sales' }));
    const assigned = await assignAgent(deps, await f.visitor(m));
    expect([assigned.state, assigned.messageLeft?.reason]).toEqual(['queued', 'no_agent']);
  });

  it('an online agent without a group serves the default group: a conversation waiting for its seat is no message left', async () => {
    const m = await f.merchant();
    const sales = `g_sales_${m.merchantId}`;
    await deps.db.insert(agentGroups).values({ id: sales, merchantId: m.merchantId, name: 'Sales' });
    const agent = await f.agent(m, { maxConcurrentChats: 1 });
    await deps.db.update(agents).set({ groupId: null }).where(eq(agents.id, agent.agentId));
    await f.online(agent);
    const first = await assignAgent(deps, await f.visitor(m));
    expect([first.state, first.agent?.agentId]).toEqual(['active', agent.agentId]);
    // The agent is full: the next one waits in the queue, but someone of its group is online.
    const second = await assignAgent(deps, await f.visitor(m));
    expect([second.state, second.messageLeft]).toEqual(['queued', null]);
    const [row] = await deps.db.select().from(conversations).where(eq(conversations.id, second.conversationId));
    expect([row?.groupId, row?.leftAt, row?.leftReason]).toEqual([await defaultGroupOf(m), null, null]);
    expect((await listMessagesLeft(deps, agent)).nodes).toEqual([]);
  });
});

describe('messages left: made once', () => {
  it('leaveMessage returns the notice the first time, then nothing; a conversation no longer queued is not made one', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    await updateContactFields(deps, admin, { fields: ['phone'] });
    // Queued, not a message left: an online agent (capacity 1) is busy with another visitor.
    const agent = await f.agent(m, { maxConcurrentChats: 1 });
    await f.online(agent);
    const busy = await f.visitor(m);
    expect((await assignAgent(deps, busy)).state).toBe('active');
    const visitor = await f.visitor(m);
    const queued = await assignAgent(deps, visitor);
    expect([queued.state, queued.messageLeft]).toEqual(['queued', null]);
    const rec = recordEvents(deps, [globalChannel(m.bid)]);
    await rec.ready;

    const why = { reason: 'no_agent' as const, nextOpenAt: null, timezone: 'UTC' };
    expect(await leaveMessage(deps, m.merchantId, visitor.visitorId, why)).toEqual({
      reason: 'no_agent',
      notice: `No agent is online right now.${KEPT}`,
      nextOpenAt: null,
      contactFields: ['phone'],
    });
    await rec.first('conversation.message_left', globalChannel(m.bid));
    // Already one: nothing again, and no second event.
    expect(await leaveMessage(deps, m.merchantId, visitor.visitorId, why)).toBeUndefined();
    // Active (the busy visitor's): not made one.
    expect(await leaveMessage(deps, m.merchantId, busy.visitorId, why)).toBeUndefined();
    const [active] = await deps.db
      .select()
      .from(conversations)
      .where(and(eq(conversations.merchantId, m.merchantId), eq(conversations.state, 'active')));
    expect([active?.visitorId, active?.leftAt, active?.leftReason]).toEqual([busy.visitorId, null, null]);
    // A later event on the channel proves the second leaveMessage told nothing before it.
    await assignAgent(deps, await f.visitor(m));
    await rec.first('conversation.queued', globalChannel(m.bid));
    expect(rec.events.filter((e) => e.event === 'conversation.message_left').length).toBe(1);
    rec.stop();
  });
});

describe('messages left: the agents’ list pages', () => {
  it('a page holding exactly the last rows has no next page', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    await assignAgent(deps, await f.visitor(m));
    await assignAgent(deps, await f.visitor(m));
    const page = await listMessagesLeft(deps, agent, { first: 2 });
    expect([page.nodes.length, page.hasNextPage]).toEqual([2, false]);
  });

  it('an after that is not a cursor of this list is refused, whatever its shape', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    await assignAgent(deps, await f.visitor(m));
    const cursor = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    for (const after of [
      cursor({ at: '2026-01-01T00:00:00.000Z', id: 'c' }),
      // An object with the array's keys is not the array a cursor is.
      cursor({ 0: '2026-01-01T00:00:00.000Z', 1: 'c' }),
      cursor([1, 'c']),
      cursor(['2026-01-01T00:00:00.000Z', 5]),
      cursor(['not a date', 'c']),
      cursor(['2026-01-01T00:00:00.000Z']),
    ])
      expect(await refusalOf(listMessagesLeft(deps, agent, { after }))).toBe(
        'BAD_USER_INPUT: after is not a cursor of this list',
      );
    // A well-formed one is read: nothing left after the far future.
    const late = await listMessagesLeft(deps, agent, { after: cursor(['2100-01-01T00:00:00.000Z', 'c']) });
    expect(late.nodes).toEqual([]);
  });
});

describe('messages left: contact details', () => {
  it('details left in two calls add up; a visitor without an open conversation is told to write first', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    await updateContactFields(deps, admin, { fields: ['name', 'email'] });
    const none = await f.visitor(m);
    expect(await refusalOf(leaveContactDetails(deps, none, { email: 'x@example.com' }))).toBe(
      'CONVERSATION_CLOSED: Write a message first',
    );
    const visitor = await f.visitor(m);
    await assignAgent(deps, visitor);
    expect(await leaveContactDetails(deps, visitor, { email: 'lily@example.com' })).toEqual({
      email: 'lily@example.com',
    });
    expect(await leaveContactDetails(deps, visitor, { name: 'Lily' })).toEqual({
      email: 'lily@example.com',
      name: 'Lily',
    });
    const agent = await f.agent(m);
    expect((await listMessagesLeft(deps, agent)).nodes.map((n) => n.contact)).toEqual([
      { email: 'lily@example.com', name: 'Lily' },
    ]);
  });

  it('a change of the fields asked is audited with the fields before and after, on the merchant', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    await updateContactFields(deps, admin, { fields: ['email'] });
    await updateContactFields(deps, admin, { fields: ['name', 'phone'] });
    const rows = await deps.db
      .select()
      .from(auditLog)
      .where(and(eq(auditLog.merchantId, m.merchantId), eq(auditLog.action, 'contact_fields.updated')))
      .orderBy(asc(auditLog.id));
    expect(rows.map((r) => [r.actorId, r.targetType, r.targetId, r.before, r.after])).toEqual([
      [admin.agentId, 'merchant', m.merchantId, { contactFields: [] }, { contactFields: ['email'] }],
      [admin.agentId, 'merchant', m.merchantId, { contactFields: ['email'] }, { contactFields: ['name', 'phone'] }],
    ]);
    expect(await codeOf(updateContactFields(deps, await f.agent(m), { fields: ['name'] }))).toBe('FORBIDDEN');
  });
});

// ---- the open/close event (hours-events.ts) on a clock the test moves --------------------------

const WEEK = [1, 2, 3, 4, 5, 6, 7];
const every = (start: string, end: string) => WEEK.map((day) => ({ day, start, end }));
/** Tuesday 1 Dec 2026, 10:00 UTC: the boundary the calendars below share. */
const B = Date.UTC(2026, 11, 1, 10, 0);
const OPEN_UTC = { open: true, next_open_at: null, timezone: 'UTC' };
const settle = () => new Promise((r) => setTimeout(r, 300));

/** A merchant whose own calendar (unless `withoutOwn`) and groups' calendars are set; `clock` a test-moved one. */
async function calendarsAround(t: { now: number }, withoutOwn = false) {
  const clock: Deps = { ...deps, now: () => t.now };
  const m = await f.merchant();
  const admin = await f.agent(m, { level: 'admin' });
  const group = async (name: string) => {
    const id = `g_${name}_${m.merchantId}`;
    await deps.db.insert(agentGroups).values({ id, merchantId: m.merchantId, name });
    return id;
  };
  const [sales, support, late] = [await group('sales'), await group('support'), await group('late')];
  // The merchant and Sales open at B; Support is always open (no boundary); Late opens an hour after B.
  if (!withoutOwn) await updateBusinessHours(clock, admin, { timezone: 'UTC', weekly: every('10:00', '10:05') });
  await updateBusinessHours(clock, admin, { groupId: sales, timezone: 'UTC', weekly: every('10:00', '10:10') });
  await updateBusinessHours(clock, admin, { groupId: support, timezone: 'UTC', weekly: every('00:00', '24:00') });
  await updateBusinessHours(clock, admin, { groupId: late, timezone: 'UTC', weekly: every('11:00', '12:00') });
  return { clock, m, admin, sales, support, late };
}

describe('business hours: the open/close event, scheduler by value', () => {
  it('not started it tells nothing; started it tells each calendar due at the instant, once, to the visitors following it; stopped, nothing more', async () => {
    const t = { now: B - 60_000 };
    const { clock, m, sales } = await calendarsAround(t);
    // v1 and v4 have no conversation (the default group: the merchant's calendar), v2 waits in
    // Sales (Sales' calendar), v3's Sales conversation is closed (back to the merchant's).
    const [v1, v2, v3, v4] = [await f.visitor(m), await f.visitor(m), await f.visitor(m), await f.visitor(m)];
    await assignAgent(clock, v2, { groupId: sales });
    await assignAgent(clock, v3, { groupId: sales });
    await closeConversation(clock, v3);
    const channels = [v1, v2, v3, v4].map((v) => v.channel);
    const rec = recordEvents(deps, [globalChannel(m.bid), ...channels]);
    await rec.ready;
    const scheduler = createHoursScheduler(clock, {
      localVisitorChannels: () => channels.map((channel) => ({ channel, merchantId: m.merchantId })),
      reloadMs: 600_000,
    });
    try {
      await scheduler.reload();
      // At the boundary, re-read but not started: nothing is told.
      t.now = B;
      await scheduler.reload();
      await settle();
      expect(rec.of('business_hours.changed')).toEqual([]);
      // Started at the very instant: the boundary kept from before is due now.
      scheduler.start();
      await eventually(() => rec.of('business_hours.changed', globalChannel(m.bid)).length === 2, 'both calendars');
      await eventually(
        () => channels.every((c) => rec.of('business_hours.changed', c).length === 1),
        'each visitor’s event',
      );
      await settle();
      // Only the calendars due (not Support, with no boundary, nor Late, due an hour later).
      expect(
        rec
          .of('business_hours.changed', globalChannel(m.bid))
          .map((e) => e.data)
          .sort((a, b) =>
            String((a as { group_id: unknown }).group_id).localeCompare(String((b as { group_id: unknown }).group_id)),
          ),
      ).toEqual([
        { group_id: sales, ...OPEN_UTC },
        { group_id: null, ...OPEN_UTC },
      ]);
      expect(channels.map((c) => rec.of('business_hours.changed', c).map((e) => e.data))).toEqual([
        [{ group_id: null, ...OPEN_UTC }],
        [{ group_id: sales, ...OPEN_UTC }],
        [{ group_id: null, ...OPEN_UTC }],
        [{ group_id: null, ...OPEN_UTC }],
      ]);
      // Stopped: the merchant's close at 10:05 is never told by it.
      await scheduler.stop();
      t.now = B + 5 * 60_000 + 1000;
      await scheduler.reload();
      await settle();
      expect(rec.of('business_hours.changed').length).toBe(6);
    } finally {
      rec.stop();
      await scheduler.stop();
    }
  });

  it('without visitor channels (the option absent) every calendar due is told on global, group calendars of one instant each', async () => {
    const t = { now: B - 60_000 };
    const { clock, m, admin, support } = await calendarsAround(t);
    // Support now opens at B too: two group calendars and the merchant's share the instant.
    await updateBusinessHours(clock, admin, { groupId: support, timezone: 'UTC', weekly: every('10:00', '10:20') });
    const rec = recordEvents(deps, [globalChannel(m.bid)]);
    await rec.ready;
    const scheduler = createHoursScheduler(clock, { reloadMs: 600_000 });
    try {
      await scheduler.reload();
      t.now = B;
      scheduler.start();
      await eventually(() => rec.of('business_hours.changed').length === 3, 'the three calendars');
      await settle();
      expect(
        rec
          .of('business_hours.changed')
          .map((e) => (e.data as { group_id: string | null }).group_id)
          .sort(),
      ).toEqual([`g_sales_${m.merchantId}`, support, null].sort());
    } finally {
      rec.stop();
      await scheduler.stop();
    }
  });

  it('a merchant with group calendars only: a visitor waiting in Sales gets Sales’ boundary', async () => {
    const t = { now: B - 60_000 };
    const { clock, m, sales } = await calendarsAround(t, true);
    const visitor = await f.visitor(m);
    await assignAgent(clock, visitor, { groupId: sales });
    const rec = recordEvents(deps, [visitor.channel]);
    await rec.ready;
    const scheduler = createHoursScheduler(clock, {
      localVisitorChannels: () => [{ channel: visitor.channel, merchantId: m.merchantId }],
      reloadMs: 600_000,
    });
    try {
      await scheduler.reload();
      t.now = B;
      scheduler.start();
      await eventually(() => rec.of('business_hours.changed').length === 1, 'Sales’ event');
      expect(rec.of('business_hours.changed').map((e) => e.data)).toEqual([{ group_id: sales, ...OPEN_UTC }]);
    } finally {
      rec.stop();
      await scheduler.stop();
    }
  });
});

// ---- setting calendars (calendars.ts, business-hours.ts's input) ------------------------------

describe('business hours: setting and reading calendars, by value', () => {
  it('weekday names and numbers are read, holidays deduplicated and sorted, exceptions kept; a group without its own shows none, in the merchant’s zone', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const set = await updateBusinessHours(deps, admin, {
      timezone: 'Asia/Tokyo',
      weekly: [
        { day: 'mon', start: '09:00', end: '17:00' },
        { day: 'tue', start: '09:00', end: '12:00' },
        { day: 'SUNDAY', start: '22:00', end: '02:00' },
        { day: 0, start: '10:00', end: '11:00' },
      ],
      holidays: ['2026-12-31', '2026-12-25', '2026-12-31'],
      exceptions: [{ date: '2026-12-24', start: '10:00', end: '12:00' }],
    });
    expect([set.groupId, set.configured, set.timezone, set.weekly, set.holidays, set.exceptions]).toEqual([
      null,
      true,
      'Asia/Tokyo',
      [
        { day: 1, start: '09:00', end: '17:00' },
        { day: 2, start: '09:00', end: '12:00' },
        { day: 7, start: '22:00', end: '02:00' },
        { day: 7, start: '10:00', end: '11:00' },
      ],
      ['2026-12-25', '2026-12-31'],
      [{ date: '2026-12-24', start: '10:00', end: '12:00' }],
    ]);
    const group = await defaultGroupOf(m);
    const ofGroup = await loadBusinessHours(deps, admin, { groupId: group });
    expect([
      ofGroup.groupId,
      ofGroup.configured,
      ofGroup.timezone,
      ofGroup.weekly,
      ofGroup.holidays,
      ofGroup.exceptions,
    ]).toEqual([group, false, 'Asia/Tokyo', [], [], []]);
  });

  it('refuses a day that names no weekday or too little of one, a start at 24:00 or equal to the end, a blank or unknown group', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const weekly = (day: string | number, start = '09:00', end = '17:00') => [{ day, start, end }];
    for (const input of [
      { timezone: 'UTC', weekly: weekly('mo') },
      { timezone: 'UTC', weekly: weekly('xyz') },
      { timezone: 'UTC', weekly: weekly('daymon') },
      { timezone: 'UTC', weekly: weekly(1, '24:00', '02:00') },
      { timezone: 'UTC', weekly: weekly(1, '09:00', '09:00') },
      { timezone: 'UTC', weekly: [], exceptions: [{ date: '2026-12-24', start: '24:00', end: '01:00' }] },
      { timezone: 'UTC', weekly: weekly(1), groupId: '   ' },
    ])
      expect(await codeOf(updateBusinessHours(deps, admin, input as never))).toBe('BAD_USER_INPUT');
    expect(await refusalOf(updateBusinessHours(deps, admin, { timezone: 'UTC', weekly: [], groupId: 'g_none' }))).toBe(
      'NOT_FOUND: No such agent group',
    );
    expect(await codeOf(loadBusinessHours(deps, admin, { groupId: ' ' }))).toBe('BAD_USER_INPUT');
  });

  it('each change is audited on its target with the calendar before and after; only a change that flips the state now is told at once', async () => {
    const t = { now: B - 60 * 60_000 };
    const clock: Deps = { ...deps, now: () => t.now };
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const group = await defaultGroupOf(m);
    const rec = recordEvents(deps, [globalChannel(m.bid)]);
    await rec.ready;
    // 09:00 UTC: the merchant closes (it was always open: told); the group's own, closed too, flips nothing.
    await updateBusinessHours(clock, admin, { timezone: 'UTC', weekly: every('10:00', '11:00') });
    await updateBusinessHours(clock, admin, { groupId: group, timezone: 'UTC', weekly: every('10:30', '11:00') });
    // The group's opened now: told.
    await updateBusinessHours(clock, admin, { groupId: group, timezone: 'UTC', weekly: every('08:00', '11:00') });
    await eventually(() => rec.of('business_hours.changed').length === 2, 'the two flips');
    await settle();
    expect(rec.of('business_hours.changed').map((e) => e.data)).toEqual([
      { group_id: null, open: false, next_open_at: B / 1000, timezone: 'UTC' },
      { group_id: group, open: true, next_open_at: null, timezone: 'UTC' },
    ]);
    rec.stop();
    const stored = (start: number, end: number) => ({
      timezone: 'UTC',
      weekly: WEEK.map((day) => ({ day, start, end })),
      holidays: [],
      exceptions: [],
    });
    expect(await auditRows(m.merchantId, 'business_hours.updated')).toEqual([
      ['merchant', m.merchantId, { businessHours: null }, { businessHours: stored(600, 660) }],
      ['agent_group', group, { businessHours: null }, { businessHours: stored(630, 660) }],
      ['agent_group', group, { businessHours: stored(630, 660) }, { businessHours: stored(480, 660) }],
    ]);
  });

  it('routing follows a group’s own calendar: closed by it, its queue is not served though the merchant is open', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const sales = `g_sales_${m.merchantId}`;
    await deps.db.insert(agentGroups).values({ id: sales, merchantId: m.merchantId, name: 'Sales' });
    const t = { now: B - 60 * 60_000 };
    const clock: Deps = { ...deps, now: () => t.now };
    await updateBusinessHours(clock, admin, { timezone: 'UTC', weekly: every('00:00', '24:00') });
    await updateBusinessHours(clock, admin, { groupId: sales, timezone: 'UTC', weekly: every('10:00', '11:00') });
    const visitor = await f.visitor(m);
    expect((await assignAgent(clock, visitor, { groupId: sales })).messageLeft?.reason).toBe('closed');
    await f.online(await f.agent(m, { group: 'Sales' }));
    expect(await drainQueue(clock, m.merchantId)).toBe(0);
    // Open by its calendar: served.
    t.now = B + 60_000;
    expect(await drainQueue(clock, m.merchantId)).toBe(1);
  });
});

describe('routing: least busy ties', () => {
  it('equally busy: the one assigned longest ago (never assigned first), then by id', () => {
    const agent = (id: string, at: number | null) =>
      ({ id, lastAssignedAt: at === null ? null : new Date(at) }) as Agent;
    const least = (eligible: Agent[], active: [string, number][] = []) =>
      chooseAgent(eligible, { policy: 'LEAST_BUSY', active: new Map(active), cursor: null, lastAgentId: null })?.id;
    const [recent, older, never, twin] = [
      agent('a', Date.UTC(2026, 10, 2)),
      agent('b', Date.UTC(2026, 10, 1)),
      agent('c', null),
      agent('d', Date.UTC(2026, 10, 1)),
    ];
    expect(least([recent, older])).toBe('b');
    expect(least([older, recent])).toBe('b');
    expect(least([recent, never, older])).toBe('c');
    expect(least([twin, older])).toBe('b');
    // Busier loses whatever its last assignment.
    expect(least([never, recent], [['c', 2]])).toBe('a');
  });
});

describe('routing rules: matching and setting, by value', () => {
  it('an attribute matches by its stored value as text; a missing one never; a page rule needs an entry page containing it', () => {
    const rules = [
      { attribute: 'tier', equals: 'null', priority: 5 },
      { attribute: 'orders', equals: '3', skill: 'vip' },
      { pageContains: '/pricing', skill: 'sales' },
    ];
    expect(evaluateRules(rules, new Map(), null)).toEqual({ requiredSkills: [], priority: 0 });
    expect(evaluateRules(rules, new Map([['tier', null]]), '/home')).toEqual({ requiredSkills: [], priority: 0 });
    expect(evaluateRules(rules, new Map<string, unknown>([['orders', 3]]), '/pricing/pro')).toEqual({
      requiredSkills: ['sales', 'vip'],
      priority: 0,
    });
  });

  it('a rule giving neither a skill nor a priority is refused; each change is audited with the rules before and after', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    expect(await codeOf(updateRoutingRules(deps, admin, { rules: [{ pageContains: '/pricing' }] }))).toBe(
      'BAD_USER_INPUT',
    );
    await updateRoutingRules(deps, admin, { rules: [{ pageContains: '/pricing', skill: 'sales' }] });
    await updateRoutingRules(deps, admin, { rules: [{ attribute: 'tier', equals: 'gold', priority: 10 }] });
    expect(await auditRows(m.merchantId, 'routing_rules.updated')).toEqual([
      ['merchant', m.merchantId, { rules: [] }, { rules: [{ pageContains: '/pricing', skill: 'sales' }] }],
      [
        'merchant',
        m.merchantId,
        { rules: [{ pageContains: '/pricing', skill: 'sales' }] },
        { rules: [{ attribute: 'tier', equals: 'gold', priority: 10 }] },
      ],
    ]);
  });
});
