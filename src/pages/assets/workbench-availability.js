// @ts-check
import { callJson, el, say } from '/assets/api.js';
import { relativeTimeElement, truncate } from '/assets/text.js';

/**
 * The workbench's view of availability (docs/availability.md): whether the merchant is open by
 * its business hours and when it opens next, the messages left (oldest first, each with an
 * Answer button), and the conversations re-queued because their agent went offline. Every rule
 * is the server's: this module calls `/agent/business-hours/get` and `/agent/messages-left/list`,
 * takes `business_hours.changed` and `conversation.requeued` as they come, and sets text.
 *
 * @typedef {{ open: boolean, next_open_at: number | null, timezone: string }} HoursState
 * @typedef {{ conversation_id: string, visitor_id: string, visitor_name: string, group_id: string | null,
 *   reason: 'closed' | 'no_agent', left_at: number, contact: Record<string, string>, items: { content?: unknown }[] }} MessageLeft
 */

const REASONS = { closed: 'out of hours', no_agent: 'nobody online' };

/**
 * The merchant's business hours: "Open now", or "Closed: opens again <when> (<zone>)".
 * @param {HTMLElement} node
 */
export function businessHoursLine(node) {
  /** @param {HoursState} state */
  const show = (state) => {
    node.dataset.open = String(state.open);
    if (state.open) return say(node, 'Open now by the business hours.');
    const when = state.next_open_at
      ? new Date(state.next_open_at * 1000).toLocaleString(undefined, {
          timeZone: state.timezone,
          dateStyle: 'medium',
          timeStyle: 'short',
        })
      : '';
    say(node, when ? `Closed: opens again ${when} (${state.timezone}).` : 'Closed by the business hours.');
  };
  return {
    /** Reads the merchant's calendar state now (computed by the server at each ask). */
    async load() {
      const { body } = await callJson('/agent/business-hours/get');
      if (body.code === 0) show(body.data.state);
    },
    /** `business_hours.changed`: the merchant's own calendar (`group_id` null) is the one shown. */
    changed(/** @type {HoursState & { group_id: string | null }} */ data) {
      if (data.group_id === null && typeof data.open === 'boolean') show(data);
    },
  };
}

/**
 * The list of messages left, oldest first: who, why, when, the contact details left and the last
 * message, and an Answer button (`data-answer`: the page claims it and opens it).
 * @param {{ list: HTMLElement, empty: HTMLElement }} nodes
 */
export function messagesLeftList({ list, empty }) {
  let asked = 0;
  return {
    async load() {
      const mine = ++asked;
      const { body } = await callJson('/agent/messages-left/list?limit=50');
      if (mine !== asked || body.code !== 0) return;
      /** @type {MessageLeft[]} */
      const rows = body.data.list;
      empty.hidden = rows.length > 0;
      list.replaceChildren(...rows.map(leftRow));
    },
  };
}

/** @param {MessageLeft} m */
function leftRow(m) {
  const last = Array.isArray(m.items) ? m.items[m.items.length - 1] : undefined;
  const preview = typeof last?.content === 'string' ? truncate(last.content, 140) : '';
  const contact = Object.entries(m.contact ?? {})
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ');
  return el(
    'li',
    { className: 'message-left', 'data-uid': m.visitor_id, 'data-reason': m.reason },
    el(
      'button',
      { type: 'button', className: 'conversation-open conversation-head', 'data-open': m.visitor_id },
      el('bdi', { className: 'conversation-name', text: m.visitor_name }),
      el('span', { className: 'badge left', text: REASONS[m.reason] ?? m.reason }),
      relativeTimeElement(m.left_at, { class: 'conversation-time' }),
    ),
    preview ? el('p', { className: 'conversation-preview', dir: 'auto', text: preview }) : null,
    contact ? el('p', { className: 'conversation-contact', dir: 'auto', text: contact }) : null,
    el(
      'button',
      { type: 'button', className: 'claim', 'data-answer': m.visitor_id, 'aria-label': `Answer ${m.visitor_name}` },
      'Answer',
    ),
  );
}

/**
 * Conversations re-queued because their agent went offline (`conversation.requeued` on
 * `global-{bid}`): remembered while they wait, so the queue marks them, and told in a line.
 * @param {HTMLElement} node
 */
export function requeueNotices(node) {
  /** @type {Set<string>} visitor ids */
  const waiting = new Set();
  /** @type {string[]} */
  let lines = [];
  return {
    /** @param {{ visitor_id: string }} data @param {string} who the visitor's name @param {string} agent who left */
    add(data, who, agent) {
      waiting.add(data.visitor_id);
      lines = [`${who}: back in the queue, ${agent} went offline.`, ...lines].slice(0, 5);
      say(node, `Re-queued — ${lines.join(' ')}`);
      return lines[0] ?? '';
    },
    has: (/** @type {string} */ visitorId) => waiting.has(visitorId),
    /** Forgets those no longer waiting (taken by an agent or closed). */
    keepOnly(/** @type {Set<string>} */ queued) {
      for (const id of waiting) if (!queued.has(id)) waiting.delete(id);
      if (waiting.size === 0) {
        lines = [];
        say(node, '');
      }
    },
  };
}
