// @ts-check
import { byId, callJson } from '/assets/api.js';
import { conversationRow, queueRow, sortConversations } from '/assets/conversations.js';

/**
 * @typedef {import('/assets/conversations.js').Chatting} Chatting
 * @typedef {import('/assets/conversations.js').QueuedConversation} QueuedConversation
 */

/**
 * The workbench's two lists, each kept by visitor uid: the agent's conversations (the
 * bootstrap's `chatting`) and the merchant's queue (`GET /agent/chat/list?scope=queue`).
 * @param {{
 *   requeued: ReturnType<typeof import('/assets/workbench-availability.js').requeueNotices>,
 *   filter: { update: () => unknown },
 *   openVisitorId: () => string | undefined,
 * }} page
 */
export function conversationLists({ requeued, filter, openVisitorId }) {
  /** @type {Map<string, Chatting>} the agent's active conversations, by visitor uid */
  let mine = new Map();
  /** @type {Map<string, QueuedConversation>} the queue, by visitor uid */
  let queue = new Map();
  return {
    get mine() {
      return mine;
    },
    get queue() {
      return queue;
    },
    /** The queue of the merchant (`GET /agent/chat/list?scope=queue`, oldest first). */
    async loadQueue() {
      const { body } = await callJson('/agent/chat/list?scope=queue&limit=50');
      if (body.code !== 0) return;
      /** @type {QueuedConversation[]} */
      const list = body.data.list;
      queue = new Map(list.map((c) => [c.visitor_id, c]));
      requeued.keepOnly(new Set(queue.keys()));
      byId('queue-empty').hidden = list.length > 0;
      byId('queue-list').replaceChildren(...list.map((c) => queueRow(c, requeued.has(c.visitor_id))));
    },
    /** The agent's conversations, pinned first, each with its unread count, last message and time. */
    renderConversations(/** @type {Record<string, Chatting>} */ chatting) {
      const entries = sortConversations(chatting);
      mine = new Map(entries.map((c) => [c.id, c]));
      byId('conversations-empty').hidden = entries.length > 0;
      // Keep the keyboard focus on the same row when the list is redrawn under it.
      const focused = document.activeElement instanceof HTMLElement ? document.activeElement.dataset.open : undefined;
      byId('conversation-list').replaceChildren(...entries.map((c) => conversationRow(c, openVisitorId())));
      const again = focused ? byId('conversation-list').querySelector(`[data-open="${CSS.escape(focused)}"]`) : null;
      if (again instanceof HTMLElement) again.focus();
      void filter.update();
    },
  };
}
