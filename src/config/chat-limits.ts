import { int, type Parsed } from './variables.js';

/** Budgets of the chat's writes (src/resolvers/budgets/chat.ts, docs/security.md). */
export const chatLimitVariables = {
  CHAT_MESSAGE_BURST: int(1, 1_000_000).default(30),
  CHAT_MESSAGES_PER_HOUR: int(1, 10_000_000).default(1200),
  CHAT_MERCHANT_MESSAGES_PER_MINUTE: int(1, 10_000_000).default(1200),
  CHAT_CONVERSATIONS_PER_HOUR: int(1, 1_000_000).default(30),
  CHAT_MERCHANT_SENDS_IN_FLIGHT: int(1, 100_000).default(4),
  CHAT_MERCHANT_SENDS_QUEUED: int(0, 1_000_000).default(16),
  CHAT_FAIR_SHARE_LOOP_DELAY_MS: int(0, 60_000).default(20),
  CHAT_CONTACT_DETAILS_PER_HOUR: int(1, 1_000_000).default(10),
  CHAT_MERCHANT_CONTACT_DETAILS_PER_MINUTE: int(1, 10_000_000).default(300),
  CHAT_HUMAN_REQUESTS_PER_HOUR: int(1, 1_000_000).default(10),
  CHAT_MERCHANT_HUMAN_REQUESTS_PER_MINUTE: int(1, 10_000_000).default(300),
  CHAT_VISITOR_READS_PER_MINUTE: int(1, 10_000_000).default(600),
  CHAT_MERCHANT_VISITOR_READS_PER_MINUTE: int(1, 100_000_000).default(6000),
  CHAT_READ_MARKS_PER_MINUTE: int(1, 10_000_000).default(300),
  CHAT_RATINGS_PER_HOUR: int(1, 1_000_000).default(10),
  CHAT_TYPING_PER_MINUTE: int(1, 10_000_000).default(600),
  CHAT_MERCHANT_TYPING_PER_MINUTE: int(1, 100_000_000).default(6000),
  CHAT_ASSIGNS_PER_MINUTE: int(1, 10_000_000).default(120),
  CHAT_MERCHANT_ASSIGNS_PER_MINUTE: int(1, 100_000_000).default(1200),
};

export interface ChatLimitSettings {
  /** Budgets of the chat's writes (src/resolvers/budgets/chat.ts, README "Security and reliability"). */
  chatLimits: {
    /** Messages per sender (visitor or agent) per 10 seconds. */
    messageBurst: number;
    /** Messages per sender per hour. */
    messagesPerHour: number;
    /** Visitor messages per merchant per minute, all its visitors together. */
    merchantMessagesPerMinute: number;
    /** Conversations a visitor may open per hour, and as many it may close. */
    conversationsPerHour: number;
    /** Visitor sends of one merchant being stored at once on an instance (fairness between merchants). */
    merchantSendsInFlight: number;
    /** Visitor sends of one merchant waiting for one of those slots; past it refused at once. */
    merchantSendsQueued: number;
    /**
     * The instance is busy when its event loop runs this late on average (≈ 0.5 s): then a
     * merchant over an equal share of the recent visitor sends is refused first (0: always).
     */
    fairShareLoopDelayMs: number;
    /** Contact details a visitor may leave per hour (`leaveContactDetails`). */
    contactDetailsPerHour: number;
    /** Contact details one merchant's visitors may leave per minute, all together. */
    merchantContactDetailsPerMinute: number;
    /** Requests for a human a visitor may make per hour (`requestHuman`, `/visitor/chat/human`). */
    humanRequestsPerHour: number;
    /** Requests for a human one merchant's visitors may make per minute, all together. */
    merchantHumanRequestsPerMinute: number;
    /** Reads a visitor may make per minute (its messages, conversation and bootstrap, together). */
    visitorReadsPerMinute: number;
    /** Reads one merchant's visitors may make per minute, all together (however many tokens they hold). */
    merchantVisitorReadsPerMinute: number;
    /** Read receipts a visitor may send per minute (`markRead`, `/visitor/message/read`). */
    readMarksPerMinute: number;
    /** Ratings a visitor may send per hour (`rateConversation`, `/visitor/chat/rate`), repeats included. */
    ratingsPerHour: number;
    /** Typing notices a visitor may send per minute (`setTyping`, `/visitor/chat/typing`), throttled ones included. */
    typingPerMinute: number;
    /** Typing notices one merchant's visitors may send per minute, all together (counted after each visitor's own). */
    merchantTypingPerMinute: number;
    /** Assign calls a visitor may make per minute (`assign`, `/visitor/chat/assign`), repeats on an open conversation included. */
    assignsPerMinute: number;
    /** Assign calls one merchant's visitors may make per minute, all together (counted after each visitor's own). */
    merchantAssignsPerMinute: number;
  };
}

export function readChatLimitSettings(e: Parsed<typeof chatLimitVariables>): ChatLimitSettings {
  return {
    chatLimits: {
      messageBurst: e.CHAT_MESSAGE_BURST,
      messagesPerHour: e.CHAT_MESSAGES_PER_HOUR,
      merchantMessagesPerMinute: e.CHAT_MERCHANT_MESSAGES_PER_MINUTE,
      conversationsPerHour: e.CHAT_CONVERSATIONS_PER_HOUR,
      merchantSendsInFlight: e.CHAT_MERCHANT_SENDS_IN_FLIGHT,
      merchantSendsQueued: e.CHAT_MERCHANT_SENDS_QUEUED,
      fairShareLoopDelayMs: e.CHAT_FAIR_SHARE_LOOP_DELAY_MS,
      contactDetailsPerHour: e.CHAT_CONTACT_DETAILS_PER_HOUR,
      merchantContactDetailsPerMinute: e.CHAT_MERCHANT_CONTACT_DETAILS_PER_MINUTE,
      humanRequestsPerHour: e.CHAT_HUMAN_REQUESTS_PER_HOUR,
      merchantHumanRequestsPerMinute: e.CHAT_MERCHANT_HUMAN_REQUESTS_PER_MINUTE,
      visitorReadsPerMinute: e.CHAT_VISITOR_READS_PER_MINUTE,
      merchantVisitorReadsPerMinute: e.CHAT_MERCHANT_VISITOR_READS_PER_MINUTE,
      readMarksPerMinute: e.CHAT_READ_MARKS_PER_MINUTE,
      ratingsPerHour: e.CHAT_RATINGS_PER_HOUR,
      typingPerMinute: e.CHAT_TYPING_PER_MINUTE,
      merchantTypingPerMinute: e.CHAT_MERCHANT_TYPING_PER_MINUTE,
      assignsPerMinute: e.CHAT_ASSIGNS_PER_MINUTE,
      merchantAssignsPerMinute: e.CHAT_MERCHANT_ASSIGNS_PER_MINUTE,
    },
  };
}
