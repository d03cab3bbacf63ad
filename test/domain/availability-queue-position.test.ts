import { describe, expect, it } from 'vitest';
import { claimConversation } from '../../src/resolvers/conversations/agent-actions.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { drainAllQueues } from '../../src/resolvers/conversations/queue.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { type Factories, recordEvents, type TestDeps, useTestDeps } from '../support/deps.js';

/**
 * The queue position is pushed to the visitor as it moves (docs/availability.md "Guarantees":
 * `conversation.queue_position` on the visitor's channel, once per new position).
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const positions = (rec: ReturnType<typeof recordEvents>, channel: string) =>
  rec.of('conversation.queue_position', channel).map((e) => (e.data as { queue_position: number }).queue_position);

describe('the queue position is told to the visitor as it moves', () => {
  it('a visitor ahead leaving, an agent claiming or routing serving one: each visitor behind hears its new position once', async () => {
    const m = await f.merchant({ maxConcurrentChats: 1 });
    const a = await f.agent(m);
    await f.online(a);
    const [v1, v2, v3, v4] = [await f.visitor(m), await f.visitor(m), await f.visitor(m), await f.visitor(m)];
    expect((await assignAgent(deps, v1)).agent?.agentId).toBe(a.agentId);
    expect((await assignAgent(deps, v2)).queuePosition).toBe(1);
    expect((await assignAgent(deps, v3)).queuePosition).toBe(2);
    expect((await assignAgent(deps, v4)).queuePosition).toBe(3);
    const rec = recordEvents(deps, [v2.channel, v3.channel, v4.channel]);
    await rec.ready;

    // v2 gives up: v3 and v4 move up one place; v2 hears nothing (it left).
    await closeConversation(deps, v2);
    await rec.first('conversation.queue_position', v4.channel);
    await rec.first('conversation.queue_position', v3.channel);
    expect(positions(rec, v3.channel)).toEqual([1]);
    expect(positions(rec, v4.channel)).toEqual([2]);
    expect(rec.of('conversation.queue_position', v2.channel)).toEqual([]);
    const pushed = rec.of('conversation.queue_position', v3.channel)[0]?.data;
    expect(pushed).toMatchObject({ visitor_id: v3.visitorId, state: 'queued', queue_position: 1 });

    // A periodic drain with nothing moved tells nobody again.
    await drainAllQueues(deps);

    // The agent's conversation closes: routing serves v3, and v4 is now first.
    await closeConversation(deps, a, { visitorId: v1.visitorId });
    await rec.first('conversation.assigned', v3.channel);
    await expect.poll(() => positions(rec, v4.channel)).toEqual([2, 1]);
    expect(positions(rec, v3.channel)).toEqual([1]);

    // Another agent claims v4's conversation: nobody is behind it, nothing more to tell.
    const b = await f.agent(m);
    await f.online(b);
    const v5 = await f.visitor(m);
    // b came online with room: v4 went to it; v5 waits behind nobody (first).
    expect((await assignAgent(deps, v5)).queuePosition).toBe(1);
    rec.stop();
  });

  it('with nobody online, messages left move up as the ones ahead are claimed', async () => {
    const m = await f.merchant();
    const a = await f.agent(m);
    const [v1, v2, v3] = [await f.visitor(m), await f.visitor(m), await f.visitor(m)];
    for (const v of [v1, v2, v3]) expect((await assignAgent(deps, v)).messageLeft?.reason).toBe('no_agent');
    const rec = recordEvents(deps, [v2.channel, v3.channel]);
    await rec.ready;
    // An agent takes the oldest from the list of messages left (claim, not routing).
    await claimConversation(deps, a, { visitorId: v1.visitorId });
    await expect.poll(() => [positions(rec, v2.channel), positions(rec, v3.channel)]).toEqual([[1], [2]]);
    rec.stop();
  });
});
