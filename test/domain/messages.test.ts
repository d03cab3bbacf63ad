import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachments, conversations } from '../../src/db/schema.js';
import { DomainError } from '../../src/errors.js';
import { newId } from '../../src/ids.js';
import { ITEM_CONTENT_MAX, toMessageView } from '../../src/resolvers/chat-rows.js';
import { assignAgent, closeConversation, transferConversation } from '../../src/resolvers/conversations.js';
import { agentChannel } from '../../src/resolvers/events.js';
import { historyOnlyMine, listMessages, markRead, sendMessage, setTyping } from '../../src/resolvers/messages.js';
import { setAgentState } from '../../src/resolvers/presence.js';
import { eventually, factories, recordEvents, releaseTestDeps, type TestDeps, testDeps } from '../support/deps.js';

/** Message rules (README "Chat") not already covered by test/chat-messages.test.ts. */

let deps: TestDeps;
let f: ReturnType<typeof factories>;
beforeAll(async () => {
  deps = await testDeps();
  f = factories(deps);
});
afterAll(async () => {
  await f.cleanup();
  await releaseTestDeps();
});

async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (error) {
    if (error instanceof DomainError) return `${error.code}: ${error.message}`;
    throw error;
  }
  return 'no error';
}

/** A merchant, an online agent and a visitor in an active conversation with it. */
async function chat() {
  const m = await f.merchant();
  const agent = await f.agent(m);
  await f.online(agent);
  const visitor = await f.visitor(m);
  const assigned = await assignAgent(deps, visitor);
  expect(assigned.agent?.agentId).toBe(agent.agentId);
  return { m, agent, visitor, conversationId: assigned.conversationId };
}

const conversationRow = async (id: string) =>
  (await deps.db.select().from(conversations).where(eq(conversations.id, id)))[0];

describe('Sending', () => {
  it('the conversation keeps a summary of the last message, cut to ITEM_CONTENT_MAX; the sender has read it', async () => {
    const { agent, visitor, conversationId } = await chat();
    const long = 'x'.repeat(ITEM_CONTENT_MAX + 50);
    const at = 1_800_000_000_123;
    const sent = await sendMessage({ ...deps, now: () => at }, visitor, { clientMsgId: 'k1', content: long });
    expect(sent).toMatchObject({ duplicate: false, conversationState: 'active' });
    expect(sent.message).toMatchObject({
      seq: 2,
      senderType: 'visitor',
      content: long,
      createdAt: at,
      recalled: false,
    });
    let row = await conversationRow(conversationId);
    expect(row).toMatchObject({ lastSeq: 2, visitorReadSeq: 2, agentReadSeq: 0, timestamp: 1_800_000_000 });
    expect(row?.items).toEqual([
      { seq: 2, sender_type: 'visitor', type: 'text', content: 'x'.repeat(ITEM_CONTENT_MAX), created_at: at },
    ]);
    await sendMessage(deps, agent, { visitorId: visitor.visitorId, clientMsgId: 'k1', content: 'short' });
    row = await conversationRow(conversationId);
    expect(row).toMatchObject({ lastSeq: 3, visitorReadSeq: 2, agentReadSeq: 3 });
    expect(row?.items).toMatchObject([{ seq: 3, sender_type: 'agent', content: 'short' }]);
  });

  it('a visitor writing while nobody is online is told the conversation is queued; a retry says duplicate', async () => {
    const m = await f.merchant();
    const visitor = await f.visitor(m);
    const sent = await sendMessage(deps, visitor, { clientMsgId: 'q1', content: 'anyone?' });
    expect(sent).toMatchObject({ conversationState: 'queued', duplicate: false });
    const again = await sendMessage(deps, visitor, { clientMsgId: 'q1', content: 'anyone?' });
    expect(again).toMatchObject({ conversationState: 'queued', duplicate: true, message: { id: sent.message.id } });
  });

  it('a retried attachment message answers with its attachment', async () => {
    const { m, visitor } = await chat();
    const id = newId('att');
    await deps.db.insert(attachments).values({
      id,
      merchantId: m.merchantId,
      uploaderType: 'visitor',
      uploaderId: visitor.visitorId,
      kind: 'file',
      mime: 'application/pdf',
      size: 10,
      name: 'a.pdf',
      storageKey: id,
    });
    const sent = await sendMessage(deps, visitor, { clientMsgId: 'f1', type: 'file', attachmentId: id });
    expect(sent.message.attachment).toMatchObject({ attachmentId: id, name: 'a.pdf' });
    const again = await sendMessage(deps, visitor, { clientMsgId: 'f1', type: 'file', attachmentId: id });
    expect(again).toMatchObject({
      duplicate: true,
      message: { id: sent.message.id, attachment: { attachmentId: id } },
    });
  });

  it('an agent names the visitor; text needs words and takes no attachment; an administrator cannot write into another’s conversation', async () => {
    const { m, agent, visitor } = await chat();
    expect(await codeOf(sendMessage(deps, agent, { clientMsgId: 'a', content: 'hi' }))).toBe(
      'BAD_USER_INPUT: visitorId is required',
    );
    expect(await codeOf(sendMessage(deps, visitor, { clientMsgId: 'b', content: '  ' }))).toBe(
      'BAD_USER_INPUT: content is required',
    );
    expect(await codeOf(sendMessage(deps, visitor, { clientMsgId: 'c', content: 'x', attachmentId: 'att_1' }))).toBe(
      'BAD_USER_INPUT: attachmentId is only for attachment messages',
    );
    expect(await codeOf(sendMessage(deps, visitor, { clientMsgId: 'd', type: 'voice' }))).toBe(
      'BAD_USER_INPUT: attachmentId is required for a voice message',
    );
    expect(await codeOf(sendMessage(deps, visitor, { clientMsgId: ' ', content: 'x' }))).toBe(
      'BAD_USER_INPUT: clientMsgId is required',
    );
    const admin = await f.agent(m, { level: 'admin' });
    expect(
      await codeOf(sendMessage(deps, admin, { visitorId: visitor.visitorId, clientMsgId: 'e', content: 'x' })),
    ).toBe('NOT_ASSIGNED: This conversation is assigned to another agent');
    // The same client_msg_id of another sender is another message.
    const v = await sendMessage(deps, visitor, { clientMsgId: 'same', content: 'from the visitor' });
    const a = await sendMessage(deps, agent, {
      visitorId: visitor.visitorId,
      clientMsgId: 'same',
      content: 'from the agent',
    });
    expect(a.duplicate).toBe(false);
    expect(a.message.id).not.toBe(v.message.id);
  });
});

describe('History', () => {
  it('pages back with before and forward with after, by cursor or bare seq; an empty page has no cursors', async () => {
    const { visitor } = await chat();
    for (let i = 1; i <= 5; i++) await sendMessage(deps, visitor, { clientMsgId: `h${i}`, content: `m${i}` });
    // seq 1 is the assignment's system message; m1..m5 are seqs 2..6.
    const newest = await listMessages(deps, visitor, { limit: 2 });
    expect(newest.messages.map((x) => x.content)).toEqual(['m4', 'm5']);
    expect(newest.hasMore).toBe(true);
    const older = await listMessages(deps, visitor, { limit: 2, before: newest.startCursor });
    expect(older.messages.map((x) => x.content)).toEqual(['m2', 'm3']);
    const oldest = await listMessages(deps, visitor, { limit: 5, before: older.startCursor });
    expect(oldest.messages.map((x) => x.seq)).toEqual([1, 2]);
    expect(oldest.hasMore).toBe(false);
    const forward = await listMessages(deps, visitor, { limit: 2, after: oldest.endCursor });
    expect(forward.messages.map((x) => x.content)).toEqual(['m2', 'm3']);
    expect(forward.hasMore).toBe(true);
    expect((await listMessages(deps, visitor, { limit: 10, after: '4' })).messages.map((x) => x.seq)).toEqual([5, 6]);
    expect((await listMessages(deps, visitor, { limit: 2, before: '3' })).messages.map((x) => x.seq)).toEqual([1, 2]);
    const none = await listMessages(deps, visitor, { after: newest.endCursor });
    expect(none).toEqual({ messages: [], hasMore: false, startCursor: null, endCursor: null });
    expect(await codeOf(listMessages(deps, visitor, { before: '1', after: '2' }))).toBe(
      'BAD_USER_INPUT: give before or after, not both',
    );
    for (const bad of [
      'abc',
      Buffer.from('["c", 1.5]').toString('base64url'),
      Buffer.from('[1, 2]').toString('base64url'),
      '1234567890',
    ])
      expect(await codeOf(listMessages(deps, visitor, { before: bad })), bad).toBe(
        'BAD_USER_INPUT: before/after must be a seq or a cursor of a message page',
      );
  });

  it('history_only_mine: an agent sees the conversations it was assigned or transferred, and the queued one', async () => {
    const m = await f.merchant({ settings: { history_only_mine: true } });
    const a = await f.agent(m);
    const b = await f.agent(m);
    const admin = await f.agent(m, { level: 'admin' });
    expect(await historyOnlyMine(deps, a)).toBe(true);
    expect(await historyOnlyMine(deps, admin)).toBe(false);
    const plain = await f.merchant();
    expect(await historyOnlyMine(deps, await f.agent(plain))).toBe(false);
    await f.online(a);
    const v = await f.visitor(m);
    await assignAgent(deps, v);
    await sendMessage(deps, v, { clientMsgId: 'one', content: 'with a' });
    await f.online(b);
    await transferConversation(deps, a, { visitorId: v.visitorId, toAgentId: b.agentId });
    // b was transferred the conversation: it sees it, as a does.
    for (const agent of [a, b])
      expect((await listMessages(deps, agent, { visitorId: v.visitorId })).messages.map((x) => x.content)).toContain(
        'with a',
      );
    await closeConversation(deps, v);
    // A queued conversation is visible to any agent; an earlier one of other agents is not.
    await setAgentState(deps, a, 'busy');
    await setAgentState(deps, b, 'busy');
    await sendMessage(deps, v, { clientMsgId: 'two', content: 'queued' });
    const c = await f.agent(m);
    expect((await listMessages(deps, c, { visitorId: v.visitorId })).messages.map((x) => x.content)).toEqual([
      'queued',
    ]);
  });
});

describe('Read state', () => {
  it('capped at the last message, never backwards; the receipt goes to both sides; the answer counts what is left', async () => {
    const { agent, visitor, conversationId } = await chat();
    await sendMessage(deps, agent, { visitorId: visitor.visitorId, clientMsgId: 'a1', content: 'one' });
    await sendMessage(deps, agent, { visitorId: visitor.visitorId, clientMsgId: 'a2', content: 'two' });
    const feed = recordEvents(deps, [visitor.channel, agentChannel(agent.agentId)]);
    await feed.ready;
    expect(await markRead(deps, visitor, { seq: 2 })).toEqual({ conversationId, readSeq: 2, unreadCount: 1 });
    expect(await markRead(deps, visitor, { seq: 99 })).toEqual({ conversationId, readSeq: 3, unreadCount: 0 });
    expect(await markRead(deps, visitor, { seq: 1 })).toEqual({ conversationId, readSeq: 3, unreadCount: 0 });
    await eventually(() => feed.of('message.read').length === 4, 'two receipts on two channels');
    expect(feed.of('message.read', visitor.channel).map((e) => e.data)).toEqual([
      {
        conversation_id: conversationId,
        visitor_id: visitor.visitorId,
        reader_type: 'visitor',
        reader_id: visitor.visitorId,
        seq: 2,
      },
      {
        conversation_id: conversationId,
        visitor_id: visitor.visitorId,
        reader_type: 'visitor',
        reader_id: visitor.visitorId,
        seq: 3,
      },
    ]);
    await sendMessage(deps, visitor, { clientMsgId: 'v1', content: 'reply' });
    expect(await markRead(deps, agent, { visitorId: visitor.visitorId, seq: 3 })).toEqual({
      conversationId,
      readSeq: 3,
      unreadCount: 1,
    });
    feed.stop();
  });

  it('no conversation yet → not found; another agent’s → not assigned; an administrator may', async () => {
    const { m, visitor } = await chat();
    const stranger = await f.visitor(m);
    expect(await codeOf(markRead(deps, stranger, { seq: 1 }))).toBe('NOT_FOUND: No conversation yet');
    const other = await f.agent(m);
    expect(await codeOf(markRead(deps, other, { visitorId: visitor.visitorId, seq: 1 }))).toBe(
      'NOT_ASSIGNED: This conversation is not assigned to you',
    );
    const admin = await f.agent(m, { level: 'admin' });
    expect((await markRead(deps, admin, { visitorId: visitor.visitorId, seq: 1 })).readSeq).toBe(1);
  });
});

describe('Typing', () => {
  it('to the other side; stopping is told even right after starting; not to nobody, not when closed', async () => {
    const { agent, visitor } = await chat();
    const feed = recordEvents(deps, [visitor.channel, agentChannel(agent.agentId)]);
    await feed.ready;
    expect(await setTyping(deps, visitor, {})).toEqual({ published: true });
    expect(await setTyping(deps, visitor, { typing: false })).toEqual({ published: true });
    // The agent's throttle is its own.
    expect(await setTyping(deps, agent, { visitorId: visitor.visitorId })).toEqual({ published: true });
    await eventually(() => feed.of('typing').length === 3, 'three typing events');
    expect(feed.of('typing', agentChannel(agent.agentId)).map((e) => e.data)).toEqual([
      expect.objectContaining({ sender_type: 'visitor', sender_id: visitor.visitorId, typing: true }),
      expect.objectContaining({ sender_type: 'visitor', typing: false }),
    ]);
    expect(feed.of('typing', visitor.channel)[0]?.data).toMatchObject({
      sender_type: 'agent',
      sender_id: agent.agentId,
    });
    await closeConversation(deps, visitor);
    expect(await codeOf(setTyping(deps, visitor, {}))).toBe('CONVERSATION_CLOSED: This conversation is closed');
    // Queued: nobody to tell yet.
    const m = await f.merchant();
    const waiting = await f.visitor(m);
    await assignAgent(deps, waiting);
    expect(await setTyping(deps, waiting, { typing: false })).toEqual({ published: false });
    feed.stop();
  });
});

describe('Message views', () => {
  it('a recalled message shows neither its text nor its attachment', () => {
    const row = {
      id: 'msg_1',
      conversationId: 'c1',
      merchantId: 'm1',
      visitorId: 'v1',
      seq: 4,
      senderType: 'agent' as const,
      senderId: 'a1',
      clientMsgId: 'k',
      type: 'image',
      content: 'look',
      attachmentId: 'att_1',
      meta: null,
      createdAt: new Date(1000),
      recalledAt: null as Date | null,
    };
    const attachment = {
      attachmentId: 'att_1',
      kind: 'image' as const,
      mime: 'image/png',
      size: 1,
      name: 'a',
      url: '/a',
      thumbnailUrl: null,
    };
    expect(toMessageView(row as never, attachment)).toMatchObject({
      content: 'look',
      attachment,
      recalled: false,
      createdAt: 1000,
      meta: null,
    });
    expect(toMessageView({ ...row, recalledAt: new Date(2000) } as never, attachment)).toMatchObject({
      content: '',
      attachment: null,
      recalled: true,
    });
  });
});
