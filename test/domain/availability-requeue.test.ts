import { and, asc, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { conversations } from '../../src/db/schema.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { agentChannel, globalChannel } from '../../src/resolvers/events.js';
import { listMessages } from '../../src/resolvers/messages/history.js';
import { settleExpiredPresence } from '../../src/resolvers/presence.js';
import { type Factories, recordEvents, type TestDeps, useTestDeps } from '../support/deps.js';

/** An agent offline beyond the presence grace: its conversations go back to the queue, at the front (docs/availability.md "Re-queue"). */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made), { ownPresence: true });

describe('re-queue when an agent goes offline', () => {
  it('its active conversations go to the front of the queue with events to everybody concerned, then to the next agent with room', async () => {
    const m = await f.merchant({ maxConcurrentChats: 2 });
    const [a, b] = [await f.agent(m), await f.agent(m)];
    const aOnline = await f.online(a);
    const [v1, v2, v3] = [await f.visitor(m), await f.visitor(m), await f.visitor(m)];
    expect((await assignAgent(deps, v1)).agent?.agentId).toBe(a.agentId);
    expect((await assignAgent(deps, v2)).agent?.agentId).toBe(a.agentId);
    // a is full: the third waits.
    expect((await assignAgent(deps, v3)).queuePosition).toBe(1);
    const rec = recordEvents(deps, [globalChannel(m.bid), agentChannel(a.agentId), v1.channel, v2.channel]);
    await rec.ready;

    // Disconnected, within the grace: nothing moves.
    await aOnline.disconnect();
    await settleExpiredPresence(deps);
    expect(await stateOf(v1.visitorId)).toBe('active');

    // Past the grace: offline, and its two conversations are back at the front, in their order.
    const real = deps.now;
    deps.now = () => real() + (deps.config.presenceGraceSeconds + 5) * 1000;
    try {
      await settleExpiredPresence(deps);
    } finally {
      deps.now = real;
    }
    const queue = await deps.db
      .select({ visitorId: conversations.visitorId, agentId: conversations.agentId })
      .from(conversations)
      .where(and(eq(conversations.merchantId, m.merchantId), eq(conversations.state, 'queued')))
      .orderBy(asc(conversations.queuedAt), asc(conversations.id));
    expect(queue).toEqual([
      { visitorId: v1.visitorId, agentId: null },
      { visitorId: v2.visitorId, agentId: null },
      { visitorId: v3.visitorId, agentId: null },
    ]);
    const requeued = await rec.first('conversation.requeued', v1.channel);
    expect(requeued?.data).toMatchObject({
      visitor_id: v1.visitorId,
      from_agent_id: a.agentId,
      reason: 'agent_offline',
    });
    await rec.first('conversation.queued', v2.channel);
    expect(rec.of('conversation.requeued', globalChannel(m.bid))).toHaveLength(2);
    expect(rec.of('conversation.requeued', agentChannel(a.agentId))).toHaveLength(2);
    expect(
      rec.of('conversation.queued', v1.channel).map((e) => (e.data as { queue_position: number }).queue_position),
    ).toEqual([1]);
    expect(
      rec.of('conversation.queued', v2.channel).map((e) => (e.data as { queue_position: number }).queue_position),
    ).toEqual([2]);
    // The visitor's history says what happened.
    const history = await listMessages(deps, v1, {});
    expect(history.messages.at(-1)?.meta).toMatchObject({ event: 'requeued', from_agent_id: a.agentId });

    // The next agent with room takes them first (capacity 2: v3 still waits).
    await f.online(b);
    expect([await stateOf(v1.visitorId), await stateOf(v2.visitorId), await stateOf(v3.visitorId)]).toEqual([
      'active',
      'active',
      'queued',
    ]);
    const [taken] = await deps.db.select().from(conversations).where(eq(conversations.visitorId, v1.visitorId));
    expect(taken?.agentId).toBe(b.agentId);
    rec.stop();
  });
});

async function stateOf(visitorId: string) {
  const [row] = await deps.db
    .select({ state: conversations.state })
    .from(conversations)
    .where(eq(conversations.visitorId, visitorId));
  return row?.state;
}
