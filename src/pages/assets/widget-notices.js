// @ts-check
import { byId, say } from '/assets/api.js';
import { locale, t } from '/assets/widget-setup.js';

/**
 * The widget panel's status lines (assets/widget.js): the connection, where the conversation
 * stands, the merchant's business hours and what happens to a message nobody can answer now.
 *
 * @typedef {import('/assets/widget.js').Conversation} Conversation
 * @typedef {import('/assets/widget.js').BusinessHours} BusinessHours
 */

const status = byId('connection-status');
const chatState = byId('chat-state');
const leftNotice = byId('message-left');
const hoursNotice = byId('business-hours');

const dateTimeFormat = new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'short' });

/**
 * Whether the merchant (the visitor's group) is open now, from the bootstrap and then from
 * `business_hours.changed` on the visitor's channel: closed, the panel says so and when it opens.
 * @param {BusinessHours | undefined} hours
 */
export function showBusinessHours(hours) {
  hoursNotice.dataset.open = String(hours?.open !== false);
  if (!hours || hours.open !== false) return say(hoursNotice, '');
  const when = hours.next_open_at ? t('hoursOpensAt', { time: dateTimeFormat.format(hours.next_open_at * 1000) }) : '';
  say(hoursNotice, t('hoursClosed', { when }));
}

/** Where the conversation stands: queued with its position, the agent, or closed. */
export function showChatState(/** @type {Conversation} */ { state, agent, position, requeued }) {
  chatState.dataset.state = state;
  chatState.dataset.position = state === 'queued' && position ? String(position) : '';
  chatState.dataset.requeued = String(Boolean(requeued));
  chatState.textContent =
    state === 'queued'
      ? position
        ? t(requeued ? 'requeuedAt' : 'queuedAt', { n: position })
        : t(requeued ? 'requeued' : 'queued')
      : state === 'active'
        ? t('chattingWith', { name: agent?.nickname ?? t('agent') })
        : state === 'closed'
          ? t('conversationClosed')
          : t('findingAgent');
}

/** The notice of a message nobody can answer now (out of hours, or no agent online), or none. */
export function showLeftNotice(/** @type {{ reason: string, next_open_at: number | null } | null} */ left) {
  if (!left) {
    leftNotice.hidden = true;
    return;
  }
  const when = left.next_open_at ? t('leftOpensAt', { time: dateTimeFormat.format(left.next_open_at * 1000) }) : '';
  leftNotice.dataset.reason = left.reason;
  say(leftNotice, left.reason === 'closed' ? t('leftClosed', { when }) : t('leftNoAgent'));
}

/** @type {Record<string, 'connecting' | 'live' | 'resubscribed' | 'reconnecting' | 'closedConnection'>} */
const STATUS_WORDS = {
  connecting: 'connecting',
  live: 'live',
  resubscribed: 'resubscribed',
  reconnecting: 'reconnecting',
  closed: 'closedConnection',
};

/** The real-time connection's state (the channels' onStatus). */
export function showConnection(/** @type {{ state: string }} */ s) {
  const word = STATUS_WORDS[s.state];
  if (!word) return;
  status.dataset.state = s.state === 'resubscribed' ? 'live' : s.state;
  if (s.state === 'resubscribed') status.dataset.resubscribed = String(Number(status.dataset.resubscribed ?? 0) + 1);
  status.textContent = t(word);
}
