// @ts-check
import { el } from '/assets/api.js';
import { renderAttachment } from '/assets/chat-attachments.js';

/**
 * What both chat pages share: the message log (ordered by conversation then `seq`, whatever
 * order messages arrive in). Sending exactly once with a `client_msg_id` and safe retries, and
 * typing, are in chat-send.js; showing, loading and uploading attachments in chat-attachments.js.
 */

/**
 * @typedef {{ attachment_id: string, kind: 'image' | 'file' | 'video' | 'voice', mime: string, size: number,
 *   name: string, url: string, thumbnail_url: string | null }} Attachment
 * @typedef {{ id: string, conversation_id: string, visitor_id: string, seq: number,
 *   sender_type: 'visitor' | 'agent' | 'system' | 'bot', sender_id: string, client_msg_id: string | null,
 *   type: string, content: string, attachment: Attachment | null, meta: Record<string, unknown> | null,
 *   created_at: number, recalled: boolean }} Message
 * @typedef {{ messages: Message[], has_more: boolean, start_cursor: string | null, end_cursor: string | null }} MessagePage
 * @typedef {{ code: number, msg: string, data: any }} Envelope
 * @typedef {{ clientMsgId: string, content: string, attachment?: Attachment, state: 'sending' | 'failed', error?: string }} Pending
 * @typedef {{ id: string, conversation_id: string, visitor_id: string, agent_id: string | null, agent_nickname: string,
 *   after_seq: number, content: string, created_at: number }} Note
 * @typedef {import('/assets/chat-attachments.js').AttachmentLoader} AttachmentLoader
 */

/**
 * A bot's message is labelled with the bot's name (its `meta.bot_name`, docs/integration.md "Bots").
 * @param {Message} m @param {string} word the pages' word for a bot
 */
const botLabel = (m, word) => (typeof m.meta?.bot_name === 'string' ? `${m.meta.bot_name} (${word})` : word);

/**
 * The words the message log shows, English unless a page passes its own (the widget passes
 * its visitor's language, src/pages/assets/widget-i18n.js).
 * @typedef {{ you: string, bot: string, sending: string, notSent: (error: string) => string, retry: string,
 *   read: string, recalled: string, notePrefix: string, anAgent: string, onlyAgents: string }} LogStrings
 * @type {LogStrings}
 */
export const LOG_STRINGS = {
  you: 'You',
  bot: 'Bot',
  sending: 'Sending…',
  notSent: (error) => `Not sent: ${error}`,
  retry: 'Retry',
  read: 'Read',
  recalled: '(recalled)',
  notePrefix: 'Note · ',
  anAgent: 'an agent',
  onlyAgents: 'only agents see this',
};

/**
 * A chat log in a `role="log"` list. `self` is the sender type whose messages are "mine"
 * (`visitor` or `agent`); `readBy` the seq up to which the other side has read.
 * @param {HTMLElement} list
 * `onRetry` is offered a message that was not sent, when its Retry button is pressed.
 * `strings` and `formatTime` localise what it shows (English and the browser's locale by default).
 * @param {{ self: 'visitor' | 'agent', labels: { visitor: string, agent: string }, loadAttachment?: AttachmentLoader,
 *   onRetry?: (pending: Pending) => void, strings?: LogStrings, formatTime?: (date: Date) => string }} options
 */
export function messageLog(
  list,
  { self, labels, loadAttachment, onRetry, strings = LOG_STRINGS, formatTime = (d) => d.toLocaleTimeString() },
) {
  /** @type {Map<string, Message>} by message id */
  const byId = new Map();
  /** @type {Map<string, Pending>} by client_msg_id, until the stored message is known */
  const pending = new Map();
  /** @type {Map<string, number>} the earliest time of each conversation: conversations are ordered by it */
  const startOf = new Map();
  /** @type {Map<string, number>} the other side's read seq of each conversation */
  const readSeq = new Map();
  /**
   * Internal notes (the workbench only), by id. Kept apart from the messages: a note has no seq of
   * its own, so `lastSeq`, `hasAllUpTo` and `newest` (gap filling, read receipts) never see one.
   * @type {Map<string, Note>}
   */
  const notes = new Map();

  const key = (/** @type {Message} */ m) => [startOf.get(m.conversation_id) ?? m.created_at, m.conversation_id, m.seq];
  const compare = (/** @type {Message} */ a, /** @type {Message} */ b) => {
    const [as, ac, aq] = key(a);
    const [bs, bc, bq] = key(b);
    return as !== bs
      ? Number(as) - Number(bs)
      : ac !== bc
        ? String(ac).localeCompare(String(bc))
        : Number(aq) - Number(bq);
  };

  /** A message or a note in history order: a note after the message with its `after_seq`, then by time. */
  const place = (/** @type {{ m?: Message, n?: Note }} */ item) =>
    item.m
      ? [startOf.get(item.m.conversation_id) ?? item.m.created_at, item.m.conversation_id, item.m.seq, 0, 0]
      : item.n
        ? [
            startOf.get(item.n.conversation_id) ?? item.n.created_at,
            item.n.conversation_id,
            item.n.after_seq,
            1,
            item.n.created_at,
          ]
        : [0, '', 0, 0, 0];
  const comparePlaces = (/** @type {{ m?: Message, n?: Note }} */ a, /** @type {{ m?: Message, n?: Note }} */ b) => {
    const pa = place(a);
    const pb = place(b);
    for (let i = 0; i < pa.length; i++) {
      const x = pa[i];
      const y = pb[i];
      if (x === y) continue;
      return typeof x === 'string' ? x.localeCompare(String(y)) : Number(x) - Number(y);
    }
    return 0;
  };

  const render = () => {
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    const fromBottom = list.scrollHeight - list.scrollTop;
    /** @type {{ m?: Message, n?: Note }[]} */
    const items = [...[...byId.values()].map((m) => ({ m })), ...[...notes.values()].map((n) => ({ n }))];
    items.sort(comparePlaces);
    list.replaceChildren(
      ...items.map((item) => (item.m ? renderMessage(item.m) : renderNote(/** @type {Note} */ (item.n)))),
      ...[...pending.values()].map(renderPending),
    );
    // Following the conversation at the bottom; reading older pages: keep the same messages in view.
    list.scrollTop = atBottom ? list.scrollHeight : list.scrollHeight - fromBottom;
  };

  /** @param {Message} m */
  const renderMessage = (m) => {
    const mine = m.sender_type === self;
    const read = mine && m.seq <= (readSeq.get(m.conversation_id) ?? 0);
    // A bot's message: sender_type `bot`, its name in meta.bot_name (docs/integration.md "Bots").
    const bot = m.sender_type === 'bot' || (m.sender_type === 'agent' && m.meta?.bot === true);
    const who =
      m.sender_type === 'system'
        ? ''
        : mine
          ? strings.you
          : bot
            ? botLabel(m, strings.bot)
            : labels[/** @type {'visitor' | 'agent'} */ (m.sender_type)];
    return el(
      'li',
      {
        // `from-…`: the bare sender names are layout classes of the pages (.visitor is the visitor page's grid).
        className: `message from-${m.sender_type}${mine ? ' mine' : ''}`,
        'data-message-id': m.id,
        'data-seq': m.seq,
        'data-conversation': m.conversation_id,
        'data-sender': m.sender_type,
        'data-client-msg-id': m.client_msg_id ?? undefined,
        'data-read': read ? 'true' : undefined,
        'data-bot': bot ? 'true' : undefined,
      },
      // Names and text isolated from what is around them (issue 27 row 8): a right-to-left mark
      // or override in either cannot reorder the rest of the line.
      who ? el('span', { className: 'message-sender' }, el('bdi', { text: who })) : null,
      m.content
        ? el('p', { className: 'message-text', dir: 'auto', text: m.recalled ? strings.recalled : m.content })
        : null,
      m.attachment ? renderAttachment(m.attachment, loadAttachment) : null,
      el(
        'span',
        { className: 'message-meta' },
        el('time', {
          datetime: new Date(m.created_at).toISOString(),
          text: formatTime(new Date(m.created_at)),
        }),
        read ? el('span', { className: 'read-receipt', text: ` · ${strings.read}` }) : null,
      ),
    );
  };

  /** An internal note, marked as one: for the merchant's agents only. @param {Note} n */
  const renderNote = (n) =>
    el(
      'li',
      {
        className: 'message note',
        'data-note-id': n.id,
        'data-after-seq': n.after_seq,
        'data-conversation': n.conversation_id,
      },
      el(
        'span',
        { className: 'message-sender' },
        strings.notePrefix,
        el('bdi', { text: n.agent_nickname || strings.anAgent }),
      ),
      el('p', { className: 'message-text', dir: 'auto', text: n.content }),
      el(
        'span',
        { className: 'message-meta' },
        el('time', {
          datetime: new Date(n.created_at).toISOString(),
          text: formatTime(new Date(n.created_at)),
        }),
        el('span', { text: ` · ${strings.onlyAgents}` }),
      ),
    );

  /** @param {Pending} p */
  const renderPending = (p) =>
    el(
      'li',
      { className: `message from-${self} mine pending`, 'data-client-msg-id': p.clientMsgId, 'data-pending': p.state },
      el('span', { className: 'message-sender', text: strings.you }),
      p.content ? el('p', { className: 'message-text', dir: 'auto', text: p.content }) : null,
      p.attachment ? renderAttachment(p.attachment, loadAttachment) : null,
      el('span', {
        className: 'message-meta',
        text: p.state === 'sending' ? strings.sending : strings.notSent(p.error ?? 'failed'),
      }),
      // A retry reuses the client_msg_id: if the first attempt was stored after all, it is returned, not repeated.
      p.state === 'failed' && onRetry
        ? el('button', {
            type: 'button',
            className: 'link-button retry',
            'data-retry': p.clientMsgId,
            text: strings.retry,
          })
        : null,
    );
  list.addEventListener('click', (event) => {
    const button = event.target instanceof Element ? event.target.closest('[data-retry]') : null;
    const p = button instanceof HTMLElement ? pending.get(button.dataset.retry ?? '') : undefined;
    if (p && onRetry) onRetry(p);
  });

  return {
    /** Adds or updates messages (a history page, an event, a send answer); duplicates are ignored. */
    merge(/** @type {Message[]} */ messages) {
      for (const m of messages) {
        const start = startOf.get(m.conversation_id);
        if (start === undefined || m.created_at < start) startOf.set(m.conversation_id, m.created_at);
        byId.set(m.id, m);
        if (m.client_msg_id && m.sender_type === self) pending.delete(m.client_msg_id);
      }
      render();
    },
    /** Adds internal notes (the workbench's note list, a `note.created` event); duplicates are ignored. */
    mergeNotes(/** @type {Note[]} */ list) {
      for (const n of list) notes.set(n.id, n);
      render();
    },
    /** The highest seq known of a conversation (0 when none). */
    lastSeq(/** @type {string} */ conversationId) {
      let last = 0;
      for (const m of byId.values()) if (m.conversation_id === conversationId && m.seq > last) last = m.seq;
      return last;
    },
    /** Whether every seq of the conversation up to `seq` is known. */
    hasAllUpTo(/** @type {string} */ conversationId, /** @type {number} */ seq) {
      const seen = new Set();
      for (const m of byId.values()) if (m.conversation_id === conversationId) seen.add(m.seq);
      for (let s = 1; s <= seq; s++) if (!seen.has(s)) return false;
      return true;
    },
    /** The other side read the conversation up to `seq`: my messages up to it show "Read". */
    markReadByOther(/** @type {string} */ conversationId, /** @type {number} */ seq) {
      if (seq > (readSeq.get(conversationId) ?? 0)) readSeq.set(conversationId, seq);
      render();
    },
    /** @param {Pending} p */
    setPending(p) {
      pending.set(p.clientMsgId, p);
      render();
    },
    clear() {
      byId.clear();
      notes.clear();
      pending.clear();
      startOf.clear();
      readSeq.clear();
      render();
    },
    /** The newest message, if any. */
    newest() {
      return [...byId.values()].sort(compare).at(-1);
    },
  };
}
