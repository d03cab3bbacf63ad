import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { messages } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { DomainError } from '../../src/errors.js';
import { leaveContactDetails } from '../../src/resolvers/availability/messages-left.js';
import { createSendGate } from '../../src/resolvers/budgets/chat.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { requestHuman } from '../../src/resolvers/integration/bots/handoff.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import { answerOrRefusal, withChatLimits } from '../support/budgets.js';
import { type Factories, type TestDeps, useTestDeps } from '../support/deps.js';

/**
 * Issue 27, flood fairness: one merchant's visitors keep at most CHAT_MERCHANT_SENDS_IN_FLIGHT
 * sends being stored at once (CHAT_MERCHANT_SENDS_QUEUED more wait); past that a send is refused
 * at once with RATE_LIMITED and a wait, and another merchant's send goes through meanwhile.
 */
let deps: TestDeps;
let f: Factories;
useTestDeps((made) => {
  deps = made.deps;
  f = made.f;
});

/** A merchant with an online agent, and `n` visitors each in an active conversation with it. */
async function shop(n: number) {
  const m = await f.merchant();
  const agent = await f.agent(m);
  await f.online(agent);
  const visitors = [];
  for (let i = 0; i < n; i++) {
    const visitor = await f.visitor(m);
    await assignAgent(deps, visitor);
    visitors.push(visitor);
  }
  return { m, agent, visitors };
}

/**
 * Deps with a pool of `inFlight` slots and `queued` places per merchant, whose database holds the
 * first `held` transactions until `release()` (sends that are "being stored" for as long as the
 * test wants).
 */
function heldDeps(inFlight: number, queued: number, held: number) {
  let gate: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    gate = resolve;
  });
  let holding = 0;
  let entered = 0;
  const db = new Proxy(deps.db, {
    get(target, prop) {
      if (prop === 'transaction')
        return async (...args: Parameters<typeof target.transaction>) => {
          if (holding < held) {
            holding++;
            entered++;
            await opened;
          }
          return target.transaction(...args);
        };
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const chatLimits = { ...deps.config.chatLimits, merchantSendsInFlight: inFlight, merchantSendsQueued: queued };
  const held$: Deps = {
    ...deps,
    db,
    config: { ...deps.config, chatLimits },
    chatSends: createSendGate(chatLimits, { busy: () => false, stop: () => {} }),
  };
  return { deps: held$, release: () => gate(), entered: () => entered };
}

const outcome = (work: Promise<unknown>) =>
  work.then(
    () => 'stored' as const,
    (error: unknown) => {
      if (error instanceof DomainError) return error;
      throw error;
    },
  );

const settledWithin = async <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), ms))]);

describe('fairness between merchants: visitor sends in flight per merchant', () => {
  it('a flooding merchant gets RATE_LIMITED with a wait past its slots and line; another merchant’s send is stored meanwhile', async () => {
    const flood = await shop(10);
    const other = await shop(1);
    const held = heldDeps(2, 3, 2);
    // Ten sends at once: two are being stored (held), three wait in line, five are refused at once.
    const sends = flood.visitors.map((v, i) =>
      outcome(sendMessage(held.deps, v, { clientMsgId: `flood-${i}`, content: 'x'.repeat(5000) })),
    );
    const early = await Promise.all(sends.map((s) => settledWithin(s, 1500)));
    const refused = early.filter((r): r is DomainError => r instanceof DomainError);
    expect(refused).toHaveLength(5);
    for (const r of refused) {
      expect(r.code).toBe('RATE_LIMITED');
      expect(r.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      expect(r.message).toMatch(/busy/);
    }
    expect(held.entered()).toBe(2);
    // The other merchant is not behind the flooding merchant's line.
    const otherSend = await outcome(
      sendMessage(held.deps, other.visitors[0] as (typeof other.visitors)[number], {
        clientMsgId: 'other',
        content: 'hello',
      }),
    );
    expect(otherSend).toBe('stored');
    // The merchant's agent is not counted either.
    const agentSend = await outcome(
      sendMessage(held.deps, flood.agent, {
        visitorId: (flood.visitors[0] as (typeof flood.visitors)[number]).visitorId,
        clientMsgId: 'agent',
        content: 'still here',
      }),
    );
    expect(agentSend).toBe('stored');
    held.release();
    const final = await Promise.all(sends);
    expect(final.filter((r) => r === 'stored')).toHaveLength(5);
    const stored = await deps.db.select().from(messages).where(eq(messages.merchantId, flood.m.merchantId));
    expect(stored.filter((m) => m.clientMsgId?.startsWith('flood-'))).toHaveLength(5);
  });

  it('the defaults are documented values: 4 in flight, 16 waiting', () => {
    expect(deps.config.chatLimits).toMatchObject({ merchantSendsInFlight: 4, merchantSendsQueued: 16 });
  });
});

describe('fairness between merchants: a merchant over its share of a busy instance is refused first', () => {
  /** Deps whose send gate sees the instance busy (or not) as the test says, with a burst of 2 per visitor. */
  function gated(busy: () => boolean) {
    const chatLimits = { ...deps.config.chatLimits, messageBurst: 2 };
    const gate: Deps = {
      ...deps,
      config: { ...deps.config, chatLimits },
      // The share's window on a clock that stands still: the test's pace cannot move it.
      chatSends: createSendGate(chatLimits, { busy, stop: () => {} }, () => 0),
    };
    return gate;
  }
  const v = <T>(list: T[], i: number) => list[i] as T;
  /** Statements the database runs while `work` settles. */
  async function statementsDuring(work: () => Promise<unknown>) {
    let n = 0;
    const stop = deps.database.onQuery(() => {
      n++;
    });
    try {
      return { outcome: await outcome(work()), statements: n };
    } finally {
      stop();
    }
  }

  it('a flooding merchant (refused by its budget, more than its share) gets RATE_LIMITED “busy”, retry in 1 s, before any statement runs; the other merchant’s send is stored', async () => {
    const flood = await shop(3);
    const other = await shop(1);
    const busy = gated(() => true);
    const text = (i: number) => ({ clientMsgId: `f-${i}`, content: 'x'.repeat(5000) });
    expect(await outcome(sendMessage(busy, v(other.visitors, 0), { clientMsgId: 'o-1', content: 'hello' }))).toBe(
      'stored',
    );
    // The flooding visitor: two stored, the third refused by its own burst (it asks more than it gets).
    expect(await outcome(sendMessage(busy, v(flood.visitors, 0), text(1)))).toBe('stored');
    expect(await outcome(sendMessage(busy, v(flood.visitors, 0), text(2)))).toBe('stored');
    expect(await outcome(sendMessage(busy, v(flood.visitors, 0), text(3)))).toMatchObject({ code: 'RATE_LIMITED' });
    // Another token of the same merchant, within its own budget: over the merchant's share, refused at once.
    const refused = await statementsDuring(() => sendMessage(busy, v(flood.visitors, 1), text(4)));
    expect(refused.outcome).toBeInstanceOf(DomainError);
    expect(refused.outcome).toMatchObject({ code: 'RATE_LIMITED', retryAfterSeconds: 1 });
    expect((refused.outcome as DomainError).message).toMatch(/busy/);
    expect(refused.statements).toBe(0);
    // The other merchant asked no more than it got: stored.
    expect(await outcome(sendMessage(busy, v(other.visitors, 0), { clientMsgId: 'o-2', content: 'still here' }))).toBe(
      'stored',
    );
    // The flooding merchant's agent is not counted.
    expect(
      await outcome(
        sendMessage(busy, flood.agent, { visitorId: v(flood.visitors, 1).visitorId, clientMsgId: 'a', content: 'hi' }),
      ),
    ).toBe('stored');
    const stored = await deps.db.select().from(messages).where(eq(messages.merchantId, flood.m.merchantId));
    expect(stored.flatMap((m) => m.clientMsgId ?? []).sort()).toEqual(['a', 'f-1', 'f-2']);
  });

  it('an instance that keeps up refuses nobody on this account, and a merchant alone is never held back', async () => {
    const flood = await shop(4);
    const other = await shop(1);
    let busy = false;
    const gate = gated(() => busy);
    const send = (d: Deps, at: number, id: string) =>
      outcome(sendMessage(d, v(flood.visitors, at), { clientMsgId: id, content: 'x' }));
    await sendMessage(gate, v(other.visitors, 0), { clientMsgId: 'o', content: 'hello' });
    expect([await send(gate, 0, 'f-1'), await send(gate, 0, 'f-2')]).toEqual(['stored', 'stored']);
    expect(await send(gate, 0, 'f-3')).toMatchObject({ code: 'RATE_LIMITED' }); // its own burst
    // Not busy: the merchant over its share sends as its budgets allow.
    expect(await send(gate, 1, 'f-4')).toBe('stored');
    // Busy, but the merchant is alone on the instance (a fresh gate): nobody to be fair to.
    busy = true;
    const alone = gated(() => true);
    expect([await send(alone, 2, 'f-5'), await send(alone, 2, 'f-6')]).toEqual(['stored', 'stored']);
    expect(await send(alone, 2, 'f-7')).toMatchObject({
      code: 'RATE_LIMITED',
      message: expect.stringMatching(/Too many/),
    });
    expect(await send(alone, 3, 'f-8')).toBe('stored');
  });

  it('on a busy instance the merchant over its share stores only while no other merchant’s send is being stored; not busy, at once', async () => {
    for (const busy of [true, false]) {
      const gate = createSendGate(deps.config.chatLimits, { busy: () => busy, stop: () => {} }, () => 0);
      // The other merchant asks once; the flooding one three times: more than an equal share.
      gate.admit('other');
      for (let i = 0; i < 3; i++) gate.admit('flood');
      let storeOther = () => {};
      const otherStoring = gate.run('other', () => new Promise<void>((resolve) => (storeOther = resolve)));
      let floodStarted = false;
      const flood = gate.run('flood', async () => {
        floodStarted = true;
      });
      await new Promise((r) => setTimeout(r, 20));
      // Busy: its send waits for the other merchant's (within its slots, it would have started).
      expect(floodStarted).toBe(!busy);
      storeOther();
      await otherStoring;
      await flood;
      expect(floodStarted).toBe(true);
    }
  });

  it('the default: busy when the event loop runs 20 ms late on average', () => {
    expect(loadConfig({ NODE_ENV: 'test' }).chatLimits.fairShareLoopDelayMs).toBe(20);
  });
});

describe('leaveContactDetails has a budget per visitor and per merchant', () => {
  const limited = (chatLimits: Partial<Deps['config']['chatLimits']>) => withChatLimits(deps, chatLimits);
  const refusal = (work: Promise<unknown>) =>
    outcome(work).then((r) => (r instanceof DomainError ? { code: r.code, retryAfter: r.retryAfterSeconds } : r));

  it('past CHAT_CONTACT_DETAILS_PER_HOUR a visitor is refused RATE_LIMITED with the wait; another visitor is not', async () => {
    const { visitors } = await shop(2);
    const [a, b] = visitors as [(typeof visitors)[number], (typeof visitors)[number]];
    const budget = limited({ contactDetailsPerHour: 2 });
    for (let i = 0; i < 2; i++)
      expect(await refusal(leaveContactDetails(budget, a, { email: `a${i}@example.com` }))).toBe('stored');
    const refused = await refusal(leaveContactDetails(budget, a, { email: 'again@example.com' }));
    expect(refused).toMatchObject({ code: 'RATE_LIMITED' });
    expect((refused as { retryAfter: number }).retryAfter).toBeGreaterThan(60);
    expect(await refusal(leaveContactDetails(budget, b, { email: 'b@example.com' }))).toBe('stored');
  });

  it('one merchant’s visitors share CHAT_MERCHANT_CONTACT_DETAILS_PER_MINUTE; another merchant’s are not held back', async () => {
    const flood = await shop(4);
    const other = await shop(1);
    const budget = limited({ merchantContactDetailsPerMinute: 3 });
    const answers = [];
    for (const v of flood.visitors)
      answers.push(await refusal(leaveContactDetails(budget, v, { phone: '+33 1 23 45 67 89' })));
    expect(answers.slice(0, 3)).toEqual(['stored', 'stored', 'stored']);
    expect(answers[3]).toMatchObject({ code: 'RATE_LIMITED' });
    expect(
      await refusal(
        leaveContactDetails(budget, other.visitors[0] as (typeof other.visitors)[number], { name: 'Lily' }),
      ),
    ).toBe('stored');
  });

  it('the defaults are documented values: 10 per visitor and hour, 300 per merchant and minute', () => {
    expect(deps.config.chatLimits).toMatchObject({ contactDetailsPerHour: 10, merchantContactDetailsPerMinute: 300 });
  });
});

describe('requestHuman has a budget per visitor and per merchant', () => {
  const limited = (chatLimits: Partial<Deps['config']['chatLimits']>) => withChatLimits(deps, chatLimits);
  const answer = answerOrRefusal;

  it('past CHAT_HUMAN_REQUESTS_PER_HOUR a visitor is refused RATE_LIMITED with the wait, before any statement; another visitor is not', async () => {
    const { visitors } = await shop(2);
    const [a, b] = visitors as [(typeof visitors)[number], (typeof visitors)[number]];
    const budget = limited({ humanRequestsPerHour: 2 });
    // A repeat changes nothing (with the agents already) but is still a locked transaction: counted.
    for (let i = 0; i < 2; i++) expect(await answer(requestHuman(budget, a))).toBe('answered');
    let statements = 0;
    const stop = deps.database.onQuery(() => {
      statements++;
    });
    const refused = await answer(requestHuman(budget, a)).finally(stop);
    expect(refused).toMatchObject({ code: 'RATE_LIMITED' });
    expect((refused as { retryAfter: number }).retryAfter).toBeGreaterThan(60);
    expect(statements).toBe(0);
    expect(await answer(requestHuman(budget, b))).toBe('answered');
  });

  it('one merchant’s visitors share CHAT_MERCHANT_HUMAN_REQUESTS_PER_MINUTE; another merchant’s are not held back', async () => {
    const flood = await shop(4);
    const other = await shop(1);
    const budget = limited({ merchantHumanRequestsPerMinute: 3 });
    const answers = [];
    for (const v of flood.visitors) answers.push(await answer(requestHuman(budget, v)));
    expect(answers.slice(0, 3)).toEqual(['answered', 'answered', 'answered']);
    expect(answers[3]).toMatchObject({ code: 'RATE_LIMITED' });
    expect(await answer(requestHuman(budget, other.visitors[0] as (typeof other.visitors)[number]))).toBe('answered');
  });

  it('the defaults are documented values: 10 per visitor and hour, 300 per merchant and minute', () => {
    expect(deps.config.chatLimits).toMatchObject({ humanRequestsPerHour: 10, merchantHumanRequestsPerMinute: 300 });
  });
});
