// @ts-check
import { el } from '/assets/api.js';
import { truncate } from '/assets/text.js';

/** @typedef {import('/assets/realtime.js').PageStatus} PageStatus */

/** Most entries a feed keeps on screen; older ones are dropped. */
const MAX_ENTRIES = 200;

const timeOf = (/** @type {string} */ iso) => {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? '' : date.toLocaleTimeString();
};

const summary = (/** @type {unknown} */ data) => {
  if (data === undefined || data === null) return '';
  const text = typeof data === 'string' ? data : JSON.stringify(data);
  // Cut on characters, never inside a surrogate pair (issue 27 row 8): an emoji stays whole or goes.
  return truncate(text, 400);
};

/**
 * A `role="log"` list of channel events and connection notes, newest at the bottom.
 * @param {HTMLElement} list
 * @param {HTMLElement | null} [empty]
 */
export function eventFeed(list, empty = document.getElementById('feed-empty')) {
  const add = (/** @type {HTMLElement} */ item) => {
    if (empty) empty.hidden = true;
    // Follow new entries only when the reader is already at the bottom of the list.
    const following = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    list.append(item);
    while (list.children.length > MAX_ENTRIES) list.firstElementChild?.remove();
    if (following) list.scrollTop = list.scrollHeight;
  };
  return {
    /** @param {{ event: string, position: string, channel: string, data: unknown, at: string }} event */
    event(event) {
      add(
        el(
          'li',
          {
            className: 'event',
            'data-event': event.event,
            'data-event-id': event.position,
            'data-channel': event.channel,
          },
          el('time', { datetime: event.at, text: timeOf(event.at) }),
          ' ',
          el('span', { className: 'event-name', text: event.event }),
          ' ',
          el('span', { className: 'event-channel', text: `on ${event.channel}` }),
          el('code', { className: 'event-data', text: summary(event.data) }),
        ),
      );
    },
    /** @param {string} text */
    note(text, kind = 'note') {
      const now = new Date();
      add(
        el(
          'li',
          { className: `feed-note ${kind}`, 'data-note': kind },
          el('time', { datetime: now.toISOString(), text: now.toLocaleTimeString() }),
          ' ',
          el('span', { text }),
        ),
      );
    },
  };
}

/**
 * Shows a connection state in a `role="status"` element (its `data-state` drives the colour).
 * @param {HTMLElement} node
 * @param {PageStatus} status
 */
export function showConnection(node, status) {
  /** @type {Record<string, string>} */
  const texts = {
    connecting: 'Connecting…',
    live: 'Live',
    resubscribed: 'Live again (resubscribed)',
    reconnecting: `Connection lost, reconnecting${status.state === 'reconnecting' && status.attempt > 1 ? ` (attempt ${status.attempt})` : ''}…`,
    closed: 'Disconnected',
  };
  const text = texts[status.state];
  if (!text) return;
  const state = status.state === 'resubscribed' ? 'live' : status.state;
  node.dataset.state = state;
  node.textContent = text;
}

/** "agent-x since 1-0, global-y from the start": what a resubscription resumed after. */
export const describeSince = (/** @type {Record<string, string | null>} */ since) =>
  Object.entries(since)
    .map(([channel, id]) => (id ? `${channel} since ${id}` : `${channel} from now`))
    .join(', ');

/**
 * The switch that shows the raw event feed (a developer's tool, off by default). The choice is
 * remembered in `localStorage` under `key`; it is a display preference only, never an identity
 * or capability. The feed keeps recording while hidden, so turning it on shows recent events.
 * @param {HTMLInputElement} toggle a checkbox
 * @param {HTMLElement} panel
 * @param {string} key
 */
export function developerToggle(toggle, panel, key) {
  const read = () => {
    try {
      return localStorage.getItem(key) === 'on';
    } catch {
      return false; // storage refused (privacy settings): the default
    }
  };
  const apply = (/** @type {boolean} */ on) => {
    toggle.checked = on;
    panel.hidden = !on;
  };
  apply(read());
  toggle.addEventListener('change', () => {
    apply(toggle.checked);
    try {
      if (toggle.checked) localStorage.setItem(key, 'on');
      else localStorage.removeItem(key);
    } catch {
      // not remembered; the switch still works for this page
    }
  });
  // Another tab changed it: follow.
  addEventListener('storage', (event) => {
    if (event.key === key) apply(read());
  });
}
