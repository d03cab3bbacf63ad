import type { Config } from '../../config.js';
import type { Deps } from '../../deps.js';
import { createWorkPool, type WorkPool } from '../attachments/work-pool.js';
import type { BotViewer } from '../integration/bots/viewer.js';
import type { AgentViewer, VisitorViewer } from '../viewer.js';
import { createFairShare, type LoadSignal } from './fair-share.js';

/**
 * The chat's write budgets (issue 27, rows 2 and 3; README "Security and reliability"): anyone can
 * get a visitor token, so every visitor write is one anyone can repeat. Each budget answers
 * RATE_LIMITED (REST 1429 with `Retry-After`, GraphQL `RATE_LIMITED` with `retryAfter`).
 *
 * - messages per sender (visitor or agent; a bot's are its API key's budget): a burst window and an hourly one, so neither a
 *   flood nor a steady drip can fill the database or a channel's history;
 * - visitor messages per merchant: however many tokens one merchant's visitors hold, their
 *   writes share one budget, so they cannot take the shared instance from other merchants;
 * - conversations opened, and closed, per visitor: a send + close loop would otherwise publish
 *   on the merchant's `global-{bid}` channel without end;
 * - visitor sends in flight per merchant (`createSendGate`): budgets bound how much a merchant's
 *   visitors store, not how much work they keep the instance doing at once; this bounds that;
 * - a merchant's share of a busy instance (`createSendGate`, fair-share.ts): when the instance
 *   cannot keep up, a merchant over an equal share of the recent sends is refused first.
 */

/** Longest wait of a visitor send for a slot of its merchant, before it is refused (1429). */
export const SEND_QUEUE_TIMEOUT_MS = 5000;

/**
 * Fairness between merchants (issue 27, flood fairness), on the visitor send path:
 * - `admit`, first and at the cost of a few counters: while the instance is busy (`load`), a
 *   merchant whose visitors made more than an equal share of the recent sends of the merchants
 *   sending is refused at once with RATE_LIMITED (retry in 1 s) — before any budget is charged
 *   or any statement runs — and the others go on (fair-share.ts); and while it is over its
 *   share, the sends it is still admitted are stored only while no other merchant's is (`run`);
 * - `run`: at most `CHAT_MERCHANT_SENDS_IN_FLIGHT` visitor sends of one merchant are stored at
 *   once on an instance, at most `CHAT_MERCHANT_SENDS_QUEUED` wait for a slot (up to
 *   SEND_QUEUE_TIMEOUT_MS), and any more are refused at once with RATE_LIMITED and `Retry-After`.
 * A flooding merchant therefore holds at most its share of the instance however many tokens its
 * visitors hold, and another merchant's send never waits behind its line. Agents' sends are not
 * counted: a visitor flood cannot silence the merchant's agents.
 */
export interface SendGate {
  /** Refuses a merchant over its share of a busy instance (RATE_LIMITED); no store work. */
  admit(merchantId: string): void;
  /**
   * For an adapter, before it reads the request's body: refuses (and counts) the send as `admit`
   * would, else does nothing (the send is counted when it reaches `admit`).
   */
  refuseEarly(merchantId: string): void;
  /** Stores a visitor send of the merchant in one of its slots (counted in its share). */
  run<T>(merchantId: string, work: () => Promise<T>): Promise<T>;
  /** Sends being stored and waiting now (metrics, tests). */
  load(): { running: number; waiting: number };
}

export function createSendGate(limits: Config['chatLimits'], load: LoadSignal, now: () => number = Date.now): SendGate {
  const share = createFairShare({ load, now, what: 'this merchant’s visitors' });
  const pool: WorkPool = createWorkPool({
    slots: Number.POSITIVE_INFINITY,
    slotsPerTenant: limits.merchantSendsInFlight,
    queuePerTenant: limits.merchantSendsQueued,
    queueTimeoutMs: SEND_QUEUE_TIMEOUT_MS,
    what: 'Sending for this merchant’s visitors',
    refusal: 'RATE_LIMITED',
    // On a busy instance a merchant over its share stores only while nobody else does: even its
    // sends within budget never make another merchant's wait (BENCHMARKS.md, chat flood).
    deferred: (merchantId) => share.overShare(merchantId),
  });
  return {
    admit: (merchantId) => share.admit(merchantId),
    refuseEarly(merchantId) {
      if (share.refusal(merchantId)) share.admit(merchantId);
    },
    // Counted once it has a slot: a send refused by its merchant's line was not done.
    run: (merchantId, work) =>
      pool.run(merchantId, () => {
        share.record(merchantId);
        return work();
      }),
    load: () => pool.load(),
  };
}

/** Seconds of the burst window of CHAT_MESSAGE_BURST. */
export const MESSAGE_BURST_SECONDS = 10;

type Sender = AgentViewer | VisitorViewer;

const senderKey = (viewer: Sender) => (viewer.kind === 'visitor' ? `v:${viewer.visitorId}` : `a:${viewer.agentId}`);
const wait = (what: string) => (seconds: number) => `Too many ${what}: retry in ${seconds} s`;

/** Counts one point of the budget `name` (`points` per `durationSeconds`) on `key`: RATE_LIMITED when spent. */
const charge = (deps: Deps, name: string, points: number, durationSeconds: number, key: string, what: string) =>
  deps.rateLimiter({ name, points, durationSeconds }).consume(key, wait(what));

/** Counts one message of the sender against its budgets (and a visitor's against its merchant's). */
export async function chargeMessage(deps: Deps, viewer: Sender | BotViewer): Promise<void> {
  // A bot answers many conversations at once: its budget is its API key's (docs/integration.md "Bots").
  if (viewer.kind === 'bot') return;
  const limits = deps.config.chatLimits;
  const key = senderKey(viewer);
  const merchant = {
    limit: { name: 'chat-merchant-messages', points: limits.merchantMessagesPerMinute, durationSeconds: 60 },
    subject: viewer.merchantId,
    message: wait('messages from this merchant’s visitors'),
  };
  // In this order, stopping at the first refused; one Redis round trip for all of them.
  await deps.rateLimiter.consumeInOrder([
    ...(viewer.kind === 'visitor' ? [merchant] : []),
    {
      limit: { name: 'chat-message-burst', points: limits.messageBurst, durationSeconds: MESSAGE_BURST_SECONDS },
      subject: key,
      message: wait('messages'),
    },
    {
      limit: { name: 'chat-message-hour', points: limits.messagesPerHour, durationSeconds: 3600 },
      subject: key,
      message: wait('messages this hour'),
    },
  ]);
}

/** Counts a conversation the visitor opens (an assign or a first message that starts one). */
export async function chargeConversationOpened(deps: Deps, viewer: VisitorViewer): Promise<void> {
  await charge(
    deps,
    'chat-opened',
    deps.config.chatLimits.conversationsPerHour,
    3600,
    viewer.visitorId,
    'conversations opened this hour',
  );
}

/** Counts a conversation the visitor closes. */
export async function chargeConversationClosed(deps: Deps, viewer: VisitorViewer): Promise<void> {
  await charge(
    deps,
    'chat-closed',
    deps.config.chatLimits.conversationsPerHour,
    3600,
    viewer.visitorId,
    'conversations closed this hour',
  );
}

/**
 * Counts contact details a visitor leaves (each is a locked write of its conversation): per
 * visitor per hour, and per merchant per minute for all its visitors together.
 */
export async function chargeContactDetails(deps: Deps, viewer: VisitorViewer): Promise<void> {
  const limits = deps.config.chatLimits;
  await charge(
    deps,
    'chat-contact-merchant',
    limits.merchantContactDetailsPerMinute,
    60,
    viewer.merchantId,
    'contact details from this merchant’s visitors',
  );
  await charge(deps, 'chat-contact', limits.contactDetailsPerHour, 3600, viewer.visitorId, 'contact details this hour');
}

/**
 * Counts a visitor's request for a human (`requestHuman`): each is a row-locked hand-off
 * transaction, even a repeat that changes nothing; per visitor per hour, and per merchant per
 * minute for all its visitors together.
 */
export async function chargeHumanRequest(deps: Deps, viewer: VisitorViewer): Promise<void> {
  const limits = deps.config.chatLimits;
  await charge(
    deps,
    'chat-human-merchant',
    limits.merchantHumanRequestsPerMinute,
    60,
    viewer.merchantId,
    'requests for a human from this merchant’s visitors',
  );
  await charge(
    deps,
    'chat-human',
    limits.humanRequestsPerHour,
    3600,
    viewer.visitorId,
    'requests for a human this hour',
  );
}

/**
 * Counts one visitor action against the visitor's budget per minute, then against its merchant's
 * (all its visitors together): anyone can get fresh visitor tokens, so without the merchant's
 * budget many tokens of one merchant, each within its own, could spend a shared instance's work
 * away from the other merchants. The visitor's own first, stopping there when refused: one token
 * past its budget does not spend its merchant's. One Redis round trip for both.
 */
async function chargeVisitorThenMerchant(
  deps: Deps,
  viewer: VisitorViewer,
  budget: { visitor: string; merchant: string; perVisitor: number; perMerchant: number; what: string },
): Promise<void> {
  await deps.rateLimiter.consumeInOrder([
    {
      limit: { name: budget.visitor, points: budget.perVisitor, durationSeconds: 60 },
      subject: viewer.visitorId,
      message: wait(budget.what),
    },
    {
      limit: { name: budget.merchant, points: budget.perMerchant, durationSeconds: 60 },
      subject: viewer.merchantId,
      message: wait(`${budget.what} from this merchant’s visitors`),
    },
  ]);
}

/**
 * Counts a visitor read (`/visitor/message/list`, `/visitor/chat/get`, `/visitor/data/get` and
 * their GraphQL fields): each is a few statements, so a visitor's reads share one budget per
 * minute, far above what the widget's loading, reconnecting and paging use, and its merchant's
 * visitors one budget per minute together.
 */
export async function chargeVisitorRead(deps: Deps, viewer: VisitorViewer): Promise<void> {
  const limits = deps.config.chatLimits;
  await chargeVisitorThenMerchant(deps, viewer, {
    visitor: 'chat-visitor-reads',
    merchant: 'chat-merchant-visitor-reads',
    perVisitor: limits.visitorReadsPerMinute,
    perMerchant: limits.merchantVisitorReadsPerMinute,
    what: 'reads',
  });
}

/**
 * Counts a visitor's read receipt (`/visitor/message/read`, `markRead`): each is a transaction,
 * even one that moves nothing; per visitor per minute (the widget sends at most one per 300 ms
 * while messages arrive).
 */
export async function chargeReadMark(deps: Deps, viewer: VisitorViewer): Promise<void> {
  await charge(
    deps,
    'chat-read-marks',
    deps.config.chatLimits.readMarksPerMinute,
    60,
    viewer.visitorId,
    'read receipts',
  );
}

/**
 * Counts a visitor's rating (`/visitor/chat/rate`, `rateConversation`): a repeat is refused as
 * already rated, but only after a row-locked transaction; per visitor per hour.
 */
export async function chargeRating(deps: Deps, viewer: VisitorViewer): Promise<void> {
  await charge(
    deps,
    'chat-ratings',
    deps.config.chatLimits.ratingsPerHour,
    3600,
    viewer.visitorId,
    'ratings this hour',
  );
}

/**
 * Counts a visitor's typing notice (`/visitor/chat/typing`, `setTyping`): each reads the
 * conversation (two statements) before the per-conversation throttle can drop it, so a visitor's
 * notices have a budget per minute, far above what a widget sends (typing is throttled
 * client-side to a few a second; ours sends one per 3 s), and its merchant's visitors one
 * together (chargeVisitorThenMerchant).
 */
export async function chargeTyping(deps: Deps, viewer: VisitorViewer): Promise<void> {
  const limits = deps.config.chatLimits;
  await chargeVisitorThenMerchant(deps, viewer, {
    visitor: 'chat-typing',
    merchant: 'chat-merchant-typing',
    perVisitor: limits.typingPerMinute,
    perMerchant: limits.merchantTypingPerMinute,
    what: 'typing notices',
  });
}

/**
 * Counts a visitor's assign (`/visitor/chat/assign`, `assign`): a repeat while its conversation is
 * open changes nothing but still reads it (a few statements), so each call is counted before that
 * read, per visitor per minute (the widget assigns once per conversation it starts) and per
 * merchant per minute for all its visitors together (chargeVisitorThenMerchant); a new
 * conversation is counted by chargeConversationOpened besides. A first message that opens one
 * (send.ts) is counted as a message, not as an assign.
 */
export async function chargeAssign(deps: Deps, viewer: VisitorViewer): Promise<void> {
  const limits = deps.config.chatLimits;
  await chargeVisitorThenMerchant(deps, viewer, {
    visitor: 'chat-assigns',
    merchant: 'chat-merchant-assigns',
    perVisitor: limits.assignsPerMinute,
    perMerchant: limits.merchantAssignsPerMinute,
    what: 'assign calls',
  });
}
