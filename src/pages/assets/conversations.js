// @ts-check
import { el } from '/assets/api.js';
import { relativeTimeElement, truncate } from '/assets/text.js';

/**
 * The workbench's conversation list and queue: each row a button that opens the conversation,
 * with the visitor's name (any script, isolated with `<bdi>`), its unread count, the last
 * message (`dir="auto"`) and when it happened ("3 minutes ago", kept current by the page).
 *
 * @typedef {{ id: string, name: string, unread_count: number, pinned_at: number, timestamp: number, items?: { content?: unknown }[] }} Chatting
 * @typedef {{ visitor_id: string, visitor_name: string, queue_position: number | null, state: string, created_at: number }} QueuedConversation
 */

/** Longest last-message preview shown in a row (the full text is in the conversation). */
const PREVIEW_MAX = 140;

/** "3 unread" for the badge's accessible text. */
const unreadText = (/** @type {number} */ n) => `${n} unread`;

/** Pinned conversations first (latest pin first), then the most recent. */
export const sortConversations = (/** @type {Record<string, Chatting>} */ chatting) =>
  Object.values(chatting).sort(
    (a, b) =>
      Number(b.pinned_at > 0) - Number(a.pinned_at > 0) || b.pinned_at - a.pinned_at || b.timestamp - a.timestamp,
  );

/** The sum of the unread counts (the page title shows it). */
export const unreadTotal = (/** @type {Chatting[]} */ entries) =>
  entries.reduce((sum, c) => sum + (Number(c.unread_count) || 0), 0);

/**
 * One row of the agent's conversations.
 * @param {Chatting} c
 * @param {string | undefined} openId the visitor whose conversation is open
 */
export function conversationRow(c, openId) {
  const last = Array.isArray(c.items) ? c.items[c.items.length - 1] : undefined;
  const preview = typeof last?.content === 'string' ? truncate(last.content, PREVIEW_MAX) : '';
  const unread = Number(c.unread_count) || 0;
  const previewId = `preview-${c.id}`;
  return el(
    'li',
    {
      className: 'conversation',
      'data-uid': c.id,
      'data-pinned': c.pinned_at > 0 ? 'true' : 'false',
      'data-unread': unread,
      'aria-current': openId === c.id ? 'true' : undefined,
    },
    el(
      'button',
      {
        type: 'button',
        className: 'conversation-open conversation-head',
        'data-open': c.id,
        'aria-describedby': preview ? previewId : undefined,
      },
      el('bdi', { className: 'conversation-name', text: c.name }),
      c.pinned_at > 0 ? el('span', { className: 'badge pinned', text: 'Pinned' }) : null,
      unread > 0
        ? el(
            'span',
            { className: 'badge unread', title: unreadText(unread) },
            el('span', { 'aria-hidden': 'true', text: String(unread) }),
            el('span', { className: 'visually-hidden', text: unreadText(unread) }),
          )
        : null,
    ),
    el(
      'p',
      { className: 'conversation-meta' },
      preview ? el('span', { className: 'conversation-preview', id: previewId, dir: 'auto', text: preview }) : null,
      c.timestamp ? relativeTimeElement(c.timestamp * 1000, { class: 'conversation-time' }) : null,
    ),
  );
}

/**
 * One row of the queue: the visitor, its position, when it arrived, and a Claim button;
 * "Re-queued" when its agent went offline.
 * @param {QueuedConversation} c
 * @param {boolean} [requeued]
 */
export function queueRow(c, requeued = false) {
  return el(
    'li',
    { className: 'queued-conversation', 'data-uid': c.visitor_id, 'data-requeued': requeued ? 'true' : undefined },
    el(
      'button',
      { type: 'button', className: 'conversation-open', 'data-open': c.visitor_id },
      el('bdi', { className: 'conversation-name', text: c.visitor_name }),
      el('span', { className: 'badge queued', text: `#${c.queue_position ?? '?'}` }),
      requeued ? el('span', { className: 'badge requeued', text: 'Re-queued' }) : null,
      c.created_at ? relativeTimeElement(c.created_at, { class: 'conversation-time' }) : null,
    ),
    el(
      'button',
      { type: 'button', className: 'claim', 'data-claim': c.visitor_id, 'aria-label': `Claim ${c.visitor_name}` },
      'Claim',
    ),
  );
}
