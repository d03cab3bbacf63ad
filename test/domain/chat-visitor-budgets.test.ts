import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { Deps } from '../../src/deps.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { loadConversation } from '../../src/resolvers/conversations/queries.js';
import { rateConversation } from '../../src/resolvers/conversations/rating.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { listMessages } from '../../src/resolvers/messages/history.js';
import { markRead } from '../../src/resolvers/messages/read.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import { setTyping } from '../../src/resolvers/messages/typing.js';
import { loadVisitorBootstrap } from '../../src/resolvers/visitor.js';
import { answerOrRefusal, withChatLimits } from '../support/budgets.js';
import { type Factories, type TestDeps, useTestDeps } from '../support/deps.js';

/**
 * Issue 27 (every visitor action has a budget): a visitor's reads, read receipts, ratings, typing
 * notices and assign calls are counted per visitor before any statement (reads, typing notices and
 * assign calls per merchant too, after the visitor's own), refused RATE_LIMITED with the wait
 * (REST 1429 with `Retry-After`, GraphQL `RATE_LIMITED`), and another visitor (or merchant) is not
 * held back.
 */
let deps: TestDeps;
let f: Factories;
useTestDeps((made) => {
  deps = made.deps;
  f = made.f;
});

const limited = (chatLimits: Partial<Deps['config']['chatLimits']>) => withChatLimits(deps, chatLimits);
const answer = answerOrRefusal;

/** The answer of `work`, and how many statements it ran. */
async function counted(work: () => Promise<unknown>) {
  let statements = 0;
  const stop = deps.database.onQuery(() => {
    statements++;
  });
  try {
    return { answer: await answer(work()), statements };
  } finally {
    stop();
  }
}

/** Two visitors of a merchant with an online agent, each in an active conversation with a message. */
async function chatting(switches?: Record<string, string>) {
  const m = await f.merchant(switches ? { switches } : {});
  const agent = await f.agent(m);
  await f.online(agent);
  const visitors = [];
  for (const name of ['a', 'b']) {
    const visitor = await f.visitor(m);
    await assignAgent(deps, visitor);
    await sendMessage(deps, visitor, { clientMsgId: `${name}-1`, content: 'hello' });
    visitors.push(visitor);
  }
  return visitors as [(typeof visitors)[number], (typeof visitors)[number]];
}

describe('a visitor’s reads share CHAT_VISITOR_READS_PER_MINUTE', () => {
  it('messages, conversation and bootstrap count together; past it refused before any statement; another visitor is not', async () => {
    const [a, b] = await chatting();
    const budget = limited({ visitorReadsPerMinute: 3 });
    expect(await answer(listMessages(budget, a, { limit: 20 }))).toBe('answered');
    expect(await answer(loadConversation(budget, a))).toBe('answered');
    expect(await answer(loadVisitorBootstrap(budget, a, { wsAddress: 'ws://localhost' }))).toBe('answered');
    for (const read of [
      () => listMessages(budget, a, { limit: 20 }),
      () => loadConversation(budget, a),
      () => loadVisitorBootstrap(budget, a, { wsAddress: 'ws://localhost' }),
    ]) {
      const refused = await counted(read);
      expect(refused.answer).toMatchObject({ code: 'RATE_LIMITED' });
      expect((refused.answer as { retryAfter: number }).retryAfter).toBeGreaterThan(0);
      expect(refused.statements).toBe(0);
    }
    expect(await answer(listMessages(budget, b, { limit: 20 }))).toBe('answered');
  });
});

describe('a merchant’s visitors share CHAT_MERCHANT_VISITOR_READS_PER_MINUTE', () => {
  it('fresh visitors each within their own budget are refused past the merchant’s, before any statement; another merchant is not', async () => {
    const m = await f.merchant();
    const [a, b, fresh] = [await f.visitor(m), await f.visitor(m), await f.visitor(m)];
    const budget = limited({ merchantVisitorReadsPerMinute: 4 });
    // Two tokens of one merchant, each far below its own 600 a minute: four reads in all.
    for (const visitor of [a, b, a, b])
      expect(await answer(listMessages(budget, visitor, { limit: 20 }))).toBe('answered');
    // Past the merchant's budget: every read of any of its visitors, a fresh one's first included.
    for (const read of [
      () => loadConversation(budget, fresh),
      () => listMessages(budget, b, { limit: 20 }),
      () => loadVisitorBootstrap(budget, a, { wsAddress: 'ws://localhost' }),
    ]) {
      const refused = await counted(read);
      expect(refused.answer).toMatchObject({ code: 'RATE_LIMITED' });
      expect((refused.answer as { retryAfter: number }).retryAfter).toBeGreaterThan(0);
      expect(refused.statements).toBe(0);
    }
    const other = await f.visitor(await f.merchant());
    expect(await answer(listMessages(budget, other, { limit: 20 }))).toBe('answered');
  });

  it('a token past its own read budget does not spend its merchant’s', async () => {
    const budget = limited({ visitorReadsPerMinute: 2, merchantVisitorReadsPerMinute: 4 });
    await merchantShare((d, visitor) => listMessages(d, visitor, { limit: 20 }), budget);
  });
});

describe('a visitor’s read receipts have CHAT_READ_MARKS_PER_MINUTE', () => {
  it('each call counts, even one that moves nothing; past it refused before any statement; another visitor is not', async () => {
    const [a, b] = await chatting();
    const budget = limited({ readMarksPerMinute: 2 });
    for (let i = 0; i < 2; i++) expect(await answer(markRead(budget, a, { seq: 1000 }))).toBe('answered');
    const refused = await counted(() => markRead(budget, a, { seq: 1000 }));
    expect(refused.answer).toMatchObject({ code: 'RATE_LIMITED' });
    expect((refused.answer as { retryAfter: number }).retryAfter).toBeGreaterThan(0);
    expect(refused.statements).toBe(0);
    expect(await answer(markRead(budget, b, { seq: 1000 }))).toBe('answered');
  });
});

describe('a visitor’s ratings have CHAT_RATINGS_PER_HOUR', () => {
  it('repeats refused as already rated count too; past it refused before any statement; another visitor is not', async () => {
    const [a, b] = await chatting({ session_invite_rating: 'on' });
    await closeConversation(deps, a);
    await closeConversation(deps, b);
    const budget = limited({ ratingsPerHour: 2 });
    expect(await answer(rateConversation(budget, a, { score: 5 }))).toBe('answered');
    // The repeat is refused as already rated, after its locked transaction: it counted.
    expect(await answer(rateConversation(budget, a, { score: 4 }))).toMatchObject({ code: 'RATING_NOT_ALLOWED' });
    const refused = await counted(() => rateConversation(budget, a, { score: 3 }));
    expect(refused.answer).toMatchObject({ code: 'RATE_LIMITED' });
    expect((refused.answer as { retryAfter: number }).retryAfter).toBeGreaterThan(60);
    expect(refused.statements).toBe(0);
    expect(await answer(rateConversation(budget, b, { score: 5 }))).toBe('answered');
  });
});

describe('a visitor’s typing notices have CHAT_TYPING_PER_MINUTE', () => {
  it('throttled ones count too; past it refused before the conversation is read; another visitor is not', async () => {
    const [a, b] = await chatting();
    const budget = limited({ typingPerMinute: 3 });
    // The first is published, the repeats dropped by the per-conversation throttle, after its reads.
    expect(await setTyping(budget, a, { typing: true })).toEqual({ published: true });
    for (let i = 0; i < 2; i++) expect(await setTyping(budget, a, { typing: true })).toEqual({ published: false });
    for (const typing of [true, false]) {
      const refused = await counted(() => setTyping(budget, a, { typing }));
      expect(refused.answer).toMatchObject({ code: 'RATE_LIMITED' });
      expect((refused.answer as { retryAfter: number }).retryAfter).toBeGreaterThan(0);
      expect(refused.statements).toBe(0);
    }
    expect(await setTyping(budget, b, { typing: true })).toEqual({ published: true });
  });
});

describe('a visitor’s assign calls have CHAT_ASSIGNS_PER_MINUTE', () => {
  it('repeats on the open conversation count too; past it refused before the conversation is read; another visitor is not', async () => {
    const m = await f.merchant();
    await f.online(await f.agent(m));
    const [a, b] = [await f.visitor(m), await f.visitor(m)];
    const budget = limited({ assignsPerMinute: 2 });
    const opened = await assignAgent(budget, a);
    // The repeat is idempotent (the same conversation), after reading it: it counted.
    expect((await assignAgent(budget, a)).conversationId).toBe(opened.conversationId);
    const refused = await counted(() => assignAgent(budget, a));
    expect(refused.answer).toMatchObject({ code: 'RATE_LIMITED' });
    expect((refused.answer as { retryAfter: number }).retryAfter).toBeGreaterThan(0);
    expect(refused.statements).toBe(0);
    expect(await answer(assignAgent(budget, b))).toBe('answered');
  });
});

/**
 * Fresh visitors of one merchant, each within its own budget of `act` (2 a minute here), against
 * the merchant's (4): a token past its own budget does not spend the merchant's, the merchant's
 * is then spent by its other tokens, a fresh one is refused before any statement, and another
 * merchant's visitor is not held back.
 */
async function merchantShare(
  act: (budget: Deps, visitor: Awaited<ReturnType<Factories['visitor']>>) => Promise<unknown>,
  budget: Deps,
) {
  const m = await f.merchant();
  await f.online(await f.agent(m));
  const [a, b, fresh] = [await f.visitor(m), await f.visitor(m), await f.visitor(m)];
  for (let i = 0; i < 2; i++) expect(await answer(act(budget, a))).toBe('answered');
  // Refused by a's own budget: its merchant's is not spent, so b still gets its two.
  const own = await counted(() => act(budget, a));
  expect(own.answer).toMatchObject({ code: 'RATE_LIMITED' });
  expect(own.statements).toBe(0);
  for (let i = 0; i < 2; i++) expect(await answer(act(budget, b))).toBe('answered');
  // The merchant's four are spent: a fresh token's first call is refused before any statement.
  const refused = await counted(() => act(budget, fresh));
  expect(refused.answer).toMatchObject({ code: 'RATE_LIMITED' });
  expect((refused.answer as { retryAfter: number }).retryAfter).toBeGreaterThan(0);
  expect(refused.statements).toBe(0);
  const other = await f.visitor(await f.merchant());
  expect(await answer(act(budget, other))).toBe('answered');
}

describe('a merchant’s visitors share CHAT_MERCHANT_TYPING_PER_MINUTE', () => {
  it('fresh visitors each within their own budget are refused past the merchant’s, before any statement; one past its own does not spend it; another merchant is not', async () => {
    const budget = limited({ typingPerMinute: 2, merchantTypingPerMinute: 4 });
    await merchantShare((d, visitor) => setTyping(d, visitor, { typing: true }), budget);
  });
});

describe('a merchant’s visitors share CHAT_MERCHANT_ASSIGNS_PER_MINUTE', () => {
  it('fresh visitors each within their own budget are refused past the merchant’s, before any statement; one past its own does not spend it; another merchant is not', async () => {
    const budget = limited({ assignsPerMinute: 2, merchantAssignsPerMinute: 4 });
    await merchantShare((d, visitor) => assignAgent(d, visitor), budget);
  });
});

it('the defaults are documented values: 600 reads, 300 read receipts, 600 typing notices and 120 assign calls per visitor and minute, 6,000 reads, 6,000 typing notices and 1,200 assign calls per merchant and minute, 10 ratings per hour', () => {
  expect(loadConfig({ NODE_ENV: 'test' }).chatLimits).toMatchObject({
    visitorReadsPerMinute: 600,
    merchantVisitorReadsPerMinute: 6000,
    readMarksPerMinute: 300,
    ratingsPerHour: 10,
    typingPerMinute: 600,
    merchantTypingPerMinute: 6000,
    assignsPerMinute: 120,
    merchantAssignsPerMinute: 1200,
  });
  expect(deps.config.chatLimits).toMatchObject({
    visitorReadsPerMinute: 600,
    merchantVisitorReadsPerMinute: 6000,
    readMarksPerMinute: 300,
    ratingsPerHour: 10,
    typingPerMinute: 600,
    merchantTypingPerMinute: 6000,
    assignsPerMinute: 120,
    merchantAssignsPerMinute: 1200,
  });
});
