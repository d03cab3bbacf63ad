import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, expect, it } from 'vitest';
import { expectNoSeriousViolations } from '../support/axe.js';
import {
  type BrowserTab,
  describeInBrowser,
  dropMessageFrames,
  waitUntilLive as live,
  openTab,
  openWorkbenchOnline,
  publish,
  showDeveloperFeed,
  useBrowserApp,
  waitForSubscription,
} from '../support/browser.js';
import { HttpClient, visitorToken } from '../support/clients.js';
import type { TestApp } from '../support/test-app.js';

/**
 * The workbench for all-day use (issue 34, "Pages people use all day", and issue 27 row 8):
 * keyboard only, new messages announced, names in any script and text isolated for bidi, the
 * developer feed's cut, relative times; axe finds nothing serious in light or dark.
 */

const poll = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 20_000, interval: 100 });
const STORY_TIMEOUT = 120_000;

let t: TestApp;
let browser: Browser;
// The history test sends 35 messages in a burst: above CHAT_MESSAGE_BURST's default of 30 per 10 s.
useBrowserApp((made) => ({ t, browser } = made), { env: { CHAT_MESSAGE_BURST: '100' } });

/** A visitor over the REST API (not a page): token, assignment, messages. */
async function arrive(nickname: string) {
  const { token, uid } = await visitorToken(t.url, 'demo-appkey', { nickname });
  const http = new HttpClient(t.url);
  const auth = { authorization: `Bearer ${token}` };
  const assigned = await http.json('/visitor/chat/assign', { method: 'POST', headers: auth });
  expect(assigned.body.code).toBe(0);
  let n = 0;
  return {
    uid,
    async say(content: string) {
      const { body } = await http.json('/visitor/message/send', {
        method: 'POST',
        headers: auth,
        json: { content, client_msg_id: `a11y-${uid}-${++n}` },
      });
      expect(body.code).toBe(0);
    },
    close: () => http.json('/visitor/chat/close', { method: 'POST', headers: auth }),
  };
}

/** What has the keyboard focus: its id or data-open, and whether it shows a focus ring. */
const focused = (page: Page) =>
  page.evaluate(() => {
    const node = document.activeElement as HTMLElement | null;
    const style = node ? getComputedStyle(node) : undefined;
    return {
      id: node?.id ?? '',
      open: node?.dataset.open ?? '',
      ring: Boolean(node?.matches(':focus-visible') && style && style.outlineStyle !== 'none'),
    };
  });

describeInBrowser('the workbench for all-day use: keyboard, screen readers, any script', () => {
  let tab: BrowserTab;
  let page: Page;
  let visitor: Awaited<ReturnType<typeof arrive>> | undefined;

  // The first three tests share one workbench tab, Alice logged in, live and online: each one's
  // visitor arrives after it is open, as with a workbench of its own, and its problems must stay
  // empty (now cumulatively). The history test has its own tab: its socket passes through a
  // route from before it connects. A failed test closes the shared tab; the next opens a new one.
  let workbench: BrowserTab | undefined;
  let online = false;
  /** Alice's shared workbench, live and online (opened by the first test that asks). */
  const sharedWorkbench = async () => {
    if (!workbench) {
      workbench = await openTab(browser);
      online = false;
    }
    tab = workbench;
    page = workbench.page;
    if (!online) await openWorkbenchOnline(page, t, 'alice');
    online = true;
    await live(page);
    await page.waitForSelector('#agent-state[data-state="online"]', { state: 'attached' });
  };
  let ownTab: BrowserTab | undefined;
  afterEach(async (context) => {
    await visitor?.close().catch(() => {});
    visitor = undefined;
    await ownTab?.close();
    ownTab = undefined;
    if (context.task.result?.state === 'fail') {
      await workbench?.close();
      workbench = undefined;
    }
  });
  afterAll(async () => {
    await workbench?.close();
  });

  it(
    'from the keyboard: Tab reaches a conversation, Enter opens it and sends, Escape closes the canned list; a new message is announced; names and text are bidi-isolated',
    async () => {
      await sharedWorkbench();
      // A canned response, so "/" has something to list.
      const created = await page.evaluate(async () => {
        const res = await fetch('/agent/canned/create', {
          method: 'POST',
          credentials: 'include',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ shortcut: 'thanks', content: 'Thank you for waiting!', scope: 'personal' }),
        });
        return ((await res.json()) as { code: number }).code;
      });
      expect(created).toBe(0);

      // An Arabic name: shown isolated, so it cannot reorder the badges or "Chat with" around it.
      const name = 'سارة أحمد';
      visitor = await arrive(name);
      const row = page.locator(`#conversation-list li[data-uid="${visitor.uid}"]`);
      await row.waitFor();
      expect(await row.locator('bdi.conversation-name').textContent()).toBe(name);

      // Tab from the top of the page until the conversation's button has the focus, with a visible ring.
      await page.locator('body').focus();
      let reached = false;
      for (let i = 0; i < 60 && !reached; i++) {
        await page.keyboard.press('Tab');
        const now = await focused(page);
        if (now.open === visitor.uid) {
          reached = true;
          expect(now.ring).toBe(true);
        }
      }
      expect(reached).toBe(true);

      // Enter opens it; the focus moves to the reply box.
      await page.keyboard.press('Enter');
      await page.waitForSelector('#chat-state[data-state="active"]', { state: 'attached' });
      await poll(async () => (await focused(page)).id).toBe('message-input');
      expect(await page.locator('#chat-heading bdi').textContent()).toBe(name);

      // Enter sends.
      await page.keyboard.type('Hello from the keyboard');
      await page.keyboard.press('Enter');
      await page
        .locator('#messages li[data-message-id][data-sender="agent"]', { hasText: 'Hello from the keyboard' })
        .waitFor();
      expect(await page.locator('#message-input').inputValue()).toBe('');

      // "/" lists the canned responses; Escape closes the list and leaves the focus in the reply box.
      await page.keyboard.type('/than');
      const picker = page.locator('#canned-picker');
      await picker.locator('[role="option"][data-shortcut="thanks"]').waitFor();
      await expectNoSeriousViolations(page, 'the workbench with the canned list open');
      await page.keyboard.press('Escape');
      await poll(() => picker.isHidden()).toBe(true);
      expect((await focused(page)).id).toBe('message-input');
      await page.locator('#message-input').fill('');

      // The visitor writes (a right-to-left override inside): the live region announces it, the text is isolated.
      const text = 'مرحبا \u202Etxt.exe';
      await visitor.say(text);
      const message = page.locator('#messages li[data-message-id][data-sender="visitor"]', { hasText: 'مرحبا' });
      await message.waitFor();
      expect(await message.locator('.message-text').getAttribute('dir')).toBe('auto');
      expect(await message.locator('.message-sender bdi').textContent()).toBe(name);
      await poll(() => page.locator('#announcer').textContent()).toBe(`${name}: ${text}`);
      expect(await page.locator('#announcer').getAttribute('aria-live')).toBe('polite');

      await expectNoSeriousViolations(page, 'the workbench with a conversation open');
      await page.emulateMedia({ colorScheme: 'dark' });
      await expectNoSeriousViolations(page, 'the workbench with a conversation open, dark');
      expect(tab.problems).toEqual([]);
    },
    STORY_TIMEOUT,
  );

  it('a message in another conversation is announced by who wrote it; the unread count rises', async () => {
    await sharedWorkbench();
    visitor = await arrive('李小龙');
    await page.locator(`#conversation-list li[data-uid="${visitor.uid}"]`).waitFor();
    await visitor.say('你好，在吗？');
    await poll(() => page.locator('#announcer').textContent()).toBe('New message from 李小龙');
    await poll(() =>
      page.locator(`#conversation-list li[data-uid="${visitor?.uid}"]`).getAttribute('data-unread'),
    ).toBe('1');
    expect(tab.problems).toEqual([]);
  });

  it('the developer feed cuts long events on characters: an emoji across the cut stays whole (issue 27 row 8)', async () => {
    await sharedWorkbench();
    const { agentId } = await page.evaluate(async () => {
      const res = await fetch('/agent/data/get', { credentials: 'include' });
      return { agentId: ((await res.json()) as { data: { agent: { agent_id: string } } }).data.agent.agent_id };
    });
    await waitForSubscription(page, t, `agent-${agentId}`);
    await showDeveloperFeed(page);
    // UTF-16 units 399 and 400 are one emoji: a cut at 400 units would leave a lone surrogate.
    const event = await publish(t, `agent-${agentId}`, 'shop.long', `${'x'.repeat(399)}😀${'y'.repeat(50)}`);
    const data = page.locator(`#event-feed li[data-event-id="${event.id}"] .event-data`);
    await data.waitFor();
    const shown = await data.evaluate((node) => {
      const text = node.textContent ?? '';
      return { wellFormed: (text as string & { isWellFormed(): boolean }).isWellFormed(), tail: text.slice(-3) };
    });
    expect(shown).toEqual({ wellFormed: true, tail: 'xx…' });

    // The same helper, by graphemes: a flag (two code points) is not split either; relative times read naturally.
    // A string, not a function: the test runner would rewrite a dynamic import() in a function's source.
    const helpers = await page.evaluate(`(async () => {
      const { truncate, relativeTime, relativeTimeElement, keepRelativeTimesCurrent } = await import('/assets/text.js');
      const now = Date.now();
      const stale = relativeTimeElement(now - 10 * 60000);
      stale.textContent = 'stale';
      const box = document.createElement('div');
      box.append(stale);
      const stop = keepRelativeTimesCurrent(box);
      document.dispatchEvent(new Event('visibilitychange'));
      stop();
      return {
        flag: truncate('ab\u{1F1E8}\u{1F1F3}cd', 3),
        emoji: truncate('a\u{1F600}b', 2),
        short: truncate('short', 10),
        now: relativeTime(now, now, 'en'),
        minutes: relativeTime(now - 3 * 60000, now, 'en'),
        yesterday: relativeTime(now - 86400000, now, 'en'),
        chinese: relativeTime(now - 2 * 3600000, now, 'zh-CN'),
        refreshed: stale.textContent,
      };
    })()`);
    expect(helpers).toEqual({
      flag: 'ab…',
      emoji: 'a…',
      short: 'short',
      now: 'now',
      minutes: '3 minutes ago',
      yesterday: 'yesterday',
      chinese: '2小时前',
      refreshed: '10 minutes ago',
    });
    expect(tab.problems).toEqual([]);
  });

  it(
    'history paging (history.js): "Earlier messages" pages back with before; a message.created lost on the socket is fetched with after',
    async () => {
      // Alone with the workbench, as before: the shared tab closes first.
      await workbench?.close();
      workbench = undefined;
      ownTab = await openTab(browser);
      tab = ownTab;
      page = ownTab.page;
      // One message.created frame of the workbench's socket never reaches the page.
      const dropped = await dropMessageFrames(page, 'Lost on the way');
      await openWorkbenchOnline(page, t, 'alice');
      visitor = await arrive('Paging Pat');
      for (let i = 1; i <= 35; i++) await visitor.say(`line ${i}`);
      const lists: string[] = [];
      page.on('request', (request) => {
        if (request.url().includes('/agent/message/list')) lists.push(new URL(request.url()).search);
      });
      await page.locator(`#conversation-list li[data-uid="${visitor.uid}"] .conversation-open`).click();
      await page.waitForSelector('#chat-state[data-state="active"]', { state: 'attached' });
      const lines = () => page.locator('#messages li[data-sender="visitor"] .message-text').allTextContents();
      // The newest 30 messages of the conversation (its system line included), then the rest on demand.
      await poll(async () => (await lines()).at(-1)).toBe('line 35');
      expect((await lines()).length).toBeLessThan(35);
      const earlier = page.getByRole('button', { name: 'Earlier messages' });
      await earlier.click();
      await poll(async () => (await lines()).length).toBe(35);
      expect(await lines()).toEqual(Array.from({ length: 35 }, (_, i) => `line ${i + 1}`));
      await poll(() => earlier.isHidden()).toBe(true);
      expect(lists.some((q) => /[?&]before=/.test(q))).toBe(true);

      // The frame of "Lost on the way" is dropped; the next message shows the seq jump and fills it.
      await visitor.say('Lost on the way');
      await poll(async () => dropped()).toBe(1);
      await visitor.say('Arrives and shows the jump');
      await page.locator('#messages li', { hasText: 'Arrives and shows the jump' }).waitFor();
      await page.locator('#messages li', { hasText: 'Lost on the way' }).waitFor();
      expect((await lines()).slice(-2)).toEqual(['Lost on the way', 'Arrives and shows the jump']);
      expect(lists.some((q) => /[?&]after=\d+/.test(q))).toBe(true);
      expect(tab.problems).toEqual([]);
    },
    STORY_TIMEOUT,
  );
});
