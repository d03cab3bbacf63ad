// @ts-check

/**
 * History paging of one message log, shared by the chat pages (issue 26): the newest page, the
 * "Earlier messages" button paging back with `before`, and a live message whose `seq` skips some
 * filled with `after`, page by page. The page says how to fetch a page (its endpoint and
 * identity); this module keeps the cursor and what the button shows.
 *
 * @typedef {import('/assets/chat.js').Message} Message
 * @typedef {import('/assets/chat.js').MessagePage} MessagePage
 * @typedef {{ merge(messages: Message[]): void, lastSeq(conversationId: string): number,
 *   hasAllUpTo(conversationId: string, seq: number): boolean }} PagedLog the parts of `messageLog` used here
 * @typedef {(query: Record<string, string>) => Promise<MessagePage | undefined>} FetchPage
 *   one page of `GET …/message/list` with these query parameters; undefined when refused (the page shows why)
 */

/**
 * @param {{ log: PagedLog, fetchPage: FetchPage, older?: HTMLButtonElement | null, pageSize?: number,
 *   gapPageSize?: number, maxGapPages?: number }} options
 */
export function historyPager({ log, fetchPage, older = null, pageSize = 30, gapPageSize = 50, maxGapPages = 20 }) {
  /** @type {string | null} where "Earlier messages" continues from; null: nothing older */
  let cursor = null;
  /** Bumped by `reset`: an answer for a conversation no longer shown is dropped. */
  let generation = 0;

  const showButton = () => {
    if (older) older.hidden = !cursor;
  };
  /** @param {MessagePage} page */
  const keepCursor = (page) => {
    cursor = page.has_more ? page.start_cursor : null;
    showButton();
  };

  const pager = {
    /** The newest page; answers it (undefined when refused or reset meanwhile). */
    async loadNewest() {
      const mine = generation;
      const page = await fetchPage({ limit: String(pageSize) });
      if (!page || mine !== generation) return undefined;
      log.merge(page.messages);
      keepCursor(page);
      return page;
    },
    /** The page before the oldest shown, when there is one. */
    async loadOlder() {
      if (!cursor) return undefined;
      const mine = generation;
      if (older) older.disabled = true;
      try {
        const page = await fetchPage({ before: cursor, limit: String(pageSize) });
        if (!page || mine !== generation) return undefined;
        log.merge(page.messages);
        keepCursor(page);
        return page;
      } finally {
        if (older) older.disabled = false;
      }
    },
    /**
     * A live message: merged, and when its `seq` skips one never seen, what follows the last seq
     * known is fetched (`after`, a bare seq: the visitor's latest conversation), up to
     * `maxGapPages` pages.
     * @param {Message} m
     */
    async receive(m) {
      const last = log.lastSeq(m.conversation_id);
      log.merge([m]);
      if (m.seq <= last + 1 || log.hasAllUpTo(m.conversation_id, m.seq)) return;
      const mine = generation;
      let after = String(last);
      for (let pages = 0; pages < maxGapPages; pages++) {
        const page = await fetchPage({ after, limit: String(gapPageSize) });
        if (!page || mine !== generation) return;
        log.merge(page.messages);
        if (!page.has_more || !page.end_cursor) return;
        after = page.end_cursor;
      }
    },
    /** Forgets the cursor (another conversation is shown): answers still on the way are dropped. */
    reset() {
      generation++;
      cursor = null;
      showButton();
    },
    /** Whether "Earlier messages" has something to load. */
    get hasOlder() {
      return cursor !== null;
    },
  };
  older?.addEventListener('click', () => void pager.loadOlder());
  return pager;
}
