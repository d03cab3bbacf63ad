import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Deps } from '../../../src/deps.js';
import { DomainError } from '../../../src/errors.js';
import {
  chargeAssign,
  chargeContactDetails,
  chargeConversationClosed,
  chargeConversationOpened,
  chargeHumanRequest,
  chargeMessage,
  chargeRating,
  chargeReadMark,
  chargeTyping,
  chargeVisitorRead,
} from '../../../src/resolvers/budgets/chat.js';
import { chargeHistoryReplay } from '../../../src/resolvers/budgets/history-replays.js';
import type { BotViewer } from '../../../src/resolvers/integration/bots/viewer.js';
import type { HeldAgentViewer, VisitorViewer } from '../../../src/resolvers/viewer.js';
import { chargingInOrder, type Limit, type RateLimiter } from '../../../src/stores/rate-limits.js';
import { withChatLimits } from '../../support/budgets.js';
import { type Factories, type TestDeps, useTestDeps } from '../../support/deps.js';

/**
 * The chat's write budgets (chat.ts) and the history replays' (history-replays.ts), by value:
 * which limits each visitor or agent action charges (name, points, window), on whom (visitor,
 * agent, merchant, client address), in which order, and the words of each refusal. The limiter is
 * a stand-in that records every charge and refuses the ones the test names (the limiter's own
 * counting is tested in rate-limits.test.ts).
 */
let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

/** Every chat limit a distinct number, so each charge shows which one it took. */
const LIMITS = {
  merchantMessagesPerMinute: 101,
  messageBurst: 102,
  messagesPerHour: 103,
  conversationsPerHour: 104,
  contactDetailsPerHour: 105,
  merchantContactDetailsPerMinute: 106,
  humanRequestsPerHour: 107,
  merchantHumanRequestsPerMinute: 108,
  visitorReadsPerMinute: 109,
  merchantVisitorReadsPerMinute: 110,
  readMarksPerMinute: 111,
  ratingsPerHour: 112,
  typingPerMinute: 113,
  merchantTypingPerMinute: 114,
  assignsPerMinute: 115,
  merchantAssignsPerMinute: 116,
};

/** The wait every refusal of the stand-in carries. */
const WAIT = 7;

interface Charged {
  name: string;
  points: number;
  durationSeconds: number;
  subject: string;
  /** The refusal's message, for a wait of WAIT seconds. */
  refusal: string;
}

/**
 * Deps (`base`: the chat limits of LIMITS) whose limiter records each charge and refuses those of
 * the limits named in `refuse`.
 */
function recording(refuse: string[] = [], base: Deps = withChatLimits(deps, LIMITS)) {
  const charged: Charged[] = [];
  const limiter = (limit: Limit): RateLimiter => ({
    async consume(subject, message) {
      const { name, points, durationSeconds } = limit;
      const refusal = message(WAIT);
      charged.push({ name, points, durationSeconds, subject, refusal });
      if (refuse.includes(name)) throw new DomainError('RATE_LIMITED', refusal, WAIT);
    },
    isBlocked: async () => 0,
    reset: async () => {},
    reward: async () => {},
  });
  const recorded: Deps = { ...base, rateLimiter: chargingInOrder(limiter) };
  return { deps: recorded, charged };
}

const charge = (name: string, points: number, durationSeconds: number, subject: string, refusal: string) => ({
  name,
  points,
  durationSeconds,
  subject,
  refusal,
});

/**
 * A visitor as the domain sees it, of a merchant of its own. The budgets read its ids only, and no
 * row is written: made by hand, so these tests reach chat.ts and not the token code (a mutant
 * there does not run them).
 */
const aVisitor = (): VisitorViewer => {
  const id = randomUUID();
  return { kind: 'visitor', visitorId: id, merchantId: randomUUID(), bid: 'tshop', channel: `visitor-${id}` };
};

describe('chargeMessage: a message against its sender’s budgets, and a visitor’s against its merchant’s', () => {
  it('a visitor’s: the merchant’s per minute, then its own burst (10 s) and hour, with their words', async () => {
    const v = aVisitor();
    const { deps: d, charged } = recording();
    await chargeMessage(d, v);
    expect(charged).toEqual([
      charge(
        'chat-merchant-messages',
        101,
        60,
        v.merchantId,
        'Too many messages from this merchant’s visitors: retry in 7 s',
      ),
      charge('chat-message-burst', 102, 10, `v:${v.visitorId}`, 'Too many messages: retry in 7 s'),
      charge('chat-message-hour', 103, 3600, `v:${v.visitorId}`, 'Too many messages this hour: retry in 7 s'),
    ]);
  });

  it('an agent’s: its own burst and hour only, on its agent id', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    const { deps: d, charged } = recording();
    await chargeMessage(d, agent);
    expect(charged).toEqual([
      charge('chat-message-burst', 102, 10, `a:${agent.agentId}`, 'Too many messages: retry in 7 s'),
      charge('chat-message-hour', 103, 3600, `a:${agent.agentId}`, 'Too many messages this hour: retry in 7 s'),
    ]);
  });

  it('a bot’s: nothing (its budget is its API key’s)', async () => {
    const bot: BotViewer = { kind: 'bot', botId: randomUUID(), merchantId: randomUUID(), name: 'Helper' };
    const { deps: d, charged } = recording();
    await chargeMessage(d, bot);
    expect(charged).toEqual([]);
  });

  it('a refusal is the caller’s answer, and stops the charges after it', async () => {
    const v = aVisitor();
    const { deps: d, charged } = recording(['chat-message-burst']);
    await expect(chargeMessage(d, v)).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: 'Too many messages: retry in 7 s',
      retryAfterSeconds: WAIT,
    });
    expect(charged.map((c) => c.name)).toEqual(['chat-merchant-messages', 'chat-message-burst']);
  });
});

describe('conversations opened and closed per visitor and hour', () => {
  it('chargeConversationOpened: one point of chat-opened on the visitor', async () => {
    const v = aVisitor();
    const { deps: d, charged } = recording();
    await chargeConversationOpened(d, v);
    expect(charged).toEqual([
      charge('chat-opened', 104, 3600, v.visitorId, 'Too many conversations opened this hour: retry in 7 s'),
    ]);
  });

  it('chargeConversationClosed: one point of chat-closed on the visitor, the same number', async () => {
    const v = aVisitor();
    const { deps: d, charged } = recording();
    await chargeConversationClosed(d, v);
    expect(charged).toEqual([
      charge('chat-closed', 104, 3600, v.visitorId, 'Too many conversations closed this hour: retry in 7 s'),
    ]);
  });

  it('their refusals reach the caller', async () => {
    const v = aVisitor();
    const { deps: d } = recording(['chat-opened', 'chat-closed']);
    await expect(chargeConversationOpened(d, v)).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: 'Too many conversations opened this hour: retry in 7 s',
    });
    await expect(chargeConversationClosed(d, v)).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: 'Too many conversations closed this hour: retry in 7 s',
    });
  });
});

describe('the merchant’s budget first, then the visitor’s (contact details, requests for a human)', () => {
  it('chargeContactDetails: the merchant’s per minute, then the visitor’s per hour', async () => {
    const v = aVisitor();
    const { deps: d, charged } = recording();
    await chargeContactDetails(d, v);
    expect(charged).toEqual([
      charge(
        'chat-contact-merchant',
        106,
        60,
        v.merchantId,
        'Too many contact details from this merchant’s visitors: retry in 7 s',
      ),
      charge('chat-contact', 105, 3600, v.visitorId, 'Too many contact details this hour: retry in 7 s'),
    ]);
  });

  it('chargeContactDetails refused by the merchant’s budget does not charge the visitor’s; refused by the visitor’s, answers it', async () => {
    const v = aVisitor();
    const merchantSpent = recording(['chat-contact-merchant']);
    await expect(chargeContactDetails(merchantSpent.deps, v)).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: 'Too many contact details from this merchant’s visitors: retry in 7 s',
    });
    expect(merchantSpent.charged.map((c) => c.name)).toEqual(['chat-contact-merchant']);
    const visitorSpent = recording(['chat-contact']);
    await expect(chargeContactDetails(visitorSpent.deps, v)).rejects.toMatchObject({
      message: 'Too many contact details this hour: retry in 7 s',
    });
  });

  it('chargeHumanRequest: the merchant’s per minute, then the visitor’s per hour', async () => {
    const v = aVisitor();
    const { deps: d, charged } = recording();
    await chargeHumanRequest(d, v);
    expect(charged).toEqual([
      charge(
        'chat-human-merchant',
        108,
        60,
        v.merchantId,
        'Too many requests for a human from this merchant’s visitors: retry in 7 s',
      ),
      charge('chat-human', 107, 3600, v.visitorId, 'Too many requests for a human this hour: retry in 7 s'),
    ]);
  });

  it('chargeHumanRequest refused by the merchant’s budget does not charge the visitor’s; refused by the visitor’s, answers it', async () => {
    const v = aVisitor();
    const merchantSpent = recording(['chat-human-merchant']);
    await expect(chargeHumanRequest(merchantSpent.deps, v)).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: 'Too many requests for a human from this merchant’s visitors: retry in 7 s',
    });
    expect(merchantSpent.charged.map((c) => c.name)).toEqual(['chat-human-merchant']);
    const visitorSpent = recording(['chat-human']);
    await expect(chargeHumanRequest(visitorSpent.deps, v)).rejects.toMatchObject({
      message: 'Too many requests for a human this hour: retry in 7 s',
    });
  });
});

describe('the visitor’s budget per minute first, then its merchant’s (reads, typing notices, assign calls)', () => {
  const cases = [
    {
      action: 'chargeVisitorRead',
      run: chargeVisitorRead,
      visitor: ['chat-visitor-reads', 109],
      merchant: ['chat-merchant-visitor-reads', 110],
      what: 'reads',
    },
    {
      action: 'chargeTyping',
      run: chargeTyping,
      visitor: ['chat-typing', 113],
      merchant: ['chat-merchant-typing', 114],
      what: 'typing notices',
    },
    {
      action: 'chargeAssign',
      run: chargeAssign,
      visitor: ['chat-assigns', 115],
      merchant: ['chat-merchant-assigns', 116],
      what: 'assign calls',
    },
  ] as const;

  for (const { action, run, visitor, merchant, what } of cases) {
    it(`${action}: ${visitor[0]} on the visitor, then ${merchant[0]} on its merchant, each per minute`, async () => {
      const v = aVisitor();
      const { deps: d, charged } = recording();
      await run(d, v);
      expect(charged).toEqual([
        charge(visitor[0], visitor[1], 60, v.visitorId, `Too many ${what}: retry in 7 s`),
        charge(
          merchant[0],
          merchant[1],
          60,
          v.merchantId,
          `Too many ${what} from this merchant’s visitors: retry in 7 s`,
        ),
      ]);
    });

    it(`${action}: a visitor past its own budget does not spend its merchant’s; the merchant’s refusal is worded as its own`, async () => {
      const v = aVisitor();
      const visitorSpent = recording([visitor[0]]);
      await expect(run(visitorSpent.deps, v)).rejects.toMatchObject({
        code: 'RATE_LIMITED',
        message: `Too many ${what}: retry in 7 s`,
      });
      expect(visitorSpent.charged.map((c) => c.name)).toEqual([visitor[0]]);
      const merchantSpent = recording([merchant[0]]);
      await expect(run(merchantSpent.deps, v)).rejects.toMatchObject({
        code: 'RATE_LIMITED',
        message: `Too many ${what} from this merchant’s visitors: retry in 7 s`,
      });
    });
  }
});

describe('the visitor’s own budgets (read receipts per minute, ratings per hour)', () => {
  it('chargeReadMark: one point of chat-read-marks on the visitor', async () => {
    const v = aVisitor();
    const { deps: d, charged } = recording();
    await chargeReadMark(d, v);
    expect(charged).toEqual([charge('chat-read-marks', 111, 60, v.visitorId, 'Too many read receipts: retry in 7 s')]);
  });

  it('chargeRating: one point of chat-ratings on the visitor', async () => {
    const v = aVisitor();
    const { deps: d, charged } = recording();
    await chargeRating(d, v);
    expect(charged).toEqual([
      charge('chat-ratings', 112, 3600, v.visitorId, 'Too many ratings this hour: retry in 7 s'),
    ]);
  });

  it('their refusals reach the caller', async () => {
    const v = aVisitor();
    const { deps: d } = recording(['chat-read-marks', 'chat-ratings']);
    await expect(chargeReadMark(d, v)).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: 'Too many read receipts: retry in 7 s',
    });
    await expect(chargeRating(d, v)).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: 'Too many ratings this hour: retry in 7 s',
    });
  });
});

describe('chargeHistoryReplay: a resume with since, per identity and per client address', () => {
  const replays = (refuse: string[] = []) =>
    recording(refuse, {
      ...deps,
      config: { ...deps.config, historyReplays: { perIdentityPerMinute: 201, perAddressPerMinute: 2001 } },
    });
  const perAddress = (address: string) =>
    charge(
      'ws-history-replays-address',
      2001,
      60,
      address,
      'Too many resumes with since: at most 2001 a minute per client address (WS_HISTORY_REPLAYS_PER_ADDRESS_PER_MINUTE), retry in 7 s',
    );
  const perIdentity = (identity: string) =>
    charge(
      'ws-history-replays',
      201,
      60,
      identity,
      'Too many resumes with since: at most 201 a minute per identity (WS_HISTORY_REPLAYS_PER_MINUTE), retry in 7 s',
    );

  it('a visitor’s: WS_HISTORY_REPLAYS_PER_MINUTE on the visitor, then WS_HISTORY_REPLAYS_PER_ADDRESS_PER_MINUTE on the address', async () => {
    const v = aVisitor();
    const { deps: d, charged } = replays();
    await chargeHistoryReplay(d, v, '203.0.113.7');
    expect(charged).toEqual([perIdentity(`v:${v.visitorId}`), perAddress('203.0.113.7')]);
  });

  it('an agent’s: on its agent id', async () => {
    const agent: HeldAgentViewer = {
      kind: 'agent',
      agentId: randomUUID(),
      merchantId: randomUUID(),
      bid: 'tshop',
      level: 'agent',
      session: { id: 'session' },
    };
    const { deps: d, charged } = replays();
    await chargeHistoryReplay(d, agent, '203.0.113.8');
    expect(charged).toEqual([perIdentity(`a:${agent.agentId}`), perAddress('203.0.113.8')]);
  });

  it('an identity past its budget is refused with its words, and does not spend the address’s', async () => {
    const v = aVisitor();
    const { deps: d, charged } = replays(['ws-history-replays']);
    await expect(chargeHistoryReplay(d, v, '203.0.113.9')).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: perIdentity('').refusal,
      retryAfterSeconds: WAIT,
    });
    expect(charged.map((c) => c.name)).toEqual(['ws-history-replays']);
  });
});

describe('on the real limiter', () => {
  it('a visitor’s burst refuses with the wait left of its 10 s window; another visitor of the merchant is not held back', async () => {
    const a = aVisitor();
    const b: VisitorViewer = { ...aVisitor(), merchantId: a.merchantId };
    const budget = withChatLimits(deps, { messageBurst: 2 });
    await chargeMessage(budget, a);
    await chargeMessage(budget, a);
    const refused = await chargeMessage(budget, a).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DomainError);
    const { retryAfterSeconds, message } = refused as DomainError;
    expect(retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(retryAfterSeconds).toBeLessThanOrEqual(10);
    expect(message).toBe(`Too many messages: retry in ${retryAfterSeconds} s`);
    await expect(chargeMessage(budget, b)).resolves.toBeUndefined();
  });
});
