import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { attachments, conversations, eventOutbox, messages } from '../../src/db/schema.js';
import { newId } from '../../src/ids.js';
import { createChatService } from '../../src/resolvers/chat-service.js';
import { claimConversation } from '../../src/resolvers/conversations/agent-actions.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { loadConversation } from '../../src/resolvers/conversations/queries.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { transferConversation } from '../../src/resolvers/conversations/transfer.js';
import { agentChannel } from '../../src/resolvers/events.js';
import { listMessages } from '../../src/resolvers/messages/history.js';
import { markRead } from '../../src/resolvers/messages/read.js';
import { MAX_TEXT, sendMessage } from '../../src/resolvers/messages/send.js';
import { setTyping } from '../../src/resolvers/messages/typing.js';
import { drainOutbox } from '../../src/resolvers/outbox/publish.js';
import { loadWorkbench } from '../../src/resolvers/workbench.js';
import {
  codeOf,
  eventually,
  type Factories,
  recordEvents,
  secondInstance,
  type TestDeps,
  useTestDeps,
} from '../support/deps.js';

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const chat = () => f.assignedChat({ switches: { session_invite_rating: 'on' } });

describe('Sending: exactly once, strictly ordered', () => {
  it('20 parallel sends with distinct client_msg_ids → seqs without holes, and history equals the events', async () => {
    const { agent, visitor } = await chat();
    const feed = recordEvents(deps, [visitor.channel, agentChannel(agent.agentId)]);
    await feed.ready;
    const sent = await Promise.all(
      Array.from({ length: 20 }, (_, i) => sendMessage(deps, visitor, { clientMsgId: `m${i}`, content: `hello ${i}` })),
    );
    // seq 1 is the "assigned" system message.
    expect(sent.map((s) => s.message.seq).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 2));
    const history = await listMessages(deps, agent, { visitorId: visitor.visitorId, limit: 100 });
    expect(history.messages.map((m) => m.seq)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
    for (const channel of [visitor.channel, agentChannel(agent.agentId)]) {
      await eventually(() => feed.of('message.created', channel).length === 20, `20 events on ${channel}`);
      const events = feed.of('message.created', channel).map((e) => (e.data as { message: { seq: number } }).message);
      // Published after commit, in commit order: the stream itself is in seq order.
      expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 2));
      const wire = history.messages.slice(1).map((m) => ({
        id: m.id,
        seq: m.seq,
        content: m.content,
        client_msg_id: m.clientMsgId,
        created_at: m.createdAt,
      }));
      expect(
        events.map((e) => {
          const x = e as unknown as Record<string, unknown>;
          return { id: x.id, seq: x.seq, content: x.content, client_msg_id: x.client_msg_id, created_at: x.created_at };
        }),
      ).toEqual(wire);
    }
    feed.stop();
  });

  it('the same client_msg_id sent 10 times in parallel → one message, the same answer, one event', async () => {
    const { visitor } = await chat();
    const feed = recordEvents(deps, [visitor.channel]);
    await feed.ready;
    const results = await Promise.all(
      Array.from({ length: 10 }, () => sendMessage(deps, visitor, { clientMsgId: 'same', content: 'once' })),
    );
    expect(new Set(results.map((r) => r.message.id)).size).toBe(1);
    expect(new Set(results.map((r) => r.message.seq))).toEqual(new Set([2]));
    expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
    const rows = await deps.db.select().from(messages).where(eq(messages.clientMsgId, 'same'));
    expect(rows.filter((r) => r.visitorId === visitor.visitorId)).toHaveLength(1);
    // Another send afterwards gets the next seq: the duplicates used none.
    expect((await sendMessage(deps, visitor, { clientMsgId: 'next', content: 'x' })).message.seq).toBe(3);
    await eventually(() => feed.of('message.created').length === 2, 'two message events');
    expect(feed.of('message.created').map((e) => (e.data as { message: { seq: number } }).message.seq)).toEqual([2, 3]);
    feed.stop();
  });

  // Two instances need a database both can open: PostgreSQL (PGlite is one process).
  it.runIf(process.env.DATABASE_URL)(
    'the same client_msg_id sent on two instances sharing the stores → one message',
    async () => {
      const other = await secondInstance();
      if (!other) throw new Error('a second instance needs DATABASE_URL');
      try {
        const { agent, visitor } = await chat();
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            sendMessage(i % 2 ? other : deps, agent, {
              visitorId: visitor.visitorId,
              clientMsgId: 'twice',
              content: 'hi',
            }),
          ),
        );
        expect(new Set(results.map((r) => r.message.id)).size).toBe(1);
        const page = await listMessages(deps, visitor);
        expect(page.messages.filter((m) => m.clientMsgId === 'twice')).toHaveLength(1);
      } finally {
        await other.close();
      }
    },
  );

  it('the answer is the stored message: server id, seq, time; nothing else in the conversation changes on a retry', async () => {
    const { visitor } = await chat();
    const first = await sendMessage(deps, visitor, { clientMsgId: 'k1', content: 'hello' });
    expect(first.message).toMatchObject({
      seq: 2,
      senderType: 'visitor',
      senderId: visitor.visitorId,
      type: 'text',
      content: 'hello',
    });
    expect(first.message.id).toMatch(/^msg_/);
    expect(Math.abs(first.message.createdAt - Date.now())).toBeLessThan(60_000);
    const again = await sendMessage(deps, visitor, { clientMsgId: 'k1', content: 'changed' });
    expect(again).toEqual({ ...first, duplicate: true });
  });

  it('text is required and bounded; other types need an attachment', async () => {
    const { visitor } = await chat();
    expect(await codeOf(sendMessage(deps, visitor, { clientMsgId: 'a', content: '  ' }))).toBe('BAD_USER_INPUT');
    expect(await codeOf(sendMessage(deps, visitor, { clientMsgId: 'b', content: 'x'.repeat(MAX_TEXT + 1) }))).toBe(
      'BAD_USER_INPUT',
    );
    expect(await codeOf(sendMessage(deps, visitor, { clientMsgId: 'c', type: 'image' }))).toBe('BAD_USER_INPUT');
    expect(await codeOf(sendMessage(deps, visitor, { content: 'no key' } as never))).toBe('BAD_USER_INPUT');
    expect((await sendMessage(deps, visitor, { clientMsgId: 'd', content: 'x'.repeat(MAX_TEXT) })).message.seq).toBe(2);
  });

  it("an attachment: only a finished upload of the same sender and merchant, of the message's kind; marked referenced", async () => {
    const { m, agent, visitor } = await chat();
    const upload = async (uploaderType: 'visitor' | 'agent', uploaderId: string, merchantId = m.merchantId) => {
      const id = newId('att');
      await deps.db.insert(attachments).values({
        id,
        merchantId,
        uploaderType,
        uploaderId,
        kind: 'image',
        mime: 'image/png',
        size: 10,
        name: 'a.png',
        storageKey: id,
      });
      return id;
    };
    const mine = await upload('visitor', visitor.visitorId);
    const agents = await upload('agent', agent.agentId);
    expect(
      await codeOf(sendMessage(deps, visitor, { clientMsgId: 'x', type: 'image', attachmentId: agents })),
    ).not.toBe('no error');
    expect(await codeOf(sendMessage(deps, visitor, { clientMsgId: 'y', type: 'file', attachmentId: mine }))).toBe(
      'BAD_USER_INPUT',
    );
    const sent = await sendMessage(deps, visitor, { clientMsgId: 'z', type: 'image', attachmentId: mine });
    expect(sent.message.attachment).toMatchObject({ attachmentId: mine, kind: 'image', mime: 'image/png' });
    const [row] = await deps.db.select().from(attachments).where(eq(attachments.id, mine));
    expect(row?.referencedAt).not.toBeNull();
    expect(
      (
        await sendMessage(deps, agent, {
          visitorId: visitor.visitorId,
          clientMsgId: 'w',
          type: 'image',
          attachmentId: agents,
        })
      ).message.attachment?.attachmentId,
    ).toBe(agents);
  });
});

describe('Who may write where', () => {
  it('a visitor writing while no agent is online: stored in the queued conversation and delivered to the agent who gets it', async () => {
    const m = await f.merchant();
    const visitor = await f.visitor(m);
    const first = await sendMessage(deps, visitor, { clientMsgId: 'q1', content: 'anyone there?' });
    expect(first.conversationState).toBe('queued');
    expect(first.message.seq).toBe(1);
    await sendMessage(deps, visitor, { clientMsgId: 'q2', content: 'hello?' });
    const agent = await f.agent(m);
    const feed = recordEvents(deps, [agentChannel(agent.agentId)]);
    await feed.ready;
    await f.online(agent); // the queue drains to it
    await eventually(() => feed.of('conversation.assigned').length === 1, 'assigned event');
    const page = await listMessages(deps, agent, { visitorId: visitor.visitorId });
    expect(page.messages.map((x) => x.content)).toEqual(['anyone there?', 'hello?', expect.stringContaining('joined')]);
    const bench = await loadWorkbench(deps, agent, { wsAddress: 'ws://x' });
    expect(bench.chatting.find((c) => c.id === visitor.visitorId)?.unreadCount).toBe(2);
    feed.stop();
  });

  it('an agent must have the conversation: queued → claim first; another agent’s → NOT_ASSIGNED; ticket agent → FORBIDDEN', async () => {
    const m = await f.merchant();
    const a = await f.agent(m);
    const b = await f.agent(m);
    const tom = await f.agent(m, { level: 'ticket_agent' });
    const visitor = await f.visitor(m);
    await assignAgent(deps, visitor);
    const send = (who: typeof a, key: string) =>
      sendMessage(deps, who, { visitorId: visitor.visitorId, clientMsgId: key, content: 'hi' });
    expect(await codeOf(send(a, 'k1'))).toBe('NOT_ASSIGNED');
    await claimConversation(deps, a, { visitorId: visitor.visitorId });
    expect(await codeOf(send(b, 'k2'))).toBe('NOT_ASSIGNED');
    expect(await codeOf(send(tom, 'k3'))).toBe('FORBIDDEN');
    expect((await send(a, 'k4')).message.senderType).toBe('agent');
    const stored = await deps.db.select().from(messages).where(eq(messages.visitorId, visitor.visitorId));
    expect(stored.filter((x) => x.senderType === 'agent')).toHaveLength(1);
  });

  it('sending to a closed conversation: the agent gets CONVERSATION_CLOSED; the visitor starts a new conversation', async () => {
    const { agent, visitor, conversationId } = await chat();
    await closeConversation(deps, visitor);
    expect(
      await codeOf(sendMessage(deps, agent, { visitorId: visitor.visitorId, clientMsgId: 'late', content: 'bye' })),
    ).toBe('CONVERSATION_CLOSED');
    const again = await sendMessage(deps, visitor, { clientMsgId: 'back', content: 'me again' });
    expect(again.message.conversationId).not.toBe(conversationId);
    expect((await loadConversation(deps, visitor))?.conversationId).toBe(again.message.conversationId);
  });

  it("another merchant's visitor is not found, and nothing is stored", async () => {
    const { visitor } = await chat();
    const m2 = await f.merchant();
    const stranger = await f.agent(m2, { level: 'admin' });
    await f.online(stranger);
    for (const work of [
      () => sendMessage(deps, stranger, { visitorId: visitor.visitorId, clientMsgId: 'x', content: 'hi' }),
      () => listMessages(deps, stranger, { visitorId: visitor.visitorId }),
      () => markRead(deps, stranger, { visitorId: visitor.visitorId, seq: 1 }),
      () => setTyping(deps, stranger, { visitorId: visitor.visitorId }),
    ])
      expect(await codeOf(work())).toBe('NOT_FOUND');
    const stored = await deps.db.select().from(messages).where(eq(messages.visitorId, visitor.visitorId));
    expect(stored).toHaveLength(1);
  });
});

describe('History', () => {
  it('newest-first pages with before, holes filled with after, spanning the visitor’s earlier conversations', async () => {
    // Routed, with the agent online: the visitor's second conversation is routed to it too.
    const { agent, visitor } = await f.activeChat({ switches: { session_invite_rating: 'on' } });
    for (let i = 1; i <= 5; i++) await sendMessage(deps, visitor, { clientMsgId: `a${i}`, content: `first ${i}` });
    await closeConversation(deps, visitor);
    for (let i = 1; i <= 3; i++) await sendMessage(deps, visitor, { clientMsgId: `b${i}`, content: `second ${i}` });
    const all = (await listMessages(deps, visitor, { limit: 100 })).messages;
    // 1 assigned + 5 + 1 closed; then the new conversation: assigned, and 3.
    expect(all.map((m) => m.content)).toEqual([
      expect.stringContaining('joined'),
      'first 1',
      'first 2',
      'first 3',
      'first 4',
      'first 5',
      'Closed by the visitor',
      expect.stringContaining('joined'),
      'second 1',
      'second 2',
      'second 3',
    ]);
    const newest = await listMessages(deps, visitor, { limit: 4 });
    expect(newest.messages).toEqual(all.slice(-4));
    expect(newest.hasMore).toBe(true);
    const older = await listMessages(deps, visitor, { limit: 4, before: newest.startCursor ?? '' });
    expect(older.messages).toEqual(all.slice(-8, -4));
    const oldest = await listMessages(deps, visitor, { limit: 4, before: older.startCursor ?? '' });
    expect(oldest.messages).toEqual(all.slice(0, 3));
    expect(oldest.hasMore).toBe(false);
    const after = await listMessages(deps, visitor, { limit: 3, after: oldest.endCursor ?? '' });
    expect(after.messages).toEqual(all.slice(3, 6));
    // A bare seq means the latest conversation.
    const bySeq = await listMessages(deps, agent, { visitorId: visitor.visitorId, after: '1' });
    expect(bySeq.messages.map((m) => m.content)).toEqual(['second 1', 'second 2', 'second 3']);
    expect(await codeOf(listMessages(deps, visitor, { limit: 101 }))).toBe('BAD_USER_INPUT');
    expect(await codeOf(listMessages(deps, visitor, { before: 'garbage!' }))).toBe('BAD_USER_INPUT');
  });

  it('history_only_mine: an agent sees only the conversations it was assigned (administrators see all)', async () => {
    const m = await f.merchant({ settings: { history_only_mine: true } });
    const a = await f.agent(m);
    const b = await f.agent(m);
    const admin = await f.agent(m, { level: 'admin' });
    await f.online(a);
    const visitor = await f.visitor(m);
    await sendMessage(deps, visitor, { clientMsgId: '1', content: 'with a' });
    await closeConversation(deps, visitor);
    await f.online(b);
    // a goes busy: the next conversation goes to b.
    const { setAgentState } = await import('../../src/resolvers/presence.js');
    await setAgentState(deps, a, 'busy');
    await sendMessage(deps, visitor, { clientMsgId: '2', content: 'with b' });
    const seen = async (who: typeof a) =>
      (await listMessages(deps, who, { visitorId: visitor.visitorId, limit: 100 })).messages
        .filter((x) => x.senderType === 'visitor')
        .map((x) => x.content);
    expect(await seen(a)).toEqual(['with a']);
    expect(await seen(b)).toEqual(['with b']);
    expect(await seen(admin)).toEqual(['with a', 'with b']);
    const bench = await loadWorkbench(deps, b, { wsAddress: 'ws://x' });
    expect(bench.chatting[0]?.historyOnlyMine).toBe(true);
  });
});

describe('Read state', () => {
  it('unread counts derive from the read seqs; a receipt tells the other side; the position never moves back', async () => {
    const { agent, visitor } = await chat();
    for (let i = 0; i < 3; i++) await sendMessage(deps, visitor, { clientMsgId: `v${i}`, content: `v${i}` });
    const bench = async () =>
      (await loadWorkbench(deps, agent, { wsAddress: 'ws://x' })).chatting.find((c) => c.id === visitor.visitorId);
    expect((await bench())?.unreadCount).toBe(3);
    const feed = recordEvents(deps, [visitor.channel]);
    await feed.ready;
    const read = await markRead(deps, agent, { visitorId: visitor.visitorId, seq: 3 });
    expect(read).toMatchObject({ readSeq: 3, unreadCount: 1 });
    await eventually(() => feed.of('message.read').length === 1, 'read receipt');
    expect(feed.of('message.read')[0]?.data).toMatchObject({ reader_type: 'agent', reader_id: agent.agentId, seq: 3 });
    expect((await markRead(deps, agent, { visitorId: visitor.visitorId, seq: 1 })).readSeq).toBe(3);
    expect((await markRead(deps, agent, { visitorId: visitor.visitorId, seq: 999 })).readSeq).toBe(4);
    expect((await bench())?.unreadCount).toBe(0);
    // The visitor's side: agent messages after its read position.
    await sendMessage(deps, agent, { visitorId: visitor.visitorId, clientMsgId: 'a1', content: 'hi' });
    expect((await loadConversation(deps, visitor))?.unreadCount).toBe(1);
    expect((await markRead(deps, visitor, { seq: 5 })).unreadCount).toBe(0);
    feed.stop();
  });

  it('the sender has read what it sent', async () => {
    const { agent, visitor } = await chat();
    await sendMessage(deps, visitor, { clientMsgId: 'v', content: 'question' });
    await sendMessage(deps, agent, { visitorId: visitor.visitorId, clientMsgId: 'a', content: 'answer' });
    const bench = await loadWorkbench(deps, agent, { wsAddress: 'ws://x' });
    expect(bench.chatting.find((c) => c.id === visitor.visitorId)?.unreadCount).toBe(0);
  });
});

describe('Typing', () => {
  it('reaches the other side only, throttled per sender, never stored', async () => {
    const { agent, visitor, conversationId } = await chat();
    const feed = recordEvents(deps, [visitor.channel, agentChannel(agent.agentId)]);
    await feed.ready;
    expect(await setTyping(deps, visitor, { typing: true })).toEqual({ published: true });
    expect(await setTyping(deps, visitor, { typing: true })).toEqual({ published: false });
    expect(await setTyping(deps, visitor, { typing: false })).toEqual({ published: true });
    expect(await setTyping(deps, agent, { visitorId: visitor.visitorId })).toEqual({ published: true });
    await eventually(() => feed.of('typing').length === 3, 'typing events');
    expect(feed.of('typing', agentChannel(agent.agentId)).map((e) => (e.data as { typing: boolean }).typing)).toEqual([
      true,
      false,
    ]);
    expect(feed.of('typing', visitor.channel).map((e) => e.data)).toEqual([
      {
        conversation_id: conversationId,
        visitor_id: visitor.visitorId,
        sender_type: 'agent',
        sender_id: agent.agentId,
        typing: true,
      },
    ]);
    const [row] = await deps.db.select().from(conversations).where(eq(conversations.id, conversationId));
    expect(row?.lastSeq).toBe(1);
    feed.stop();
  });
});

describe('Publish after commit (the outbox)', () => {
  // PGlite runs one transaction at a time, so a send cannot commit during another's round there.
  it.runIf(process.env.DATABASE_URL)(
    "a send that commits during another send's publishing round returns only after its own event is published",
    async () => {
      const { visitor } = await chat();
      const pending = () => deps.db.select().from(eventOutbox).where(eq(eventOutbox.channel, visitor.channel));
      const publish = deps.bus.publish;
      let release = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let inRound = () => {};
      const roundStarted = new Promise<void>((resolve) => {
        inRound = resolve;
      });
      deps.bus.publish = async (...args) => {
        inRound();
        await gate;
        return publish.apply(deps.bus, args);
      };
      try {
        const first = sendMessage(deps, visitor, { clientMsgId: 'first', content: 'first' });
        await roundStarted; // the first send's round has taken its rows and is publishing them
        const second = sendMessage(deps, visitor, { clientMsgId: 'second', content: 'second' }).then(pending);
        await eventually(
          async () => (await listMessages(deps, visitor, { limit: 5 })).messages.length === 3,
          'the second send committed while the first round publishes',
        );
        await new Promise((resolve) => setImmediate(resolve)); // and went on to publish
        release();
        await first;
        expect(await second).toEqual([]);
      } finally {
        deps.bus.publish = publish;
        release();
      }
    },
  );

  it('a failed publish loses nothing: the message is stored, and the drain publishes it in order', async () => {
    const { visitor } = await chat();
    const feed = recordEvents(deps, [visitor.channel]);
    await feed.ready;
    const publish = deps.bus.publish;
    deps.bus.publish = async () => {
      throw new Error('Connection is closed');
    };
    let sent: Awaited<ReturnType<typeof sendMessage>>;
    try {
      sent = await sendMessage(deps, visitor, { clientMsgId: 'o1', content: 'during the outage' });
    } finally {
      deps.bus.publish = publish;
    }
    expect(sent.message.seq).toBe(2);
    const pending = await deps.db.select().from(eventOutbox).where(eq(eventOutbox.channel, visitor.channel));
    expect(pending).toHaveLength(1);
    await drainOutbox(deps, 0);
    await eventually(() => feed.of('message.created').length === 1, 'the drained event');
    expect(feed.of('message.created')[0]?.data).toMatchObject({ message: { id: sent.message.id, seq: 2 } });
    expect(await deps.db.select().from(eventOutbox).where(eq(eventOutbox.channel, visitor.channel))).toEqual([]);
    feed.stop();
  });

  it('the chat service of an instance publishes what a failed writer left, by itself', async () => {
    const { visitor } = await chat();
    const feed = recordEvents(deps, [visitor.channel]);
    await feed.ready;
    const publish = deps.bus.publish;
    deps.bus.publish = async () => {
      throw new Error('Connection is closed');
    };
    let seq: number;
    try {
      seq = (await sendMessage(deps, visitor, { clientMsgId: 's1', content: 'left behind' })).message.seq;
    } finally {
      deps.bus.publish = publish;
    }
    // Its clock a second ahead: the row is already as old as the drain waits for (drainOutbox's minAgeMs).
    const service = createChatService(
      { ...deps, now: () => Date.now() + 1_000 },
      { outboxDrainMs: 50, idleSweepMs: 60_000, queueRetryMs: 60_000 },
    );
    service.start();
    try {
      await eventually(() => feed.of('message.created').length === 1, 'the drained event');
      expect(feed.of('message.created')[0]?.data).toMatchObject({ message: { seq } });
    } finally {
      await service.stop();
      feed.stop();
    }
  });

  it('system messages are messages: assigned, transferred, closed and rated read as the conversation happened', async () => {
    const { m, agent, visitor } = await chat();
    const b = await f.agent(m);
    await f.online(b);
    await transferConversation(deps, agent, { visitorId: visitor.visitorId, toAgentId: b.agentId });
    await closeConversation(deps, b, { visitorId: visitor.visitorId });
    const { rateConversation } = await import('../../src/resolvers/conversations/rating.js');
    await rateConversation(deps, visitor, { score: 5 });
    const page = await listMessages(deps, visitor);
    expect(page.messages.map((x) => x.meta?.event)).toEqual(['assigned', 'transferred', 'closed', 'rated']);
    expect(page.messages.map((x) => x.seq)).toEqual([1, 2, 3, 4]);
  });
});
