import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { attachments, conversations } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { newId } from '../../src/ids.js';
import { ITEM_CONTENT_MAX, toMessageView } from '../../src/resolvers/chat-rows.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { transferConversation } from '../../src/resolvers/conversations/transfer.js';
import { agentChannel } from '../../src/resolvers/events.js';
import { historyOnlyMine, listMessages } from '../../src/resolvers/messages/history.js';
import { markRead } from '../../src/resolvers/messages/read.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import { setTyping } from '../../src/resolvers/messages/typing.js';
import { setAgentState } from '../../src/resolvers/presence.js';
import { rateLimiterFactory } from '../../src/stores/rate-limits.js';
import {
  eventually,
  type Factories,
  meanwhileBeforeNextTransaction,
  recordEvents,
  refusalOf,
  type TestDeps,
  useTestDeps,
} from '../support/deps.js';

/** Message rules (docs/chat.md) not already covered by test/domain/chat-messages.test.ts. */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const chat = () => f.assignedChat();

const conversationRow = async (id: string) =>
  (await deps.db.select().from(conversations).where(eq(conversations.id, id)))[0];

const conversationsOf = (visitorId: string) =>
  deps.db.select().from(conversations).where(eq(conversations.visitorId, visitorId));

/** A finished upload of the visitor (as attachments.ts stores one), of `kind`. */
async function uploadOf(m: { merchantId: string }, visitorId: string, kind: 'file' | 'image' = 'file') {
  const id = newId('att');
  await deps.db.insert(attachments).values({
    id,
    merchantId: m.merchantId,
    uploaderType: 'visitor',
    uploaderId: visitorId,
    kind,
    mime: kind === 'image' ? 'image/png' : 'application/pdf',
    size: 10,
    name: kind === 'image' ? 'a.png' : 'a.pdf',
    storageKey: id,
  });
  return id;
}

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
    expect(await refusalOf(sendMessage(deps, agent, { clientMsgId: 'a', content: 'hi' }))).toBe(
      'BAD_USER_INPUT: visitorId is required',
    );
    expect(await refusalOf(sendMessage(deps, visitor, { clientMsgId: 'b', content: '  ' }))).toBe(
      'BAD_USER_INPUT: content is required',
    );
    expect(await refusalOf(sendMessage(deps, visitor, { clientMsgId: 'c', content: 'x', attachmentId: 'att_1' }))).toBe(
      'BAD_USER_INPUT: attachmentId is only for attachment messages',
    );
    expect(await refusalOf(sendMessage(deps, visitor, { clientMsgId: 'd', type: 'voice' }))).toBe(
      'BAD_USER_INPUT: attachmentId is required for a voice message',
    );
    expect(await refusalOf(sendMessage(deps, visitor, { clientMsgId: ' ', content: 'x' }))).toBe(
      'BAD_USER_INPUT: clientMsgId is required',
    );
    const admin = await f.agent(m, { level: 'admin' });
    expect(
      await refusalOf(sendMessage(deps, admin, { visitorId: visitor.visitorId, clientMsgId: 'e', content: 'x' })),
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

  it('a blank visitorId or attachmentId is refused as missing, not looked up', async () => {
    const { agent, visitor } = await chat();
    expect(await refusalOf(sendMessage(deps, agent, { visitorId: '  ', clientMsgId: 'a', content: 'hi' }))).toBe(
      'BAD_USER_INPUT: visitorId is required',
    );
    expect(await refusalOf(sendMessage(deps, visitor, { clientMsgId: 'b', type: 'image', attachmentId: ' ' }))).toBe(
      'BAD_USER_INPUT: attachmentId is required',
    );
  });

  it('an agent writing into a queued conversation is told to claim it first', async () => {
    const m = await f.merchant();
    const visitor = await f.visitor(m);
    expect(await sendMessage(deps, visitor, { clientMsgId: 'q', content: 'anyone?' })).toMatchObject({
      conversationState: 'queued',
    });
    const agent = await f.agent(m);
    expect(
      await refusalOf(sendMessage(deps, agent, { visitorId: visitor.visitorId, clientMsgId: 'a', content: 'hi' })),
    ).toBe('NOT_ASSIGNED: This conversation has no agent yet: claim it first');
  });

  it('after a close, a retry answers the stored message (no new conversation); a new agent message is refused', async () => {
    const { agent, visitor, conversationId } = await chat();
    const visitorId = visitor.visitorId;
    const asked = await sendMessage(deps, visitor, { clientMsgId: 'v1', content: 'question' });
    const answered = await sendMessage(deps, agent, { visitorId, clientMsgId: 'a1', content: 'answer' });
    await closeConversation(deps, agent, { visitorId });
    expect(await sendMessage(deps, visitor, { clientMsgId: 'v1', content: 'question' })).toEqual({
      message: asked.message,
      conversationState: 'closed',
      duplicate: true,
    });
    expect(await sendMessage(deps, agent, { visitorId, clientMsgId: 'a1', content: 'answer' })).toEqual({
      message: answered.message,
      conversationState: 'closed',
      duplicate: true,
    });
    expect(await refusalOf(sendMessage(deps, agent, { visitorId, clientMsgId: 'a2', content: 'one more' }))).toBe(
      'CONVERSATION_CLOSED: This conversation is closed',
    );
    expect((await conversationsOf(visitorId)).map((c) => [c.id, c.state])).toEqual([[conversationId, 'closed']]);
  });

  it('the visitor’s conversation closing between the check and the write: the message starts a new conversation', async () => {
    // Routed, with the agent online: the new conversation is routed to it.
    const { agent, visitor, conversationId } = await f.activeChat();
    const visitorId = visitor.visitorId;
    // The agent closes the conversation while the visitor's send is under way.
    const racing = meanwhileBeforeNextTransaction(deps, () => closeConversation(deps, agent, { visitorId }));
    const sent = await sendMessage(racing, visitor, { clientMsgId: 'late', content: 'still there?' });
    expect(sent).toMatchObject({ duplicate: false, conversationState: 'active', message: { content: 'still there?' } });
    expect(sent.message.conversationId).not.toBe(conversationId);
    expect((await conversationRow(conversationId))?.state).toBe('closed');
    expect(await conversationRow(sent.message.conversationId)).toMatchObject({
      state: 'active',
      agentId: agent.agentId,
    });
    const history = await listMessages(deps, visitor, { limit: 1 });
    expect(history.messages.map((x) => [x.conversationId, x.content])).toEqual([
      [sent.message.conversationId, 'still there?'],
    ]);
  });

  it('the same message stored by a parallel request between the check and the write: the stored one is the answer', async () => {
    const { m, visitor } = await chat();
    let first: Awaited<ReturnType<typeof sendMessage>> | undefined;
    const text = { clientMsgId: 'twice', content: 'hello' };
    const racing = meanwhileBeforeNextTransaction(deps, async () => (first = await sendMessage(deps, visitor, text)));
    const second = await sendMessage(racing, visitor, text);
    expect(first).toMatchObject({ duplicate: false, message: { attachment: null } });
    expect(second).toEqual({ ...first, duplicate: true });
    // With an attachment, the answer shows it too.
    const file = { clientMsgId: 'file', type: 'file', attachmentId: await uploadOf(m, visitor.visitorId) };
    let firstFile: Awaited<ReturnType<typeof sendMessage>> | undefined;
    const racingFile = meanwhileBeforeNextTransaction(
      deps,
      async () => (firstFile = await sendMessage(deps, visitor, file)),
    );
    const secondFile = await sendMessage(racingFile, visitor, file);
    expect(secondFile).toMatchObject({
      duplicate: true,
      message: { id: firstFile?.message.id, attachment: { attachmentId: file.attachmentId, name: 'a.pdf' } },
    });
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
    const older = await listMessages(deps, visitor, { limit: 2, before: newest.startCursor ?? undefined });
    expect(older.messages.map((x) => x.content)).toEqual(['m2', 'm3']);
    const oldest = await listMessages(deps, visitor, { limit: 5, before: older.startCursor ?? undefined });
    expect(oldest.messages.map((x) => x.seq)).toEqual([1, 2]);
    expect(oldest.hasMore).toBe(false);
    const forward = await listMessages(deps, visitor, { limit: 2, after: oldest.endCursor ?? undefined });
    expect(forward.messages.map((x) => x.content)).toEqual(['m2', 'm3']);
    expect(forward.hasMore).toBe(true);
    expect((await listMessages(deps, visitor, { limit: 10, after: '4' })).messages.map((x) => x.seq)).toEqual([5, 6]);
    expect((await listMessages(deps, visitor, { limit: 2, before: '3' })).messages.map((x) => x.seq)).toEqual([1, 2]);
    const none = await listMessages(deps, visitor, { after: newest.endCursor ?? undefined });
    expect(none).toEqual({ messages: [], hasMore: false, startCursor: null, endCursor: null });
    expect(await refusalOf(listMessages(deps, visitor, { before: '1', after: '2' }))).toBe(
      'BAD_USER_INPUT: give before or after, not both',
    );
    for (const bad of [
      'abc',
      Buffer.from('["c", 1.5]').toString('base64url'),
      Buffer.from('[1, 2]').toString('base64url'),
      '1234567890',
    ])
      expect(await refusalOf(listMessages(deps, visitor, { before: bad })), bad).toBe(
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

  it('a bare seq takes up to nine digits', async () => {
    const { visitor } = await chat();
    // seq 1 is the assignment's system message; these are seqs 2..12.
    for (let i = 2; i <= 12; i++) await sendMessage(deps, visitor, { clientMsgId: `s${i}`, content: `m${i}` });
    expect((await listMessages(deps, visitor, { after: '10' })).messages.map((x) => x.seq)).toEqual([11, 12]);
    expect((await listMessages(deps, visitor, { before: '12', limit: 2 })).messages.map((x) => x.seq)).toEqual([
      10, 11,
    ]);
    expect((await listMessages(deps, visitor, { after: '000000010' })).messages.map((x) => x.seq)).toEqual([11, 12]);
  });

  it('before a first conversation, a page by seq is empty', async () => {
    const m = await f.merchant();
    const visitor = await f.visitor(m);
    const agent = await f.agent(m);
    const empty = { messages: [], hasMore: false, startCursor: null, endCursor: null };
    expect(await listMessages(deps, visitor, { after: '3' })).toEqual(empty);
    expect(await listMessages(deps, visitor, { before: '3' })).toEqual(empty);
    expect(await listMessages(deps, agent, { visitorId: visitor.visitorId, after: '0' })).toEqual(empty);
  });

  it('hasMore: false when the page holds exactly the last messages', async () => {
    const { visitor } = await chat();
    await sendMessage(deps, visitor, { clientMsgId: 'a', content: 'two' });
    await sendMessage(deps, visitor, { clientMsgId: 'b', content: 'three' });
    // Three messages: the system message and these two.
    expect(await listMessages(deps, visitor, { limit: 3 })).toMatchObject({ hasMore: false });
    expect(await listMessages(deps, visitor, { limit: 2 })).toMatchObject({ hasMore: true });
    expect(await listMessages(deps, visitor, { after: '0', limit: 3 })).toMatchObject({ hasMore: false });
    expect(await listMessages(deps, visitor, { after: '0', limit: 2 })).toMatchObject({ hasMore: true });
    expect(await listMessages(deps, visitor, { before: '3', limit: 2 })).toMatchObject({ hasMore: false });
  });

  it('a page shows each message’s attachment, and none for text', async () => {
    const { m, visitor } = await chat();
    const text = await sendMessage(deps, visitor, { clientMsgId: 't', content: 'see below' });
    const attachmentId = await uploadOf(m, visitor.visitorId, 'image');
    const image = await sendMessage(deps, visitor, { clientMsgId: 'i', type: 'image', attachmentId });
    expect(image.message.attachment).toMatchObject({ attachmentId, kind: 'image', name: 'a.png' });
    for (const page of [
      await listMessages(deps, visitor, { limit: 2 }),
      await listMessages(deps, visitor, { after: '1', limit: 2 }),
    ])
      expect(page.messages).toEqual([text.message, image.message]);
  });

  it('under history_only_mine a visitor still sees all its own conversations', async () => {
    const m = await f.merchant({ settings: { history_only_mine: true } });
    const a = await f.agent(m);
    await f.online(a);
    const visitor = await f.visitor(m);
    await assignAgent(deps, visitor);
    await sendMessage(deps, visitor, { clientMsgId: 'one', content: 'first chat' });
    await closeConversation(deps, visitor);
    await sendMessage(deps, visitor, { clientMsgId: 'two', content: 'second chat' });
    const contents = (await listMessages(deps, visitor, { limit: 100 })).messages.map((x) => x.content);
    expect(contents).toEqual(expect.arrayContaining(['first chat', 'second chat']));
  });

  it('after: in conversation order (by when each was opened), whatever order the rows were written in', async () => {
    const m = await f.merchant();
    await f.online(await f.agent(m));
    const visitor = await f.visitor(m);
    // The first conversation was opened by an instance whose clock runs an hour ahead: it sorts
    // after the second, which was written later.
    const ahead: Deps = { ...deps, now: () => Date.now() + 3_600_000 };
    await assignAgent(ahead, visitor);
    for (const k of ['x1', 'x2', 'x3']) await sendMessage(ahead, visitor, { clientMsgId: k, content: k });
    await closeConversation(deps, visitor);
    for (const k of ['y1', 'y2', 'y3']) await sendMessage(deps, visitor, { clientMsgId: k, content: k });
    const all = await listMessages(deps, visitor, { limit: 100 });
    const written = all.messages.filter((x) => x.senderType === 'visitor').map((x) => x.content);
    expect(written).toEqual(['y1', 'y2', 'y3', 'x1', 'x2', 'x3']);
    // Filling forward from the oldest, two at a time, gives the same history.
    const walked = all.messages.slice(0, 1);
    let cursor = all.startCursor;
    for (let pages = 0; pages < all.messages.length; pages++) {
      const page = await listMessages(deps, visitor, { after: cursor ?? undefined, limit: 2 });
      walked.push(...page.messages);
      if (!page.hasMore) break;
      cursor = page.endCursor;
    }
    expect(walked).toEqual(all.messages);
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
    expect(await refusalOf(markRead(deps, stranger, { seq: 1 }))).toBe('NOT_FOUND: No conversation yet');
    const other = await f.agent(m);
    expect(await refusalOf(markRead(deps, other, { visitorId: visitor.visitorId, seq: 1 }))).toBe(
      'NOT_ASSIGNED: This conversation is not assigned to you',
    );
    const admin = await f.agent(m, { level: 'admin' });
    expect((await markRead(deps, admin, { visitorId: visitor.visitorId, seq: 1 })).readSeq).toBe(1);
  });

  it('an agent of another merchant is told the visitor does not exist (reading, typing)', async () => {
    const { visitor } = await chat();
    const outsider = await f.agent(await f.merchant(), { level: 'admin' });
    expect(await refusalOf(markRead(deps, outsider, { visitorId: visitor.visitorId, seq: 1 }))).toBe(
      'NOT_FOUND: No such visitor',
    );
    expect(await refusalOf(setTyping(deps, outsider, { visitorId: visitor.visitorId }))).toBe(
      'NOT_FOUND: No such visitor',
    );
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
    expect(await refusalOf(setTyping(deps, visitor, {}))).toBe('CONVERSATION_CLOSED: This conversation is closed');
    // Before the first message (the widget's input fires typing) and queued: nobody to tell yet.
    const m = await f.merchant();
    const waiting = await f.visitor(m);
    expect(await setTyping(deps, waiting, {})).toEqual({ published: false });
    await assignAgent(deps, waiting);
    expect(await setTyping(deps, waiting, { typing: false })).toEqual({ published: false });
    feed.stop();
  });

  it('a failing throttle store is an error, not a throttled answer, whichever way', async () => {
    const { agent, visitor } = await chat();
    // The Redis-backed limiter of an instance whose Redis is not reachable (never connected).
    const { Redis } = await import('ioredis');
    const redis = new Redis({ lazyConnect: true, enableOfflineQueue: false });
    try {
      const cut: Deps = { ...deps, rateLimiter: rateLimiterFactory({ redis }) };
      const feed = recordEvents(deps, [agentChannel(agent.agentId)]);
      await feed.ready;
      await expect(setTyping(cut, visitor, {})).rejects.toBeInstanceOf(BackendUnavailableError);
      // Stopping is throttled too (issue 27, row 3), so it fails the same way.
      await expect(setTyping(cut, visitor, { typing: false })).rejects.toBeInstanceOf(BackendUnavailableError);
      // A marker through the working deps arrives alone: the failing calls published nothing.
      expect(await setTyping(deps, visitor, { typing: false })).toEqual({ published: true });
      await feed.first('typing');
      expect(feed.of('typing').map((e) => (e.data as { typing: boolean }).typing)).toEqual([false]);
      feed.stop();
    } finally {
      redis.disconnect();
    }
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
