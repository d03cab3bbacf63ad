import { eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agents, conversations, merchants, webhookDeliveries, webhookEndpoints } from '../../src/db/schema.js';
import { newId } from '../../src/ids.js';
import { leaveMessage } from '../../src/resolvers/availability/messages-left.js';
import { claimConversation, pinConversation } from '../../src/resolvers/conversations/agent-actions.js';
import { closeConversation, closeIdleConversations } from '../../src/resolvers/conversations/closing.js';
import { listConversations, loadConversation } from '../../src/resolvers/conversations/queries.js';
import { rateConversation } from '../../src/resolvers/conversations/rating.js';
import { requeueOfflineAgent } from '../../src/resolvers/conversations/requeue.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { transferConversation } from '../../src/resolvers/conversations/transfer.js';
import { createLabel, labelConversation } from '../../src/resolvers/desk/labels.js';
import { agentChannel } from '../../src/resolvers/events.js';
import { authenticateApiKey } from '../../src/resolvers/integration/api-keys/authenticate.js';
import { createApiKey } from '../../src/resolvers/integration/api-keys/keys.js';
import { listMessages } from '../../src/resolvers/messages/history.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import type { VisitorViewer } from '../../src/resolvers/viewer.js';
import { loadWorkbench } from '../../src/resolvers/workbench.js';
import {
  type Factories,
  factories,
  meanwhileBeforeNextTransaction,
  privateTestDeps,
  recordEvents,
  refusalOf,
  type TestDeps,
  type TestMerchant,
  useTestDeps,
} from '../support/deps.js';

/**
 * Conversation rules (docs/chat.md) at their edges: the idle sweep's count, its events and the
 * queue it frees, and what changes between its read and its lock; the system messages' sender;
 * a transfer's events; the agent's avatar in the view; a re-queue only of an agent offline.
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const stateOf = async (d: TestDeps, v: VisitorViewer) => (await loadConversation(d, v))?.state;

describe('Idle close', () => {
  // The sweep reads every merchant's conversations: on a database of their own its count is exact.
  let own: TestDeps;
  let g: Factories;
  beforeAll(async () => {
    own = await privateTestDeps();
    g = factories(own);
  });
  afterAll(async () => {
    await g?.cleanup();
    await own?.close();
  });

  const idleMinutes = (d: TestDeps, m: TestMerchant, minutes: number) =>
    d.db.update(merchants).set({ idleCloseMinutes: minutes }).where(eq(merchants.id, m.merchantId));
  /** Makes the visitor's open conversation last active `seconds` before `nowMs`. */
  const quietSince = async (d: TestDeps, v: VisitorViewer, nowMs: number, seconds: number) => {
    const id = (await loadConversation(d, v))?.conversationId ?? '';
    await d.db
      .update(conversations)
      .set({ timestamp: Math.floor(nowMs / 1000) - seconds })
      .where(eq(conversations.id, id));
  };

  it('closes exactly the conversations due, queued ones a visitor wrote in included; tells the visitor at once; serves the queue the close freed', async () => {
    const m = await g.merchant({ maxConcurrentChats: 1 });
    await idleMinutes(own, m, 10);
    const agent = await g.agent(m);
    await g.online(agent);
    const [held, waiting, wrote] = [await g.visitor(m), await g.visitor(m), await g.visitor(m)];
    expect((await assignAgent(own, held)).state).toBe('active');
    expect((await assignAgent(own, waiting)).state).toBe('queued');
    expect((await assignAgent(own, wrote)).state).toBe('queued');
    // A queued conversation its visitor wrote in (not a message left) is idle like any other.
    await sendMessage(own, wrote, { clientMsgId: 'w1', content: 'anyone?' });
    const now = Date.now();
    await quietSince(own, held, now, 11 * 60);
    await quietSince(own, wrote, now, 11 * 60);
    const feed = recordEvents(own, [held.channel]);
    await feed.ready;

    expect(await closeIdleConversations(own)).toBe(2);
    // Published by the sweep itself (no background drain runs here).
    const closed = await feed.first('conversation.closed', held.channel);
    expect(closed.data).toMatchObject({ state: 'closed', agent_id: agent.agentId, closed_by: 'idle' });
    expect(await stateOf(own, wrote)).toBe('closed');
    expect((await listMessages(own, held)).messages.at(-1)).toMatchObject({
      senderType: 'system',
      senderId: '',
      type: 'system',
      content: 'Closed after inactivity',
      meta: { event: 'closed', closed_by: 'idle' },
    });
    // The agent's seat the close freed is taken by the one still waiting.
    expect(await loadConversation(own, waiting)).toMatchObject({
      state: 'active',
      agent: { agentId: agent.agentId },
    });
    expect(await closeIdleConversations(own)).toBe(0);
    feed.stop();
  });

  it('what changes between its read and its lock keeps a conversation open: a message, a close, a message left, idle_close_minutes set to 0', async () => {
    const m = await g.merchant();
    const never = await g.merchant();
    await idleMinutes(own, m, 10);
    await idleMinutes(own, never, 10);
    const [due, writes, closes, leaves] = [
      await g.visitor(m),
      await g.visitor(m),
      await g.visitor(m),
      await g.visitor(m),
    ];
    const switchedOff = await g.visitor(never);
    for (const v of [due, writes, closes, leaves, switchedOff]) await assignAgent(own, v);
    // With nobody online they became messages left at once; as conversations that merely wait they
    // are the sweep's (a message left written in is never closed for idleness).
    await own.db
      .update(conversations)
      .set({ leftAt: null, leftReason: null })
      .where(inArray(conversations.merchantId, [m.merchantId, never.merchantId]));
    // The visitor who will leave a message has written in its queued conversation.
    await sendMessage(own, leaves, { clientMsgId: 'l1', content: 'call me back' });
    // The sweep runs 5 minutes from now; every conversation has been quiet 11 minutes by then.
    const sweepAt = Date.now() + 5 * 60_000;
    for (const v of [due, writes, closes, leaves, switchedOff]) await quietSince(own, v, sweepAt, 11 * 60);

    const meanwhile = meanwhileBeforeNextTransaction({ ...own, now: () => sweepAt }, async () => {
      // A message now: 5 minutes before the sweep's time, within its 10.
      await sendMessage(own, writes, { clientMsgId: 'w1', content: 'still here' });
      await closeConversation(own, closes);
      await leaveMessage(own, m.merchantId, leaves.visitorId, {
        reason: 'no_agent',
        nextOpenAt: null,
        timezone: 'UTC',
      });
      await idleMinutes(own, never, 0);
    });
    expect(await closeIdleConversations(meanwhile)).toBe(1);
    expect(await loadConversation(own, due)).toMatchObject({ state: 'closed', closedBy: 'idle' });
    expect(await stateOf(own, writes)).toBe('queued');
    expect(await loadConversation(own, closes)).toMatchObject({ state: 'closed', closedBy: 'visitor' });
    const [left] = await own.db
      .select({ state: conversations.state, leftReason: conversations.leftReason })
      .from(conversations)
      .where(eq(conversations.visitorId, leaves.visitorId));
    expect(left).toEqual({ state: 'queued', leftReason: 'no_agent' });
    expect(await stateOf(own, switchedOff)).toBe('queued');
  });
});

describe('System messages', () => {
  it('a transfer, a close and a rating each write one from the system (no sender id), saying what happened', async () => {
    const { m, agent, visitor } = await f.activeChat({
      switches: { session_invite_rating: 'on' },
      agentNickname: 'Alice',
    });
    const bob = await f.agent(m, { nickname: 'Bob' });
    await f.online(bob);
    await transferConversation(deps, agent, { visitorId: visitor.visitorId, toAgentId: bob.agentId });
    await closeConversation(deps, bob, { visitorId: visitor.visitorId });
    await rateConversation(deps, visitor, { score: 4 });
    const system = (await listMessages(deps, visitor)).messages.filter((x) => x.senderType === 'system');
    expect(system.slice(-3).map((x) => ({ senderId: x.senderId, type: x.type, event: x.meta?.event }))).toEqual([
      { senderId: '', type: 'system', event: 'transferred' },
      { senderId: '', type: 'system', event: 'closed' },
      { senderId: '', type: 'system', event: 'rated' },
    ]);
    expect(system.slice(-3).map((x) => x.content)).toEqual(['Transferred to Bob', 'Closed by the agent', 'Rated 4/5']);
  });
});

describe('Transfer', () => {
  it('to an agent: the visitor is told of the transfer, never that it waits', async () => {
    const { m, agent, visitor } = await f.activeChat();
    const bob = await f.agent(m);
    await f.online(bob);
    const feed = recordEvents(deps, [visitor.channel, agentChannel(bob.agentId)]);
    await feed.ready;
    await transferConversation(deps, agent, { visitorId: visitor.visitorId, toAgentId: bob.agentId });
    await feed.first('conversation.transferred', agentChannel(bob.agentId));
    await feed.first('conversation.transferred', visitor.channel);
    expect(feed.of('conversation.queued')).toEqual([]);
    expect(await loadConversation(deps, visitor)).toMatchObject({ state: 'active', agent: { agentId: bob.agentId } });
    feed.stop();
  });
});

describe('The agent in a conversation', () => {
  it('carries its avatar', async () => {
    const { agent, visitor } = await f.activeChat({ agentNickname: 'Alice' });
    await deps.db.update(agents).set({ avatar: 'https://cdn.example/alice.png' }).where(eq(agents.id, agent.agentId));
    expect((await loadConversation(deps, visitor))?.agent).toEqual({
      agentId: agent.agentId,
      nickname: 'Alice',
      avatar: 'https://cdn.example/alice.png',
    });
  });
});

describe('Re-queue', () => {
  it('only of an agent offline: an online agent keeps its conversations; an offline one’s go back with a system message', async () => {
    const { m, agent, visitor } = await f.activeChat();
    expect(await requeueOfflineAgent(deps, agent.agentId)).toBe(0);
    expect(await loadConversation(deps, visitor)).toMatchObject({ state: 'active', agent: { agentId: agent.agentId } });

    // An agent never connected is offline: what it claimed goes back to the queue.
    const away = await f.agent(m, { nickname: 'Away' });
    const other = await f.visitor(m);
    // The online agent is full: the next conversation waits until the offline one claims it.
    await deps.db.update(merchants).set({ maxConcurrentChats: 1 }).where(eq(merchants.id, m.merchantId));
    expect((await assignAgent(deps, other)).state).toBe('queued');
    await claimConversation(deps, away, { visitorId: other.visitorId });
    expect(await requeueOfflineAgent(deps, away.agentId)).toBe(1);
    expect((await loadConversation(deps, other))?.state).toBe('queued');
    expect((await listMessages(deps, other)).messages.at(-1)).toMatchObject({
      senderType: 'system',
      senderId: '',
      type: 'system',
      content: 'Away went offline; the conversation is back in the queue',
      meta: { event: 'requeued', from_agent_id: away.agentId, reason: 'agent_offline' },
    });
  });
});

describe('Assignment by routing', () => {
  it('writes the joined message from the system, tells the visitor of it, and stamps the conversation and the workbench summary with its time', async () => {
    const m = await f.merchant();
    const ann = await f.agent(m, { nickname: 'Ann' });
    await f.online(ann);
    const visitor = await f.visitor(m);
    const feed = recordEvents(deps, [visitor.channel]);
    await feed.ready;
    const before = Date.now();
    const assigned = await assignAgent(deps, visitor);
    const after = Date.now();
    expect(assigned.agent?.agentId).toBe(ann.agentId);
    const joined = (await listMessages(deps, visitor)).messages.at(-1);
    expect(joined).toMatchObject({
      seq: 1,
      senderType: 'system',
      senderId: '',
      type: 'system',
      content: 'Ann joined the conversation',
      meta: { event: 'assigned', agent_id: ann.agentId, nickname: 'Ann', by: 'routing' },
    });
    expect(joined?.id).toMatch(/^msg/);
    const told = await feed.first('message.created', visitor.channel);
    expect(told.data).toMatchObject({ message: { id: joined?.id, seq: 1, content: 'Ann joined the conversation' } });
    // The last activity, in Unix seconds.
    const timestamp = (await loadConversation(deps, visitor))?.timestamp ?? 0;
    expect(timestamp).toBeGreaterThanOrEqual(Math.floor(before / 1000));
    expect(timestamp).toBeLessThanOrEqual(Math.ceil(after / 1000));
    const entry = (await loadWorkbench(deps, ann, { wsAddress: '' })).chatting.find((c) => c.id === visitor.visitorId);
    expect(entry?.items).toHaveLength(1);
    expect(entry?.items[0]).toMatchObject({
      seq: 1,
      sender_type: 'system',
      type: 'system',
      content: 'Ann joined the conversation',
    });
    const at = entry?.items[0]?.created_at ?? 0;
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(after);
    feed.stop();
  });

  it('of two agents equally busy, the one assigned longest ago (never first) gets the next conversation', async () => {
    const m = await f.merchant();
    const [a, b] = [await f.agent(m), await f.agent(m)];
    await f.online(a);
    await f.online(b);
    const first = await f.visitor(m);
    const firstAgent = (await assignAgent(deps, first)).agent?.agentId;
    await closeConversation(deps, first);
    // Both are free again; the one that just had a conversation waits its turn.
    const second = await f.visitor(m);
    const secondAgent = (await assignAgent(deps, second)).agent?.agentId;
    expect([firstAgent, secondAgent].sort()).toEqual([a.agentId, b.agentId].sort());
  });
});

describe('Listing', () => {
  it('a page of exactly `first` has no next page; an agent’s unread count; all for an administrator; a label narrows it; an API key reads all, never mine, and needs its scope', async () => {
    const m = await f.merchant({ maxConcurrentChats: 2 });
    const a = await f.agent(m);
    const admin = await f.agent(m, { level: 'admin' });
    await f.online(a);
    const [v1, v2, v3] = [await f.visitor(m), await f.visitor(m), await f.visitor(m)];
    const ids: string[] = [];
    for (const v of [v1, v2, v3]) ids.push((await assignAgent(deps, v)).conversationId);
    await sendMessage(deps, v1, { clientMsgId: 'u1', content: 'one' });
    await sendMessage(deps, v1, { clientMsgId: 'u2', content: 'two' });

    const mine = await listConversations(deps, a, { scope: 'mine', first: 2 });
    expect(mine.hasNextPage).toBe(false);
    expect(mine.nodes.map((n) => [n.conversationId, n.unreadCount]).sort()).toEqual(
      [
        [ids[0], 2],
        [ids[1], 0],
      ].sort(),
    );
    const all = await listConversations(deps, admin, { scope: 'all' });
    expect(all.nodes.map((n) => n.conversationId)).toEqual([...ids].reverse());

    const vip = await createLabel(deps, admin, { name: 'VIP' });
    await labelConversation(deps, a, { visitorId: v2.visitorId, labelId: vip.id });
    const labelled = await listConversations(deps, admin, { scope: 'all', labelId: vip.id });
    expect(labelled.nodes.map((n) => n.conversationId)).toEqual([ids[1]]);

    const reader = await authenticateApiKey(
      deps,
      (await createApiKey(deps, admin, { name: 'reader', scopes: ['conversations:read'] })).key,
    );
    expect((await listConversations(deps, reader)).nodes.map((n) => n.conversationId)).toEqual([...ids].reverse());
    expect(await refusalOf(listConversations(deps, reader, { scope: 'mine' }))).toBe(
      'BAD_USER_INPUT: scope mine is an agent’s: an API key reads all or queue',
    );
    const hooks = await authenticateApiKey(
      deps,
      (await createApiKey(deps, admin, { name: 'hooks', scopes: ['webhooks:manage'] })).key,
    );
    expect(await refusalOf(listConversations(deps, hooks))).toBe(
      'INSUFFICIENT_SCOPE: This API key lacks the scope conversations:read',
    );
  });

  it('the queue in the order it is served: a conversation re-queued at the front is listed first', async () => {
    const m = await f.merchant({ maxConcurrentChats: 1 });
    const a = await f.agent(m);
    await f.online(a);
    const [v1, v2, v3] = [await f.visitor(m), await f.visitor(m), await f.visitor(m)];
    for (const v of [v1, v2, v3]) await assignAgent(deps, v);
    // v3 is taken by an agent never connected (offline), then re-queued ahead of v2.
    const away = await f.agent(m);
    await claimConversation(deps, away, { visitorId: v3.visitorId });
    expect(await requeueOfflineAgent(deps, away.agentId)).toBe(1);
    const queue = await listConversations(deps, a, { scope: 'queue' });
    expect(queue.nodes.map((n) => n.visitorId)).toEqual([v3.visitorId, v2.visitorId]);
  });
});

describe('Rating', () => {
  it('refused, saying why, while the switch is off; once on, the webhook carries the score, resolved and comment', async () => {
    const m = await f.merchant({ switches: { session_invite_rating: 'off', session_invite_resolved: 'on' } });
    const v = await f.visitor(m);
    const { conversationId } = await assignAgent(deps, v);
    await closeConversation(deps, v);
    expect(await refusalOf(rateConversation(deps, v, { score: 5 }))).toBe(
      'RATING_NOT_ALLOWED: Rating is not enabled for this merchant',
    );
    await deps.db
      .update(merchants)
      .set({ switches: { session_invite_rating: 'on', session_invite_resolved: 'on' } })
      .where(eq(merchants.id, m.merchantId));
    await deps.db.insert(webhookEndpoints).values({
      id: newId('whep'),
      merchantId: m.merchantId,
      url: 'https://hooks.example.com/parley',
      events: ['conversation.rated'],
      secret: 'whsec_test',
    });
    await rateConversation(deps, v, { score: 4, resolved: true, comment: 'quick' });
    const deliveries = await deps.db
      .select()
      .from(webhookDeliveries)
      .where(eq(webhookDeliveries.merchantId, m.merchantId));
    expect(deliveries.map((d) => [d.event, JSON.parse(d.body).data])).toEqual([
      [
        'conversation.rated',
        {
          conversation_id: conversationId,
          visitor_id: v.visitorId,
          state: 'closed',
          score: 4,
          resolved: true,
          comment: 'quick',
        },
      ],
    ]);
  });
});

describe('Transfer to an agent', () => {
  it('refused for a ticket agent or a disabled one, even connected', async () => {
    const { m, agent, visitor } = await f.activeChat();
    // Both connected as agents; then an administrator made one a ticket agent and disabled the other.
    const ticket = await f.agent(m);
    const disabled = await f.agent(m);
    await f.online(ticket);
    await f.online(disabled);
    await deps.db.update(agents).set({ level: 'ticket_agent' }).where(eq(agents.id, ticket.agentId));
    await deps.db.update(agents).set({ disabled: true }).where(eq(agents.id, disabled.agentId));
    for (const target of [ticket, disabled])
      expect(
        await refusalOf(transferConversation(deps, agent, { visitorId: visitor.visitorId, toAgentId: target.agentId })),
      ).toBe('AGENT_UNAVAILABLE: That agent is not online');
    expect(await loadConversation(deps, visitor)).toMatchObject({ state: 'active', agent: { agentId: agent.agentId } });
  });
});

describe('Assigning again', () => {
  it('answers the open conversation, by its id, with its agent', async () => {
    const { agent, visitor, conversationId } = await f.activeChat();
    expect(conversationId).toMatch(/^c_/);
    expect(await assignAgent(deps, visitor)).toEqual({
      conversationId,
      state: 'active',
      agent: { agentId: agent.agentId, nickname: agent.agent.nickname, avatar: '' },
      queuePosition: null,
      messageLeft: null,
    });
  });
});

describe('Each side’s answer counts its own unread messages', () => {
  it('claim, pin, transfer and reading answer the agent’s count; a rating answers the visitor’s', async () => {
    const m = await f.merchant({ switches: { session_invite_rating: 'on' } });
    const [ann, bob] = [await f.agent(m, { nickname: 'Ann' }), await f.agent(m, { nickname: 'Bob' })];
    const v = await f.visitor(m);
    await assignAgent(deps, v);
    await sendMessage(deps, v, { clientMsgId: 'v1', content: 'hello?' });
    await sendMessage(deps, v, { clientMsgId: 'v2', content: 'anyone?' });
    // Two of the visitor's messages the agent has not read; none of the agent's for the visitor.
    expect((await claimConversation(deps, ann, { visitorId: v.visitorId })).unreadCount).toBe(2);
    expect((await pinConversation(deps, ann, { visitorId: v.visitorId, pinned: true })).unreadCount).toBe(2);
    expect((await loadConversation(deps, ann, { visitorId: v.visitorId }))?.unreadCount).toBe(2);
    expect((await loadConversation(deps, v))?.unreadCount).toBe(0);
    await f.online(bob);
    const moved = await transferConversation(deps, ann, { visitorId: v.visitorId, toAgentId: bob.agentId });
    expect(moved.unreadCount).toBe(2);
    // Bob writes (his own position moves to the end) and closes: one message the visitor has not read.
    await sendMessage(deps, bob, { visitorId: v.visitorId, clientMsgId: 'b1', content: 'sorry, bye' });
    await closeConversation(deps, bob, { visitorId: v.visitorId });
    expect((await rateConversation(deps, v, { score: 5 })).unreadCount).toBe(1);
  });
});
