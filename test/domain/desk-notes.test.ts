import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { agents, conversationNotes, conversations, messages } from '../../src/db/schema.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { loadConversation } from '../../src/resolvers/conversations/queries.js';
import { addNote, listNotes, MAX_NOTE, MAX_NOTES_PER_CONVERSATION } from '../../src/resolvers/desk/notes.js';
import { agentChannel } from '../../src/resolvers/events.js';
import { listMessages } from '../../src/resolvers/messages/history.js';
import { markRead } from '../../src/resolvers/messages/read.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import { type Factories, recordEvents, refusalOf, type TestDeps, useTestDeps } from '../support/deps.js';

/**
 * Internal notes (docs/desk.md "Internal notes"): for the merchant's agents only. A note is not
 * a message: it takes no seq, so the visitor's history, seq gaps and unread counts never see it.
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

/** A merchant, an agent and a visitor chatting with it (two messages). */
async function chat() {
  const { m, agent, visitor, conversationId } = await f.assignedChat({ agentNickname: 'Alice' });
  await sendMessage(deps, visitor, { clientMsgId: 'v-1', content: 'Where is my parcel?' });
  await sendMessage(deps, agent, { visitorId: visitor.visitorId, clientMsgId: 'a-1', content: 'Let me check.' });
  return { m, agent, visitor, conversationId };
}

describe('internal notes', () => {
  it('a note sits after the last message, takes no seq, and goes to agent channels only', async () => {
    const { m, agent, visitor, conversationId } = await chat();
    const colleague = await f.agent(m);
    const before = (await deps.db.select().from(conversations).where(eq(conversations.id, conversationId)))[0];
    const feed = recordEvents(deps, [visitor.channel, agentChannel(agent.agentId), agentChannel(colleague.agentId)]);
    await feed.ready;

    const note = await addNote(deps, colleague, { visitorId: visitor.visitorId, content: 'VIP: ships free' });
    expect(note).toMatchObject({
      conversationId,
      visitorId: visitor.visitorId,
      agentId: colleague.agentId,
      afterSeq: before?.lastSeq,
      content: 'VIP: ships free',
    });
    const created = await feed.first('note.created', agentChannel(agent.agentId));
    expect(created.data).toEqual({
      note: {
        id: note.id,
        conversation_id: conversationId,
        visitor_id: visitor.visitorId,
        agent_id: colleague.agentId,
        agent_nickname: colleague.agent.nickname,
        after_seq: note.afterSeq,
        content: 'VIP: ships free',
        created_at: note.createdAt,
      },
    });
    await feed.first('note.created', agentChannel(colleague.agentId));

    // The next message follows the last one without a hole: the note took no seq.
    const next = await sendMessage(deps, agent, {
      visitorId: visitor.visitorId,
      clientMsgId: 'a-2',
      content: 'Found it',
    });
    expect(next.message.seq).toBe((before?.lastSeq ?? 0) + 1);
    await feed.first('message.created', visitor.channel);
    feed.stop();
    expect(feed.events.filter((e) => e.channel === visitor.channel).map((e) => e.event)).not.toContain('note.created');
    expect(JSON.stringify(feed.events.filter((e) => e.channel === visitor.channel))).not.toContain('VIP');

    const after = (await deps.db.select().from(conversations).where(eq(conversations.id, conversationId)))[0];
    expect(after?.lastSeq).toBe(next.message.seq);
    const rows = await deps.db.select().from(messages).where(eq(messages.conversationId, conversationId));
    expect(rows.map((r) => r.content)).not.toContain('VIP: ships free');
  });

  it('the visitor’s history, read position and unread count are those of a conversation without the note', async () => {
    const { agent, visitor } = await chat();
    const historyBefore = await listMessages(deps, visitor, {});
    const unreadBefore = (await loadConversation(deps, visitor))?.unreadCount;
    await addNote(deps, agent, { visitorId: visitor.visitorId, content: 'internal only' });
    const historyAfter = await listMessages(deps, visitor, {});
    expect(historyAfter).toEqual(historyBefore);
    expect(historyAfter.messages.map((m) => m.seq)).toEqual([1, 2, 3].slice(0, historyAfter.messages.length));
    expect((await loadConversation(deps, visitor))?.unreadCount).toBe(unreadBefore);
    // Filling a hole with `after` = the last seq finds nothing new.
    const last = historyAfter.messages.at(-1)?.seq ?? 0;
    expect((await listMessages(deps, visitor, { after: String(last) })).messages).toEqual([]);
    expect((await markRead(deps, visitor, { seq: last })).unreadCount).toBe(0);
  });

  it('agents list the notes of a visitor in history order; another merchant’s agent cannot', async () => {
    const { agent, visitor } = await chat();
    const first = await addNote(deps, agent, { visitorId: visitor.visitorId, content: 'first' });
    await sendMessage(deps, visitor, { clientMsgId: 'v-2', content: 'Thanks' });
    const second = await addNote(deps, agent, { visitorId: visitor.visitorId, content: 'second' });
    expect(second.afterSeq).toBe(first.afterSeq + 1);
    expect(await listNotes(deps, agent, { visitorId: visitor.visitorId })).toEqual([first, second]);
    const stranger = await f.agent(await f.merchant());
    expect(await refusalOf(listNotes(deps, stranger, { visitorId: visitor.visitorId }))).toBe(
      'NOT_FOUND: No such visitor',
    );
    expect(await refusalOf(addNote(deps, stranger, { visitorId: visitor.visitorId, content: 'x' }))).toBe(
      'NOT_FOUND: No such visitor',
    );
  });

  it('sizes are capped; a visitor without a conversation has nothing to note on; ticket agents are refused', async () => {
    const { m, agent, visitor } = await chat();
    expect(
      await refusalOf(addNote(deps, agent, { visitorId: visitor.visitorId, content: 'x'.repeat(MAX_NOTE + 1) })),
    ).toBe(`BAD_USER_INPUT: content must be at most ${MAX_NOTE} characters`);
    expect(await refusalOf(addNote(deps, agent, { visitorId: visitor.visitorId, content: ' ' }))).toBe(
      'BAD_USER_INPUT: content is required',
    );
    const silent = await f.visitor(m);
    expect(await refusalOf(addNote(deps, agent, { visitorId: silent.visitorId, content: 'x' }))).toBe(
      'NOT_FOUND: This visitor has no conversation to note on yet',
    );
    const ticket = await f.agent(m, { level: 'ticket_agent' });
    expect(await refusalOf(addNote(deps, ticket, { visitorId: visitor.visitorId, content: 'x' }))).toMatch(
      /^FORBIDDEN/,
    );
  });

  it('a closed conversation takes the note when the visitor has no open one', async () => {
    const { agent, visitor, conversationId } = await chat();
    await closeConversation(deps, agent, { visitorId: visitor.visitorId });
    const note = await addNote(deps, agent, { visitorId: visitor.visitorId, content: 'after the close' });
    expect([note.id.startsWith('note_'), note.conversationId]).toEqual([true, conversationId]);
  });

  it(`a conversation holds ${MAX_NOTES_PER_CONVERSATION} notes, all listed; the next is refused`, async () => {
    const { m, agent, visitor, conversationId } = await chat();
    const rows = Array.from({ length: MAX_NOTES_PER_CONVERSATION - 1 }, (_, i) => ({
      id: `note_fill_${conversationId}_${i}`,
      merchantId: m.merchantId,
      conversationId,
      visitorId: visitor.visitorId,
      agentId: agent.agentId,
      afterSeq: 0,
      content: `n${i}`,
      createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, i)),
    }));
    await deps.db.insert(conversationNotes).values(rows);
    const last = await addNote(deps, agent, { visitorId: visitor.visitorId, content: 'the last one' });
    expect(await refusalOf(addNote(deps, agent, { visitorId: visitor.visitorId, content: 'one more' }))).toBe(
      `LIMIT_REACHED: A conversation holds at most ${MAX_NOTES_PER_CONVERSATION} notes`,
    );
    const listed = await listNotes(deps, agent, { visitorId: visitor.visitorId });
    expect(listed).toHaveLength(MAX_NOTES_PER_CONVERSATION);
    expect(listed.at(-1)).toEqual(last);
  });

  it('a queued conversation’s note goes to its writer’s channel only; a deleted author lists with no nickname', async () => {
    const m = await f.merchant();
    const writer = await f.agent(m);
    // Nobody online: the conversation waits in the queue, with no agent.
    const queued = await f.conversation(m);
    const feed = recordEvents(deps, [agentChannel(writer.agentId)]);
    await feed.ready;
    const note = await addNote(deps, writer, { visitorId: queued.visitor.visitorId, content: 'waiting' });
    expect((await feed.first('note.created')).channel).toBe(agentChannel(writer.agentId));
    feed.stop();
    expect(feed.events.map((e) => e.channel)).toEqual([agentChannel(writer.agentId)]);
    await deps.db.delete(agents).where(eq(agents.id, writer.agentId));
    const admin = await f.agent(m, { level: 'admin' });
    expect(await listNotes(deps, admin, { visitorId: queued.visitor.visitorId })).toEqual([
      { ...note, agentId: null, agentNickname: '' },
    ]);
  });

  it('under history_only_mine an agent lists the notes of its own and of queued conversations; an admin all', async () => {
    const m = await f.merchant({ settings: { history_only_mine: true } });
    const [mine, other] = [await f.agent(m), await f.agent(m)];
    const admin = await f.agent(m, { level: 'admin' });
    // Queued first (nobody online), then served by `other`.
    const { visitor } = await f.conversation(m);
    const queuedNote = await addNote(deps, mine, { visitorId: visitor.visitorId, content: 'while it waits' });
    expect(await listNotes(deps, mine, { visitorId: visitor.visitorId })).toEqual([queuedNote]);
    await f.online(other);
    await deps.db
      .update(conversations)
      .set({ state: 'active', agentId: other.agentId })
      .where(eq(conversations.id, queuedNote.conversationId));
    expect(await listNotes(deps, mine, { visitorId: visitor.visitorId })).toEqual([]);
    expect(await listNotes(deps, other, { visitorId: visitor.visitorId })).toEqual([queuedNote]);
    expect(await listNotes(deps, admin, { visitorId: visitor.visitorId })).toEqual([queuedNote]);
  });
});
