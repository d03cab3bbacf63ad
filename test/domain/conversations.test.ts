import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { agentGroups, agents, conversations, merchants } from '../../src/db/schema.js';
import { newId } from '../../src/ids.js';
import { claimConversation, pinConversation } from '../../src/resolvers/conversations/agent-actions.js';
import { closeConversation, closeIdleConversations } from '../../src/resolvers/conversations/closing.js';
import { listConversations, loadConversation } from '../../src/resolvers/conversations/queries.js';
import { drainAllQueues, drainQueueQuietly } from '../../src/resolvers/conversations/queue.js';
import { rateConversation } from '../../src/resolvers/conversations/rating.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { transferConversation } from '../../src/resolvers/conversations/transfer.js';
import { agentChannel, globalChannel } from '../../src/resolvers/events.js';
import { listMessages } from '../../src/resolvers/messages/history.js';
import { markRead } from '../../src/resolvers/messages/read.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import { setAgentState } from '../../src/resolvers/presence.js';
import {
  eventually,
  type Factories,
  recordEvents,
  refusalOf,
  type TestDeps,
  type TestMerchant,
  useTestDeps,
} from '../support/deps.js';

/** Conversation rules (docs/chat.md) not already covered by test/domain/chat-conversations.test.ts. */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const setMerchant = (m: TestMerchant, set: Partial<typeof merchants.$inferInsert>) =>
  deps.db.update(merchants).set(set).where(eq(merchants.id, m.merchantId));

async function group(m: TestMerchant, name: string) {
  const id = newId('g');
  await deps.db.insert(agentGroups).values({ id, merchantId: m.merchantId, name });
  return id;
}

const activeChat = (switches: Record<string, string> = {}) =>
  f.activeChat({ switches, agentNickname: 'Alice', visitorNickname: 'Vic' });

describe('Reading a conversation', () => {
  it('null before the first chat; then the open one, with the view of each side; then the latest closed one', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m, { nickname: 'Alice' });
    const visitor = await f.visitor(m, { nickname: 'Vic' });
    expect(await loadConversation(deps, visitor)).toBeNull();
    expect(await loadConversation(deps, agent, { visitorId: visitor.visitorId })).toBeNull();
    const before = Math.floor(Date.now() / 1000);
    const queued = await assignAgent(deps, visitor);
    expect(queued).toMatchObject({ state: 'queued', agent: null, queuePosition: 1 });
    // The legacy `timestamp` of a new conversation: its opening, in seconds.
    const opened = (await loadConversation(deps, visitor))?.timestamp ?? 0;
    expect(opened).toBeGreaterThanOrEqual(before);
    expect(opened).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
    await f.online(agent);
    const view = await loadConversation(deps, agent, { visitorId: visitor.visitorId });
    expect(view).toMatchObject({
      conversationId: queued.conversationId,
      visitorId: visitor.visitorId,
      visitorName: 'Vic',
      state: 'active',
      agent: { agentId: agent.agentId, nickname: 'Alice', avatar: '' },
      queuePosition: null,
      lastSeq: 1,
      unreadCount: 0,
      pinnedAt: 0,
      closedAt: null,
      closedBy: null,
      rating: null,
    });
    expect(view?.groupId).toMatch(/^g/);
    expect(view?.createdAt).toBeGreaterThan(Date.now() - 600_000);
    await sendMessage(deps, visitor, { clientMsgId: 'v1', content: 'hi' });
    await sendMessage(deps, visitor, { clientMsgId: 'v2', content: 'there' });
    await sendMessage(deps, agent, { visitorId: visitor.visitorId, clientMsgId: 'a1', content: 'hello' });
    // Unread counts the other side's messages after the reader's position.
    expect((await loadConversation(deps, agent, { visitorId: visitor.visitorId }))?.unreadCount).toBe(0);
    expect((await loadConversation(deps, visitor))?.unreadCount).toBe(1);
    await markRead(deps, agent, { visitorId: visitor.visitorId, seq: 1 });
    const closed = await closeConversation(deps, visitor);
    expect(closed.closedAt).toBeGreaterThan(Date.now() - 600_000);
    expect(await loadConversation(deps, visitor)).toMatchObject({ state: 'closed', closedBy: 'visitor', pinnedAt: 0 });
    const second = await assignAgent(deps, visitor);
    expect(second.conversationId).not.toBe(queued.conversationId);
    expect((await loadConversation(deps, visitor))?.conversationId).toBe(second.conversationId);
    // Of two closed conversations, the newer one.
    await closeConversation(deps, visitor);
    expect(await loadConversation(deps, agent, { visitorId: visitor.visitorId })).toMatchObject({
      conversationId: second.conversationId,
      state: 'closed',
    });
  });
});

describe('Listing', () => {
  it('every scope pages with its cursor to the end; a foreign cursor is refused', async () => {
    const m = await f.merchant({ maxConcurrentChats: 3 });
    const a = await f.agent(m);
    const admin = await f.agent(m, { level: 'admin' });
    await f.online(a);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await assignAgent(deps, await f.visitor(m))).conversationId);
    const walk = async (viewer: typeof a, scope: 'mine' | 'queue' | 'all') => {
      const seen: string[] = [];
      let after: string | undefined;
      for (let page = 0; page < 10; page++) {
        const got = await listConversations(deps, viewer, { scope, first: 2, ...(after ? { after } : {}) });
        seen.push(...got.nodes.map((n) => n.conversationId));
        if (!got.hasNextPage) {
          expect(got.endCursor === null).toBe(got.nodes.length === 0);
          return seen;
        }
        after = got.endCursor as string;
      }
      throw new Error('no end');
    };
    // The queue is served oldest first; the administrators' list is newest first.
    expect(await walk(a, 'queue')).toEqual(ids.slice(3));
    expect(await walk(admin, 'all')).toEqual([...ids].reverse());
    expect((await walk(a, 'mine')).sort()).toEqual(ids.slice(0, 3).sort());
    expect(await walk(a, 'mine')).toHaveLength(3);
    // Latest activity first: a message moves a conversation to the top of mine.
    await deps.db.update(conversations).set({ timestamp: 1 }).where(eq(conversations.agentId, a.agentId));
    await deps.db
      .update(conversations)
      .set({ timestamp: 5 })
      .where(eq(conversations.id, ids[1] as string));
    expect((await listConversations(deps, a, { first: 1 })).nodes[0]?.conversationId).toBe(ids[1]);
    for (const after of [
      'not-a-cursor',
      Buffer.from('{"a":1}').toString('base64url'),
      Buffer.from('[true]').toString('base64url'),
    ])
      expect(await refusalOf(listConversations(deps, a, { scope: 'queue', after })), after).toBe(
        'BAD_USER_INPUT: after is not a cursor of this list',
      );
    expect(await refusalOf(listConversations(deps, a, { scope: 'all' }))).toBe(
      'FORBIDDEN: scope all is for administrators',
    );
    expect(await refusalOf(listConversations(deps, a, { first: 101 }))).toMatch(/^BAD_USER_INPUT: first /);
    // The agent's list counts unread visitor messages.
    const v = (await listConversations(deps, a, { first: 1 })).nodes[0];
    expect(v?.unreadCount).toBe(0);
  });
});

describe('Assignment: conversation.queued means waiting', () => {
  it('is published once for a conversation no agent can take, never for one routed at once', async () => {
    const m = await f.merchant();
    const feed = recordEvents(deps, [globalChannel(m.bid)]);
    await feed.ready;
    // The only agent is busy elsewhere: at capacity 1 with a first visitor.
    const agent = await f.agent(m, { maxConcurrentChats: 1 });
    await f.online(agent);
    const first = await assignAgent(deps, await f.visitor(m));
    expect(first.state).toBe('active');
    const second = await assignAgent(deps, await f.visitor(m));
    expect(second.state).toBe('queued');
    await eventually(() => feed.of('conversation.queued').length === 1, 'the waiting one announced');
    expect(feed.of('conversation.queued').map((e) => (e.data as { conversation_id: string }).conversation_id)).toEqual([
      second.conversationId,
    ]);
    expect(feed.of('conversation.queued')[0]?.data).toMatchObject({ state: 'queued', queue_position: 1 });
    feed.stop();
  });
});

describe('Assignment', () => {
  it('an agent serves its own group; an agent without a group serves the default group', async () => {
    const m = await f.merchant();
    const sales = await group(m, 'sales');
    const generalist = await f.agent(m);
    const seller = await f.agent(m, { group: 'sales' });
    await f.online(generalist);
    await f.online(seller);
    const feed = recordEvents(deps, [globalChannel(m.bid)]);
    await feed.ready;
    const buyer = await f.visitor(m);
    const toSales = await assignAgent(deps, buyer, { groupId: sales });
    expect(toSales.agent?.agentId).toBe(seller.agentId);
    const toDefault = await assignAgent(deps, await f.visitor(m));
    expect(toDefault.agent?.agentId).toBe(generalist.agentId);
    expect(await refusalOf(assignAgent(deps, await f.visitor(m), { groupId: 'g_missing' }))).toBe(
      'NOT_FOUND: No such agent group',
    );
    await eventually(() => feed.of('conversation.assigned').length === 2, 'two assignments');
    expect(feed.of('conversation.assigned')[0]?.data).toMatchObject({
      conversation_id: toSales.conversationId,
      state: 'active',
      agent: { agent_id: seller.agentId },
      by: 'routing',
    });
    // Routed at once: it never waited, so no `conversation.queued` was published for it.
    expect(feed.of('conversation.queued')).toEqual([]);
    const joined = (await listMessages(deps, buyer)).messages[0];
    expect(joined).toMatchObject({ senderType: 'system', type: 'system' });
    expect(joined?.content).toMatch(/ joined the conversation$/);
    expect(joined?.meta).toMatchObject({ event: 'assigned', agent_id: seller.agentId, by: 'routing' });
    feed.stop();
  });

  it('a requested agent of the group gets it even when busier; a requested but unavailable one does not', async () => {
    const m = await f.merchant();
    const a = await f.agent(m);
    const b = await f.agent(m);
    await f.online(a);
    await f.online(b);
    const first = await assignAgent(deps, await f.visitor(m));
    const busier = first.agent?.agentId as string;
    const other = busier === a.agentId ? b : a;
    expect((await assignAgent(deps, await f.visitor(m), { agentId: busier })).agent?.agentId).toBe(busier);
    await setAgentState(deps, busier === a.agentId ? a : b, 'busy');
    expect((await assignAgent(deps, await f.visitor(m), { agentId: busier })).agent?.agentId).toBe(other.agentId);
  });

  it('the queue drains by bid and across merchants; an unknown merchant is not an error', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    const waiting = await assignAgent(deps, await f.visitor(m));
    expect(waiting.state).toBe('queued');
    // Online in the presence store without the drain a socket's arrival triggers.
    await deps.presence.touch(agent.agentId, 'test-connection', Date.now() + 60_000);
    await deps.presence.settle(agent.agentId, m.bid, Date.now(), 'online');
    await drainQueueQuietly(deps, { bid: 'no-such-bid' });
    await drainQueueQuietly(deps, { bid: m.bid });
    expect((await visitorView(m, waiting.conversationId))?.state).toBe('active');
    const m2 = await f.merchant();
    const agent2 = await f.agent(m2);
    const waiting2 = await assignAgent(deps, await f.visitor(m2));
    await deps.presence.touch(agent2.agentId, 'test-connection', Date.now() + 60_000);
    await deps.presence.settle(agent2.agentId, m2.bid, Date.now(), 'online');
    expect(await drainAllQueues(deps)).toBeGreaterThanOrEqual(1);
    expect((await visitorView(m2, waiting2.conversationId))?.state).toBe('active');
  });
});

const visitorView = async (m: TestMerchant, conversationId: string) => {
  const [c] = await deps.db.select().from(conversations).where(eq(conversations.id, conversationId));
  return c && c.merchantId === m.merchantId ? c : undefined;
};

describe('Claim', () => {
  it('only a queued conversation; a visitor without an open one has nothing to claim', async () => {
    const m = await f.merchant();
    const a = await f.agent(m, { nickname: 'Alice' });
    const b = await f.agent(m);
    const v = await f.visitor(m);
    expect(await refusalOf(claimConversation(deps, a, { visitorId: v.visitorId }))).toBe(
      'CONVERSATION_CLOSED: This visitor has no open conversation',
    );
    await assignAgent(deps, v);
    const feed = recordEvents(deps, [agentChannel(a.agentId), v.channel]);
    await feed.ready;
    const claimed = await claimConversation(deps, a, { visitorId: v.visitorId });
    expect(claimed).toMatchObject({ state: 'active', agent: { agentId: a.agentId, nickname: 'Alice' } });
    expect(await refusalOf(claimConversation(deps, b, { visitorId: v.visitorId }))).toBe(
      'ALREADY_CLAIMED: This conversation already has an agent',
    );
    await eventually(() => feed.of('conversation.assigned').length === 2, 'the agent and the visitor told');
    expect(feed.of('conversation.assigned', v.channel)[0]?.data).toMatchObject({ by: 'claim' });
    const [row] = await deps.db.select().from(agents).where(eq(agents.id, a.agentId));
    expect(row?.lastAssignedAt).not.toBeNull();
    expect((await listMessages(deps, v)).messages[0]).toMatchObject({
      content: 'Alice joined the conversation',
      meta: { event: 'assigned', agent_id: a.agentId, nickname: 'Alice', by: 'claim' },
    });
    feed.stop();
  });
});

describe('Transfer', () => {
  it('never to oneself, nor to a disabled, ticket or busy agent; not both an agent and a group', async () => {
    const { m, agent, visitor } = await activeChat();
    const disabled = await f.agent(m);
    await f.online(disabled);
    await deps.db.update(agents).set({ disabled: true }).where(eq(agents.id, disabled.agentId));
    const ticket = await f.agent(m, { level: 'ticket_agent' });
    const busy = await f.agent(m);
    await f.online(busy);
    await setAgentState(deps, busy, 'busy');
    const to = (toAgentId: string) => transferConversation(deps, agent, { visitorId: visitor.visitorId, toAgentId });
    expect(await refusalOf(to(agent.agentId))).toBe('BAD_USER_INPUT: toAgentId is yourself');
    for (const target of [disabled, ticket, busy])
      expect(await refusalOf(to(target.agentId))).toBe('AGENT_UNAVAILABLE: That agent is not online');
    expect(await refusalOf(to('no-such-agent'))).toBe('NOT_FOUND: No such agent');
    expect(
      await refusalOf(
        transferConversation(deps, agent, { visitorId: visitor.visitorId, toAgentId: busy.agentId, groupId: 'g' }),
      ),
    ).toMatch(/^BAD_USER_INPUT: .*give either toAgentId or groupId, not both/);
  });

  it('to an agent: everyone concerned is told, the old agent sees the system message, the new one is marked assigned', async () => {
    const { m, agent, visitor } = await activeChat();
    const bob = await f.agent(m, { nickname: 'Bob' });
    await f.online(bob);
    await pinConversation(deps, agent, { visitorId: visitor.visitorId });
    const feed = recordEvents(deps, [
      globalChannel(m.bid),
      agentChannel(agent.agentId),
      agentChannel(bob.agentId),
      visitor.channel,
    ]);
    await feed.ready;
    const at = Date.now();
    const moved = await transferConversation({ ...deps, now: () => at }, agent, {
      visitorId: visitor.visitorId,
      toAgentId: bob.agentId,
    });
    expect(moved).toMatchObject({ state: 'active', agent: { agentId: bob.agentId, nickname: 'Bob' } });
    await eventually(() => feed.of('conversation.transferred').length === 4, 'four channels told');
    const created = feed.of('message.created', agentChannel(agent.agentId)).at(-1)?.data as {
      message: { content: string; meta: unknown };
    };
    expect(created.message.content).toBe('Transferred to Bob');
    expect(created.message.meta).toEqual({
      event: 'transferred',
      from_agent_id: agent.agentId,
      to_agent_id: bob.agentId,
      group_id: moved.groupId,
    });
    expect(feed.of('message.created', agentChannel(bob.agentId))).toHaveLength(1);
    const [row] = await deps.db.select().from(agents).where(eq(agents.id, bob.agentId));
    expect(row?.lastAssignedAt?.getTime()).toBe(at);
    // The old agent no longer has it.
    expect(await refusalOf(pinConversation(deps, agent, { visitorId: visitor.visitorId }))).toBe(
      'NOT_ASSIGNED: This conversation is assigned to another agent',
    );
    feed.stop();
  });

  it("back to another group's queue: queued there, unpinned, and the visitor told its position", async () => {
    const { m, agent, visitor } = await activeChat();
    const vip = await group(m, 'vip');
    await pinConversation(deps, agent, { visitorId: visitor.visitorId });
    const feed = recordEvents(deps, [visitor.channel]);
    await feed.ready;
    const back = await transferConversation(deps, agent, { visitorId: visitor.visitorId, groupId: vip });
    expect(back).toMatchObject({ state: 'queued', agent: null, groupId: vip, pinnedAt: 0, queuePosition: 1 });
    await eventually(() => feed.of('conversation.queued').length === 1, 'queued again');
    expect(feed.of('conversation.transferred')[0]?.data).toMatchObject({
      from_agent_id: agent.agentId,
      to: null,
      group_id: vip,
      state: 'queued',
    });
    expect(feed.of('conversation.queued')[0]?.data).toMatchObject({ group_id: vip, queue_position: 1 });
    const last = (await listMessages(deps, visitor)).messages.at(-1);
    expect(last?.content).toBe('Transferred back to the queue');
    expect(
      await refusalOf(transferConversation(deps, agent, { visitorId: visitor.visitorId, groupId: 'g_none' })),
    ).toBe('NOT_FOUND: No such agent group');
    feed.stop();
  });

  it('an administrator may move any conversation of the merchant', async () => {
    const { m, agent, visitor } = await activeChat();
    const admin = await f.agent(m, { level: 'admin' });
    // Back to the queue, where routing gives it to the only online agent again.
    const back = await transferConversation(deps, admin, { visitorId: visitor.visitorId });
    expect(back).toMatchObject({ state: 'active', agent: { agentId: agent.agentId } });
    expect((await listMessages(deps, visitor)).messages.map((x) => x.meta?.event)).toContain('transferred');
  });
});

describe('Pin', () => {
  it('at the time of pinning; a queued conversation, or another agent’s, cannot be pinned; an administrator may', async () => {
    const { m, agent, visitor } = await activeChat();
    const at = 1_800_000_000_500;
    expect((await pinConversation({ ...deps, now: () => at }, agent, { visitorId: visitor.visitorId })).pinnedAt).toBe(
      1_800_000_000,
    );
    const other = await f.agent(m);
    expect(await refusalOf(pinConversation(deps, other, { visitorId: visitor.visitorId }))).toBe(
      'NOT_ASSIGNED: This conversation is assigned to another agent',
    );
    const admin = await f.agent(m, { level: 'admin' });
    expect((await pinConversation(deps, admin, { visitorId: visitor.visitorId, pinned: false })).pinnedAt).toBe(0);
    const queued = await f.visitor(m);
    await setAgentState(deps, agent, 'busy');
    await assignAgent(deps, queued);
    expect(await refusalOf(pinConversation(deps, agent, { visitorId: queued.visitorId }))).toBe(
      'NOT_ASSIGNED: This conversation has no agent yet: claim it first',
    );
  });
});

describe('Closing', () => {
  it('any agent may close a queued conversation; the events name who closed it; no invitation when the switches are off', async () => {
    const m = await f.merchant({ switches: { session_invite_rating: 'off', session_invite_resolved: 'off' } });
    const agent = await f.agent(m);
    const v = await f.visitor(m);
    await assignAgent(deps, v);
    const feed = recordEvents(deps, [globalChannel(m.bid), v.channel]);
    await feed.ready;
    const closed = await closeConversation(deps, agent, { visitorId: v.visitorId });
    expect(closed).toMatchObject({ state: 'closed', closedBy: 'agent' });
    await eventually(() => feed.of('conversation.closed').length === 2, 'closed on both channels');
    expect(feed.of('conversation.closed', v.channel)[0]?.data).toMatchObject({
      conversation_id: closed.conversationId,
      state: 'closed',
      agent_id: null,
      closed_by: 'agent',
    });
    expect((await listMessages(deps, v)).messages.at(-1)).toMatchObject({
      content: 'Closed by the agent',
      meta: { event: 'closed', closed_by: 'agent' },
    });
    expect(feed.of('conversation.rating_invited')).toEqual([]);
    feed.stop();
  });

  it('an active conversation: its agent is told; resolved alone is invited when only that switch is on', async () => {
    const { agent, visitor } = await activeChat({ session_invite_rating: 'off', session_invite_resolved: 'on' });
    const feed = recordEvents(deps, [agentChannel(agent.agentId), visitor.channel]);
    await feed.ready;
    const closed = await closeConversation(deps, visitor);
    await eventually(() => feed.of('conversation.rating_invited').length === 1, 'the invitation');
    expect(feed.of('conversation.rating_invited')[0]?.data).toEqual({
      conversation_id: closed.conversationId,
      rating: false,
      resolved: true,
    });
    await eventually(() => feed.of('conversation.closed', agentChannel(agent.agentId)).length === 1, 'the agent told');
    expect(feed.of('conversation.closed', agentChannel(agent.agentId))[0]?.data).toMatchObject({
      agent_id: agent.agentId,
      closed_by: 'visitor',
    });
    feed.stop();
  });

  it('idle: exactly idle_close_minutes without activity closes; a second less does not; 0 never closes', async () => {
    const m = await f.merchant();
    const never = await f.merchant();
    await setMerchant(m, { idleCloseMinutes: 5 });
    await setMerchant(never, { idleCloseMinutes: 0 });
    const now = 1_800_000_000_000;
    const at = { ...deps, now: () => now };
    const put = async (merchant: TestMerchant, secondsAgo: number) => {
      const v = await f.visitor(merchant);
      const c = await assignAgent(deps, v);
      await deps.db
        .update(conversations)
        .set({ timestamp: now / 1000 - secondsAgo })
        .where(eq(conversations.id, c.conversationId));
      return v;
    };
    const due = await put(m, 300);
    const almost = await put(m, 299);
    const forever = await put(never, 10_000_000);
    expect(await closeIdleConversations(at)).toBeGreaterThanOrEqual(1);
    expect(await loadConversation(deps, due)).toMatchObject({ state: 'closed', closedBy: 'idle' });
    expect((await listMessages(deps, due)).messages.at(-1)?.content).toBe('Closed after inactivity');
    expect((await loadConversation(deps, almost))?.state).toBe('queued');
    expect((await loadConversation(deps, forever))?.state).toBe('queued');
    expect(await closeIdleConversations(at)).toBe(0);
  });
});

describe('Rating', () => {
  it('resolved needs its own switch; the latest closed conversation, or the one named; the system message says the score', async () => {
    const m = await f.merchant({ switches: { session_invite_rating: 'on' } });
    const v = await f.visitor(m);
    const first = await assignAgent(deps, v);
    await closeConversation(deps, v);
    expect(await refusalOf(rateConversation(deps, v, { score: 3, resolved: true }))).toBe(
      'RATING_NOT_ALLOWED: Resolved feedback is not enabled for this merchant',
    );
    const second = await assignAgent(deps, v);
    await closeConversation(deps, v);
    const latest = await rateConversation(deps, v, { score: 2 });
    expect(latest).toMatchObject({
      conversationId: second.conversationId,
      rating: { score: 2, resolved: null, comment: null },
    });
    const named = await rateConversation(deps, v, { conversationId: first.conversationId, score: 5 });
    expect(named.conversationId).toBe(first.conversationId);
    expect(await refusalOf(rateConversation(deps, v, { conversationId: first.conversationId, score: 5 }))).toBe(
      'RATING_NOT_ALLOWED: This conversation was already rated',
    );
    const other = await f.visitor(m);
    expect(await refusalOf(rateConversation(deps, other, { conversationId: first.conversationId, score: 5 }))).toBe(
      'RATING_NOT_ALLOWED: Only a closed conversation of yours can be rated',
    );
    const history = (await listMessages(deps, v)).messages.filter((x) => x.meta?.event === 'rated');
    expect(history.map((x) => x.content)).toEqual(['Rated 5/5', 'Rated 2/5']);
  });
});
