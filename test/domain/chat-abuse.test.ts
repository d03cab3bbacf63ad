import { eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.js';
import { conversations, messages } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { DomainError } from '../../src/errors.js';
import { newId } from '../../src/ids.js';
import { loggableError } from '../../src/log.js';
import { preview } from '../../src/resolvers/chat-rows.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { listConversations } from '../../src/resolvers/conversations/queries.js';
import { assignAgent, openNewConversation } from '../../src/resolvers/conversations/routing.js';
import { agentChannel } from '../../src/resolvers/events.js';
import { listMessages } from '../../src/resolvers/messages/history.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import { setTyping } from '../../src/resolvers/messages/typing.js';
import {
  type Factories,
  meanwhileBeforeNextTransaction,
  recordEvents,
  refusalOf,
  type TestDeps,
  useTestDeps,
} from '../support/deps.js';

/** Issue 27 (the public chat surface under abuse), rows 2, 3, 5, 6 and 7: what the domain must hold whatever a client sends. */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));
const chat = () => f.assignedChat();

const cursor = (values: unknown) => Buffer.from(JSON.stringify(values)).toString('base64url');

describe('client_msg_id: one stored message per sender, whatever races it (row 5)', () => {
  it('a retry racing a close is answered with the stored copy, not stored again in a new conversation', async () => {
    const { agent, visitor, conversationId } = await chat();
    const send = { clientMsgId: 'retried', content: 'are you there?' };
    let first: Awaited<ReturnType<typeof sendMessage>> | undefined;
    // Between the retry's checks and its locked write, the first copy commits and the agent closes.
    const racing = meanwhileBeforeNextTransaction(deps, async () => {
      first = await sendMessage(deps, visitor, send);
      await closeConversation(deps, agent, { visitorId: visitor.visitorId });
    });
    const retry = await sendMessage(racing, visitor, send);
    expect(first?.message.conversationId).toBe(conversationId);
    expect(retry).toMatchObject({ duplicate: true, message: { id: first?.message.id, conversationId } });
    const stored = await deps.db.select().from(messages).where(eq(messages.visitorId, visitor.visitorId));
    expect(stored.filter((m) => m.clientMsgId === 'retried').map((m) => m.id)).toEqual([first?.message.id]);
    // Nothing was opened for the copy: the visitor's only conversation is the closed one.
    const own = await deps.db.select().from(conversations).where(eq(conversations.visitorId, visitor.visitorId));
    expect(own.map((c) => [c.id, c.state])).toEqual([[conversationId, 'closed']]);
  });

  it('the database refuses a second copy of a sender’s key in another conversation of the visitor', async () => {
    const { agent, visitor, conversationId } = await chat();
    const sent = await sendMessage(deps, visitor, { clientMsgId: 'k1', content: 'one' });
    await closeConversation(deps, agent, { visitorId: visitor.visitorId });
    const next = await assignAgent(deps, visitor);
    expect(next.conversationId).not.toBe(conversationId);
    const copy = {
      id: newId('msg'),
      conversationId: next.conversationId,
      merchantId: visitor.merchantId,
      visitorId: visitor.visitorId,
      seq: 1000,
      senderType: 'visitor' as const,
      senderId: visitor.visitorId,
      clientMsgId: 'k1',
      type: 'text',
      content: 'one',
    };
    await expect(deps.db.insert(messages).values(copy)).rejects.toThrow();
    // Another sender (the agent) may use the same key; so may the visitor with another key.
    await deps.db.insert(messages).values({ ...copy, id: newId('msg'), senderType: 'agent', senderId: agent.agentId });
    await deps.db.insert(messages).values({ ...copy, id: newId('msg'), seq: 1001, clientMsgId: 'k2' });
    // And a send of the stored key from the new conversation answers the stored message.
    expect(await sendMessage(deps, visitor, { clientMsgId: 'k1', content: 'one' })).toMatchObject({
      duplicate: true,
      message: { id: sent.message.id, conversationId },
    });
  });
});

describe('previews are cut on characters, not UTF-16 units (row 6)', () => {
  it('an emoji across the cut is kept whole, and the message is stored (visitor and agent)', async () => {
    const { agent, visitor, conversationId } = await chat();
    const content = `${'a'.repeat(99)}😀 and more`;
    const sent = await sendMessage(deps, visitor, { clientMsgId: 'emoji', content });
    expect(sent.message.content).toBe(content);
    const [row] = await deps.db.select().from(conversations).where(eq(conversations.id, conversationId));
    expect((row?.items as { content: string }[] | undefined)?.[0]?.content).toBe(`${'a'.repeat(99)}😀`);
    const reply = `${'b'.repeat(99)}👍🏽 thanks`;
    await sendMessage(deps, agent, { visitorId: visitor.visitorId, clientMsgId: 'emoji-a', content: reply });
    const [after] = await deps.db.select().from(conversations).where(eq(conversations.id, conversationId));
    expect((after?.items as { content: string }[] | undefined)?.[0]?.content).toBe(`${'b'.repeat(99)}👍🏽`);
  });

  it('counts graphemes, and bounds a grapheme heavy with combining marks in UTF-16 units', () => {
    expect(preview('e\u0301'.repeat(150))).toBe('e\u0301'.repeat(100));
    expect(preview('👨‍👩‍👧'.repeat(120))).toBe('👨‍👩‍👧'.repeat(50)); // 8 units each, 400 units at most
    expect(preview(`x${'\u0301'.repeat(1000)}y`)).toBe('');
    expect(preview('short')).toBe('short');
  });

  it('a failed query is logged without its parameters or the value PostgreSQL quotes', async () => {
    const { conversationId } = await chat();
    const secret = `private words ${'z'.repeat(40)}\ud83d`;
    let failure: unknown;
    await deps.db
      .update(conversations)
      .set({ items: sql`${JSON.stringify([{ content: secret }])}::jsonb` })
      .where(eq(conversations.id, conversationId))
      .catch((error: unknown) => {
        failure = error;
      });
    expect(failure).toBeInstanceOf(Error);
    expect(JSON.stringify(failure, Object.getOwnPropertyNames(failure))).toContain('private words');
    const logged = loggableError(failure);
    expect(JSON.stringify(logged)).not.toContain('private words');
    expect(logged).toMatchObject({
      message: expect.stringMatching(/^Failed query: update "conversations"/),
      cause: { code: '22P02' },
    });
  });
});

describe('every history cursor is checked (row 7)', () => {
  const crafted = [
    cursor(['c', 1e308]),
    cursor(['c', 2 ** 40]),
    cursor(['c', -1]),
    cursor(['c', 1.5]),
    cursor([]),
    cursor(['notadate', 'x']),
    cursor([1e300, 'x']),
    cursor({}),
    cursor(['x'.repeat(65), 1]),
    'not base64 at all!',
    cursor('2026-01-01T00:00:00.000Z'),
  ];

  it('a message page’s before/after: BAD_USER_INPUT, never a database error', async () => {
    const { agent, visitor } = await chat();
    for (const value of crafted) {
      expect(await refusalOf(listMessages(deps, visitor, { before: value }))).toBe(
        'BAD_USER_INPUT: before/after must be a seq or a cursor of a message page',
      );
      expect(await refusalOf(listMessages(deps, agent, { visitorId: visitor.visitorId, after: value }))).toBe(
        'BAD_USER_INPUT: before/after must be a seq or a cursor of a message page',
      );
    }
  });

  it('a conversation list’s after, in each scope: BAD_USER_INPUT, never a database error', async () => {
    const { m, visitor } = await chat();
    const admin = await f.agent(m, { level: 'admin' });
    await sendMessage(deps, visitor, { clientMsgId: 'x', content: 'x' });
    const dates = [
      cursor(['notadate', 'x']),
      cursor(['2026-13-45T99:00:00.000Z', 'x']),
      cursor(['+275760-09-13', 'x']),
    ];
    for (const scope of ['queue', 'mine', 'all'] as const) {
      for (const value of [...crafted, ...dates, cursor([2 ** 62, 'x'])]) {
        expect(await refusalOf(listConversations(deps, admin, { scope, after: value }))).toBe(
          'BAD_USER_INPUT: after is not a cursor of this list',
        );
      }
    }
    // The cursors the lists hand out still work.
    const all = await listConversations(deps, admin, { scope: 'all', first: 1 });
    expect(all.endCursor).toBeTruthy();
    expect((await listConversations(deps, admin, { scope: 'all', after: all.endCursor as string })).nodes).toEqual([]);
  });
});

/** The deps with other chat budgets (each distinct budget gets its own counters). */
const budgets = (chatLimits: Partial<Config['chatLimits']>): Deps => ({
  ...deps,
  config: { ...deps.config, chatLimits: { ...deps.config.chatLimits, ...chatLimits } },
});

/** The refusal of `work`: its code and wait, or 'no error'. */
async function refusal(work: Promise<unknown>): Promise<{ code: string; retryAfter?: number } | 'no error'> {
  try {
    await work;
  } catch (error) {
    if (error instanceof DomainError) return { code: error.code, retryAfter: error.retryAfterSeconds };
    throw error;
  }
  return 'no error';
}

const storedCount = async (visitorId: string) =>
  (await deps.db.select().from(messages).where(eq(messages.visitorId, visitorId))).filter((m) => m.clientMsgId).length;

describe('message budgets per sender and per merchant (row 2)', () => {
  it('a visitor’s burst: past CHAT_MESSAGE_BURST in 10 s, RATE_LIMITED with the wait, nothing stored', async () => {
    const limited = budgets({ messageBurst: 3 });
    const { visitor } = await chat();
    for (let i = 0; i < 3; i++) await sendMessage(limited, visitor, { clientMsgId: `b${i}`, content: 'hi' });
    const refused = await refusal(sendMessage(limited, visitor, { clientMsgId: 'b3', content: 'one too many' }));
    expect(refused).toMatchObject({ code: 'RATE_LIMITED' });
    expect((refused as { retryAfter: number }).retryAfter).toBeGreaterThanOrEqual(1);
    expect((refused as { retryAfter: number }).retryAfter).toBeLessThanOrEqual(10);
    expect(await storedCount(visitor.visitorId)).toBe(3);
  });

  it('an agent’s burst and anyone’s hourly budget', async () => {
    const { agent, visitor } = await chat();
    const burst = budgets({ messageBurst: 2 });
    for (let i = 0; i < 2; i++)
      await sendMessage(burst, agent, { visitorId: visitor.visitorId, clientMsgId: `a${i}`, content: 'hello' });
    expect(
      await refusal(sendMessage(burst, agent, { visitorId: visitor.visitorId, clientMsgId: 'a2', content: 'x' })),
    ).toMatchObject({ code: 'RATE_LIMITED' });
    // The visitor's budget is its own.
    await sendMessage(burst, visitor, { clientMsgId: 'v0', content: 'still me' });
    const hourly = budgets({ messageBurst: 100, messagesPerHour: 3 });
    const other = await chat();
    for (let i = 0; i < 3; i++) await sendMessage(hourly, other.visitor, { clientMsgId: `h${i}`, content: 'x' });
    const refused = await refusal(sendMessage(hourly, other.visitor, { clientMsgId: 'h3', content: 'x' }));
    expect(refused).toMatchObject({ code: 'RATE_LIMITED' });
    expect((refused as { retryAfter: number }).retryAfter).toBeGreaterThan(3000);
  });

  it('one merchant’s visitors share one budget; another merchant’s visitors and the agents are not held back', async () => {
    const limited = budgets({ merchantMessagesPerMinute: 4 });
    const a = await chat();
    const b = await chat();
    const more = [await f.visitor(a.m), await f.visitor(a.m)];
    const senders = [a.visitor, ...more];
    for (let i = 0; i < 4; i++)
      await sendMessage(limited, senders[i % 3] as (typeof senders)[number], { clientMsgId: `m${i}`, content: 'x' });
    for (const v of senders)
      expect(await refusal(sendMessage(limited, v, { clientMsgId: 'over', content: 'x' }))).toMatchObject({
        code: 'RATE_LIMITED',
      });
    expect(await refusal(sendMessage(limited, b.visitor, { clientMsgId: 'b', content: 'other shop' }))).toBe(
      'no error',
    );
    expect(
      await refusal(
        sendMessage(limited, a.agent, { visitorId: a.visitor.visitorId, clientMsgId: 'agent', content: 'x' }),
      ),
    ).toBe('no error');
  });
});

describe('channel floods (row 3)', () => {
  it('typing is throttled both ways: a flood of typing: false publishes once per window', async () => {
    const { agent, visitor } = await chat();
    const feed = recordEvents(deps, [agentChannel(agent.agentId)]);
    await feed.ready;
    const answers = [];
    for (let i = 0; i < 20; i++) answers.push((await setTyping(deps, visitor, { typing: false })).published);
    expect(answers).toEqual([true, ...Array(19).fill(false)]);
    await sendMessage(deps, visitor, { clientMsgId: 'marker', content: 'marker' });
    await feed.first('message.created');
    expect(feed.of('typing').map((e) => (e.data as { typing: boolean }).typing)).toEqual([false]);
    feed.stop();
  });

  it('typing is not kept in the channel’s resumable history', async () => {
    const { agent, visitor } = await chat();
    const channel = agentChannel(agent.agentId);
    const start = deps.bus.subscribe(channel, { replayOnly: true });
    const position = (await start.next()).value?.id as string;
    await start.return(undefined);
    await setTyping(deps, visitor, { typing: true });
    await setTyping(deps, visitor, { typing: false });
    const sent = await sendMessage(deps, visitor, { clientMsgId: 'kept', content: 'kept' });
    const replayed: string[] = [];
    for await (const e of deps.bus.subscribe(channel, { since: position, replayOnly: true })) replayed.push(e.event);
    expect(replayed).toEqual(['message.created']);
    expect(sent.message.content).toBe('kept');
  });

  it('assigning again while a conversation is open returns it and opens none of the hour', async () => {
    const limited = budgets({ conversationsPerHour: 1 });
    const { m } = await chat();
    const visitor = await f.visitor(m);
    const first = await assignAgent(limited, visitor);
    // With the hour's one conversation spent, a repeat is answered from the open conversation.
    expect(await assignAgent(limited, visitor)).toEqual(first);
    expect(await assignAgent(limited, visitor)).toEqual(first);
  });

  it('conversations opened and closed per visitor: a send + close loop stops at CHAT_CONVERSATIONS_PER_HOUR', async () => {
    const limited = budgets({ conversationsPerHour: 2 });
    const { m } = await chat();
    const visitor = await f.visitor(m);
    await assignAgent(limited, visitor); // opened: 1
    await closeConversation(limited, visitor); // closed: 1
    await sendMessage(limited, visitor, { clientMsgId: 'l1', content: 'again' }); // opened: 2
    await closeConversation(limited, visitor); // closed: 2
    expect(await refusal(sendMessage(limited, visitor, { clientMsgId: 'l2', content: 'again' }))).toMatchObject({
      code: 'RATE_LIMITED',
    });
    expect(await refusal(assignAgent(limited, visitor))).toMatchObject({ code: 'RATE_LIMITED' });
    const own = () => deps.db.select().from(conversations).where(eq(conversations.visitorId, visitor.visitorId));
    expect((await own()).map((c) => c.state)).toEqual(['closed', 'closed']);
    // Closing is counted too: a conversation opened some other way (here directly) cannot be closed a third time.
    await openNewConversation(deps, m.merchantId, visitor.visitorId, null);
    expect(await refusal(closeConversation(limited, visitor))).toMatchObject({ code: 'RATE_LIMITED' });
    expect((await own()).map((c) => c.state).sort()).toEqual(['closed', 'closed', 'queued']);
  });
});
