// @ts-check
import { callJson } from '/assets/api.js';
import { CODES } from '/assets/contract.js';

/**
 * Sending on both chat pages (beside the message log of chat.js): exactly once with a
 * `client_msg_id` and safe retries, and typing both ways (telling the other side, showing theirs).
 *
 * @typedef {import('/assets/chat.js').Envelope} Envelope
 */

/** A new idempotency key: the same key is reused for every retry of one message. */
export const newClientMsgId = () =>
  `${Date.now().toString(36)}-${Array.from(crypto.getRandomValues(new Uint8Array(6)), (b) => b.toString(16).padStart(2, '0')).join('')}`;

/**
 * How long one attempt may wait for its answer: a conversation's sends go one after another, so an
 * attempt that never hears back must not hold the messages written after it in that conversation.
 * Given up, it is tried again with the same `client_msg_id` (stored once either way).
 */
const ATTEMPT_TIMEOUT_MS = 15_000;

/** Envelope codes worth another try with the same client_msg_id: the server may not have stored it. */
/** @type {Set<number>} */
const RETRYABLE = new Set([CODES.SERVICE_UNAVAILABLE, CODES.INTERNAL, CODES.RATE_LIMITED]);

/**
 * Each conversation's previous send, settled, by queue key (see `sendOnce`). A key is deleted once
 * its last send is settled, so the map holds only the conversations with a send under way.
 * @type {Map<string, Promise<void>>}
 */
const previousSends = new Map();

/**
 * Sends a message exactly once: the same `client_msg_id` on every attempt, so a retry after a
 * lost answer returns the stored message instead of a second one. Resolves with the envelope of
 * the last attempt; a network failure or a retryable code is tried again (up to `attempts`).
 * A conversation's sends go one after another, each once the previous one is settled: sent side
 * by side, messages written in quick succession (or one being retried) could be stored, and
 * numbered, in another order than they were written. Order matters only within a conversation, so
 * each conversation has its own queue: on the workbench, where an agent answers several, one
 * conversation's send that fails or hangs (up to about 90 s of attempts) must not hold the
 * replies to the others.
 * @param {string} path
 * @param {Record<string, string>} fields
 * @param {{ headers?: Record<string, string>, attempts?: number, conversation?: string }} [options]
 *   `conversation` names the message's conversation on a page that has several (the workbench: the
 *   visitor id); without it the path's sends share one queue (the widget's one conversation)
 * @returns {Promise<Envelope>}
 */
export function sendOnce(path, fields, { conversation = '', ...options } = {}) {
  const key = `${path} ${conversation}`;
  const sent = (previousSends.get(key) ?? Promise.resolve()).then(() => attemptSend(path, fields, options));
  // Settled either way; the last send of its queue forgets the key (a later one has replaced it).
  const forget = () => {
    if (previousSends.get(key) === settled) previousSends.delete(key);
  };
  const settled = sent.then(forget, forget);
  previousSends.set(key, settled);
  return sent;
}

/**
 * @param {string} path
 * @param {Record<string, string>} fields
 * @param {{ headers?: Record<string, string>, attempts?: number }} [options]
 * @returns {Promise<Envelope>}
 */
async function attemptSend(path, fields, { headers = {}, attempts = 5 } = {}) {
  /** @type {Envelope} */
  let last = { code: CODES.SERVICE_UNAVAILABLE, msg: 'The server could not be reached.', data: [] };
  for (let attempt = 0; attempt < attempts; attempt++) {
    if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(500 * 2 ** attempt, 5000)));
    try {
      const { body } = await callJson(path, {
        method: 'POST',
        json: fields,
        headers,
        signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
      });
      last = body;
      if (!RETRYABLE.has(body.code)) return body;
    } catch {
      // network failure or no answer in time: the request may or may not have arrived; the same key makes retrying safe
    }
  }
  return last;
}

/**
 * Tells the other side while someone types: `typing: true` at most every 3 s while keys are
 * pressed, `typing: false` after 4 s without a key or when the message is sent.
 * @param {(typing: boolean) => Promise<unknown>} post
 */
export function typingNotifier(post) {
  let lastTrue = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let idle;
  const stop = () => {
    clearTimeout(idle);
    if (lastTrue) {
      lastTrue = 0;
      post(false).catch(() => {});
    }
  };
  return {
    input() {
      const now = Date.now();
      if (now - lastTrue > 3000) {
        lastTrue = now;
        post(true).catch(() => {});
      }
      clearTimeout(idle);
      idle = setTimeout(stop, 4000);
    },
    stop,
  };
}

/**
 * Shows "… is typing" in `node` while the other side types; hidden on `typing: false`, on their
 * message, or 6 s after the last event (a lost `false` must not leave it on).
 * @param {HTMLElement} node
 * @param {(who: string) => string} [sentence] the words, in the page's language
 */
export function typingIndicator(node, sentence = (who) => `${who} is typing…`) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  return {
    /** @param {string} who @param {boolean} typing */
    show(who, typing) {
      clearTimeout(timer);
      node.textContent = typing ? sentence(who) : '';
      node.hidden = !typing;
      if (typing) timer = setTimeout(() => this.show(who, false), 6000);
    },
  };
}
