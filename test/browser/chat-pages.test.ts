import { eq } from 'drizzle-orm';
import type { Browser, Page, Route } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, afterEach, beforeEach, expect, it } from 'vitest';
import { agents, merchants } from '../../src/db/schema.js';
import { createAgent } from '../../src/resolvers/admin.js';
import {
  type BrowserTab,
  describeInBrowser,
  dropMessageFrames,
  waitUntilLive as live,
  openTab,
  openWorkbenchLoggedIn,
  openWorkbenchOnline,
  screenshot,
  useBrowserApp,
} from '../support/browser.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

type Hooks = { __parley?: { dropSocket(): void; restoreSocket(): void } };
const dropSocket = (page: Page) => page.evaluate(() => (window as unknown as Hooks).__parley?.dropSocket());
const restoreSocket = (page: Page) => page.evaluate(() => (window as unknown as Hooks).__parley?.restoreSocket());

/** Polls a condition of the pages (they change on their own, through the socket) for up to 20 s. */
const poll = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 20_000, interval: 100 });

/** The texts of the chat log, oldest first (pending and stored messages alike). */
const texts = (page: Page) => page.locator('#messages li .message-text').allTextContents();

const png = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 3, background: { r: 40, g: 120, b: 200 } } })
    .png()
    .toBuffer();

/** Two pages and a server on a shared, loaded machine: each step waits for its condition, up to Playwright's 30 s. */
const STORY_TIMEOUT = 120_000;

let t: TestApp;
let browser: Browser;
// The history test sends 35 messages from one visitor in a burst: above CHAT_MESSAGE_BURST's default of 30 per 10 s.
useBrowserApp((made) => ({ t, browser } = made), { env: { CHAT_MESSAGE_BURST: '100' } });

describeInBrowser('chat pages: a visitor page and the workbench against one server', () => {
  let agentTab: BrowserTab;
  let visitorTab: BrowserTab;
  let agent: Page;
  let visitor: Page;

  // Alice's workbench is one tab for the whole describe: opened (logged in, live, online) by the
  // first test, kept open by the next ones. Each test's visitor arrives after it, so every test
  // sees its conversation come in live, as it did with a workbench of its own; what the previous
  // test left (its closed conversation) is not what the next one looks at, and its problems must
  // stay empty as before. A test that fails closes it, so the next one starts a fresh workbench.
  // The visitor is a fresh tab (its own context, so a new visitor) for each test.
  let workbench: BrowserTab | undefined;
  let agentOpen = false;
  beforeEach(async () => {
    if (!workbench) {
      workbench = await openTab(browser);
      agentOpen = false;
    }
    agentTab = workbench;
    agent = workbench.page;
    visitorTab = await openTab(browser);
    visitor = visitorTab.page;
  });
  /** The visitor leaves: its conversation closes, so Alice's capacity is free for the next test. */
  const leave = (page: Page) =>
    page
      .evaluate(async () => {
        const token = sessionStorage.getItem('parley.visitor-token:demo-appkey');
        if (token)
          await fetch('/visitor/chat/close', { method: 'POST', headers: { authorization: `Bearer ${token}` } });
      })
      .catch(() => {});
  afterEach(async (context) => {
    await leave(visitor);
    await visitorTab.close();
    if (context.task.result?.state === 'fail') {
      await workbench?.close();
      workbench = undefined;
    }
    await t.app.deps.db.update(agents).set({ maxConcurrentChats: null }).where(eq(agents.username, 'alice'));
  });
  afterAll(async () => {
    await workbench?.close();
  });

  /** Alice's workbench, live and online: opened by the first test, the same page after it. */
  const openWorkbench = async () => {
    if (!agentOpen) {
      await openWorkbenchOnline(agent, t, 'alice');
      agentOpen = true;
      return;
    }
    await live(agent);
    await agent.waitForSelector('#agent-state[data-state="online"]', { state: 'attached' });
  };
  const openVisitor = async (page = visitor) => {
    // The widget's panel opened as a page of its own (what the launcher's iframe shows).
    await page.goto(`${t.url}/widget/frame?appkey=demo-appkey`);
    await page.locator('#main[data-visitor-id]').waitFor({ state: 'attached' });
    await live(page);
    return (await page.locator('#main').getAttribute('data-visitor-id')) ?? '';
  };
  const say = async (page: Page, text: string) => {
    await page.locator('#message-input').fill(text);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
  };

  it(
    'a whole conversation: queued, claimed, typing, read receipts, a dropped socket on each side losing nothing, transfer back to the queue, close and rate',
    async () => {
      // Alice is at her capacity (her two demo conversations): the visitor waits in the queue.
      await t.app.deps.db.update(agents).set({ maxConcurrentChats: 2 }).where(eq(agents.username, 'alice'));
      await openWorkbench();
      const uid = await openVisitor();
      const state = visitor.locator('#chat-state');
      await poll(() => state.getAttribute('data-state')).toBe('queued');
      expect(await state.textContent()).toContain('number 1 in the queue');

      // The workbench's queue updates live; Alice claims the conversation.
      const queued = agent.locator(`#queue-list li[data-uid="${uid}"]`);
      await queued.waitFor();
      await queued.getByRole('button', { name: 'Claim' }).click();
      await poll(() => state.getAttribute('data-state')).toBe('active');
      expect(await state.textContent()).toBe('Chatting with Alice');
      await agent.waitForSelector('#chat-state[data-state="active"]', { state: 'attached' });
      await agent.locator(`#conversation-list li[data-uid="${uid}"]`).waitFor();

      // Typing, then the visitor's message; the agent has the conversation open, so it reads it.
      await visitor.locator('#message-input').pressSequentially('Hello');
      await poll(() => agent.locator('#typing').textContent()).toMatch(/is typing/);
      await visitor.getByRole('button', { name: 'Send', exact: true }).click();
      const fromVisitor = agent.locator('#messages li[data-sender="visitor"]', { hasText: 'Hello' });
      await fromVisitor.waitFor();
      await poll(() => agent.locator('#typing').isHidden()).toBe(true);
      // The agent's read receipt reaches the visitor.
      await visitor.locator('#messages li.mine[data-read="true"]', { hasText: 'Hello' }).waitFor();

      await agent.locator('#message-input').pressSequentially('Hi');
      await poll(() => visitor.locator('#typing').textContent()).toBe('Alice is typing…');
      await agent.locator('#message-input').fill('Hi! How can I help?');
      await agent.getByRole('button', { name: 'Send', exact: true }).click();
      await visitor.locator('#messages li[data-sender="agent"]', { hasText: 'Hi! How can I help?' }).waitFor();
      await agent.locator('#messages li.mine[data-read="true"]', { hasText: 'Hi! How can I help?' }).waitFor();

      // The visitor's socket drops; the agent writes meanwhile; after the reconnect all is there, once, in order.
      await dropSocket(visitor);
      await visitor.waitForSelector('#connection-status[data-state="reconnecting"]', { state: 'attached' });
      for (const text of ['While you were away 1', 'While you were away 2', 'While you were away 3'])
        await say(agent, text);
      await agent.locator('#messages li[data-message-id]', { hasText: 'While you were away 3' }).waitFor();
      await restoreSocket(visitor);
      await visitor.waitForSelector('#connection-status[data-resubscribed]', { state: 'attached', timeout: 15_000 });
      await visitor.locator('#messages li', { hasText: 'While you were away 3' }).waitFor();
      expect((await texts(visitor)).filter((x) => x.startsWith('While you were away'))).toEqual([
        'While you were away 1',
        'While you were away 2',
        'While you were away 3',
      ]);
      const seqs = (await visitor
        .locator('#messages li[data-seq]')
        .evaluateAll((nodes) => nodes.map((n) => Number((n as HTMLElement).dataset.seq)))) as number[];
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
      expect(new Set(seqs).size).toBe(seqs.length);

      // Same on the agent's side.
      await dropSocket(agent);
      await agent.waitForSelector('#connection-status[data-state="reconnecting"]', { state: 'attached' });
      await say(visitor, 'Are you still there?');
      await visitor.locator('#messages li[data-message-id]', { hasText: 'Are you still there?' }).waitFor();
      await restoreSocket(agent);
      await agent.locator('#messages li[data-sender="visitor"]', { hasText: 'Are you still there?' }).waitFor({
        timeout: 15_000,
      });
      expect(await agent.locator('#messages li', { hasText: 'Are you still there?' }).count()).toBe(1);
      await screenshot(agent, 'chat-workbench');
      await screenshot(visitor, 'chat-visitor');

      // Back to the queue (Alice is over her capacity, so it stays there), and claimed again.
      await agent.locator('#transfer-target').selectOption('');
      await agent.getByRole('button', { name: 'Transfer' }).click();
      await poll(() => state.getAttribute('data-state')).toBe('queued');
      await agent.locator(`#queue-list li[data-uid="${uid}"]`).getByRole('button', { name: 'Claim' }).click();
      await poll(() => state.getAttribute('data-state')).toBe('active');

      // The agent closes; the visitor is invited to rate, and rates once.
      await agent.getByRole('button', { name: 'Close the conversation' }).click();
      await poll(() => state.getAttribute('data-state')).toBe('closed');
      await agent.waitForSelector('#chat-state[data-state="closed"]', { state: 'attached' });
      await visitor.locator('#rating-form').waitFor();
      await visitor.getByLabel('Rating').selectOption('4');
      await visitor.getByLabel('My question was resolved').check();
      await visitor.getByLabel('Comment (optional)').fill('Quick and kind.');
      await visitor.getByRole('button', { name: 'Send rating' }).click();
      await visitor.locator('#rating-result[data-result="rated"]').waitFor();
      expect(await visitor.locator('#rating-form').isHidden()).toBe(true);
      await screenshot(visitor, 'chat-visitor-rated');
      expect(agentTab.problems).toEqual([]);
      expect(visitorTab.problems).toEqual([]);
    },
    STORY_TIMEOUT,
  );

  it(
    'a send whose answer is lost is retried with the same client_msg_id: the message exists once; the unread count updates live',
    async () => {
      await openWorkbench();
      const uid = await openVisitor();
      await poll(() => visitor.locator('#chat-state').getAttribute('data-state')).toBe('active');
      const item = agent.locator(`#conversation-list li[data-uid="${uid}"]`);
      await item.waitFor();
      // The first send reaches the server and is stored, but its answer never reaches the page.
      const keys: string[] = [];
      await visitor.route('**/visitor/message/send', async (route) => {
        keys.push(JSON.parse(route.request().postData() ?? '{}').client_msg_id);
        if (keys.length > 1) return route.continue();
        await route.fetch();
        return route.abort('connectionreset');
      });
      await say(visitor, 'Sent on a weak network');
      await visitor.locator('#messages li[data-message-id]', { hasText: 'Sent on a weak network' }).waitFor();
      // The event may show the stored message first; the page still retries (the same key) until it has an answer.
      await poll(async () => keys.length).toBeGreaterThanOrEqual(2);
      expect(new Set(keys).size).toBe(1);
      await poll(() => visitor.locator('#messages li[data-pending]').count()).toBe(0);
      // Not open on the workbench yet: one unread message there, read when opened.
      await poll(() => item.locator('.badge.unread [aria-hidden="true"]').allTextContents()).toEqual(['1']);
      await item.locator('.conversation-open').click();
      await agent.locator('#messages li[data-sender="visitor"]', { hasText: 'Sent on a weak network' }).waitFor();
      await poll(() => item.locator('.badge.unread').count()).toBe(0);
      expect(await visitor.locator('#messages li', { hasText: 'Sent on a weak network' }).count()).toBe(1);
      expect(await agent.locator('#messages li', { hasText: 'Sent on a weak network' }).count()).toBe(1);
      expect(agentTab.problems).toEqual([]);
    },
    STORY_TIMEOUT,
  );

  it(
    'messages written in quick succession are stored in the order written, even when the first one’s answer is slow',
    async () => {
      await openWorkbench();
      const uid = await openVisitor();
      await poll(() => visitor.locator('#chat-state').getAttribute('data-state')).toBe('active');
      // The first send is held 1 s on its way to the server: sent side by side, the second would
      // be stored (and numbered) first. The page sends one after the other (chat-send.js).
      let sends = 0;
      await visitor.route('**/visitor/message/send', async (route) => {
        sends += 1;
        if (sends === 1) await new Promise((resolve) => setTimeout(resolve, 1000));
        await route.continue();
      });
      await say(visitor, 'Written first');
      await say(visitor, 'Written second');
      await agent.locator(`#conversation-list li[data-uid="${uid}"] .conversation-open`).click();
      await agent.locator('#messages li[data-sender="visitor"]', { hasText: 'Written second' }).waitFor();
      const written = (page: Page) =>
        page
          .locator('#messages li[data-message-id] .message-text')
          .allTextContents()
          .then((texts) => texts.filter((x) => x.startsWith('Written')));
      expect(await written(agent)).toEqual(['Written first', 'Written second']);
      await poll(() => written(visitor)).toEqual(['Written first', 'Written second']);
      expect(sends).toBe(2);
    },
    STORY_TIMEOUT,
  );

  it(
    'a reply held on its way in one conversation does not hold the agent’s reply in another; within one they still go in order',
    async () => {
      await openWorkbench();
      const first = await openVisitor();
      const otherTab = await openTab(browser);
      const other = otherTab.page;
      try {
        const second = await openVisitor(other);
        await poll(() => visitor.locator('#chat-state').getAttribute('data-state')).toBe('active');
        await poll(() => other.locator('#chat-state').getAttribute('data-state')).toBe('active');
        // Every reply to the first visitor is held on its way to the server (a hung connection)
        // until released; replies to anyone else pass.
        const held: Route[] = [];
        let released = false;
        await agent.route('**/agent/message/send', async (route) => {
          if (!released && JSON.parse(route.request().postData() ?? '{}').visitor_id === first) held.push(route);
          else await route.continue();
        });
        const openChat = async (uid: string) => {
          await agent.locator(`#conversation-list li[data-uid="${uid}"] .conversation-open`).click();
          await agent.locator(`#conversation-list li[data-uid="${uid}"][aria-current="true"]`).waitFor();
        };
        await openChat(first);
        await say(agent, 'To the first, held');
        await say(agent, 'To the first, written after it');
        await poll(async () => held.length).toBe(1);

        // The agent moves on to the second conversation: its reply is stored at once, not after
        // the first conversation's attempts (up to about 90 s).
        await openChat(second);
        await say(agent, 'To the second');
        await agent.locator('#messages li[data-message-id]', { hasText: 'To the second' }).waitFor({ timeout: 5_000 });
        await other.locator('#messages li[data-sender="agent"]', { hasText: 'To the second' }).waitFor();
        // Meanwhile the first conversation's second reply still waits behind its first.
        expect(held.length).toBe(1);
        expect(await visitor.locator('#messages li', { hasText: 'To the first' }).count()).toBe(0);

        // Released: the first conversation's replies are stored in the order written.
        const lastAnswered = agent.waitForResponse(
          (r) => r.url().endsWith('/agent/message/send') && (r.request().postData() ?? '').includes('written after it'),
        );
        released = true;
        for (const route of held) await route.continue();
        await lastAnswered;
        await visitor.locator('#messages li', { hasText: 'To the first, written after it' }).waitFor();
        expect((await texts(visitor)).filter((x) => x.startsWith('To the first'))).toEqual([
          'To the first, held',
          'To the first, written after it',
        ]);
        // Their answers, arriving while the second conversation is open, stay out of its log.
        expect(await agent.locator('#messages li', { hasText: 'To the first' }).count()).toBe(0);
        expect(agentTab.problems).toEqual([]);
      } finally {
        await agent.unroute('**/agent/message/send');
        await leave(other);
        await otherTab.close();
      }
    },
    STORY_TIMEOUT,
  );

  it(
    'a message.created lost on the way (a seq jump) is fetched with after: nothing is missing, in order',
    async () => {
      await openWorkbench();
      // The visitor page's socket passes through here; one message.created frame never reaches the page.
      const dropped = await dropMessageFrames(visitor, 'Lost on the way');
      const uid = await openVisitor();
      await poll(() => visitor.locator('#chat-state').getAttribute('data-state')).toBe('active');
      await agent.locator(`#conversation-list li[data-uid="${uid}"] .conversation-open`).click();
      await agent.waitForSelector('#chat-state[data-state="active"]', { state: 'attached' });
      await say(agent, 'Lost on the way');
      await poll(async () => dropped()).toBe(1);
      expect(await visitor.locator('#messages li', { hasText: 'Lost on the way' }).count()).toBe(0);
      const lists: string[] = [];
      visitor.on('request', (request) => {
        if (request.url().includes('/visitor/message/list')) lists.push(new URL(request.url()).search);
      });
      await say(agent, 'Arrives and shows the jump');
      await visitor.locator('#messages li', { hasText: 'Arrives and shows the jump' }).waitFor();
      await visitor.locator('#messages li', { hasText: 'Lost on the way' }).waitFor();
      const lines = (await texts(visitor)).filter((x) => x === 'Lost on the way' || x === 'Arrives and shows the jump');
      expect(lines).toEqual(['Lost on the way', 'Arrives and shows the jump']);
      expect(lists.some((q) => /[?&]after=\d+/.test(q))).toBe(true);
      expect(visitorTab.problems).toEqual([]);
    },
    STORY_TIMEOUT,
  );

  it(
    'scrolling back through history fetches the older page with before',
    async () => {
      await openWorkbench();
      await openVisitor();
      await poll(() => visitor.locator('#chat-state').getAttribute('data-state')).toBe('active');
      // 35 messages sent by the visitor's own token, then the page is reloaded: it shows the newest 30.
      await visitor.evaluate(async () => {
        const token = sessionStorage.getItem('parley.visitor-token:demo-appkey');
        for (let i = 1; i <= 35; i++) {
          await fetch('/visitor/message/send', {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ client_msg_id: `history-${i}`, content: `Line ${i}` }),
          });
        }
      });
      await visitor.reload();
      await visitor.locator('#messages li', { hasText: 'Line 35' }).waitFor();
      expect(await visitor.locator('#messages li', { hasText: /^YouLine 1\b/ }).count()).toBe(0);
      await visitor.getByRole('button', { name: 'Earlier messages' }).click();
      await visitor.locator('#messages li .message-text', { hasText: /^Line 1$/ }).waitFor();
      const lines = (await texts(visitor)).filter((x) => /^Line \d+$/.test(x));
      expect(lines).toEqual(Array.from({ length: 35 }, (_, i) => `Line ${i + 1}`));

      // The visitor ends the conversation, is invited to rate, and writing again starts a new one.
      await visitor.getByRole('button', { name: 'End the conversation' }).click();
      await poll(() => visitor.locator('#chat-state').getAttribute('data-state')).toBe('closed');
      await visitor.locator('#rating-form').waitFor();
      await say(visitor, 'Back again');
      await poll(() => visitor.locator('#chat-state').textContent()).toBe('Chatting with Alice');
      expect(await visitor.locator('#rating-form').isHidden()).toBe(true);
      const conversations = await visitor
        .locator('#messages li[data-conversation]')
        .evaluateAll((nodes) => new Set(nodes.map((n) => (n as HTMLElement).dataset.conversation)).size);
      expect(conversations).toBe(2);
      expect(visitorTab.problems).toEqual([]);
    },
    STORY_TIMEOUT,
  );

  it(
    'an image uploaded by the visitor shows inline on both sides, a file from the agent as a link; the server’s refusals are shown',
    async () => {
      await openWorkbench();
      const uid = await openVisitor();
      await poll(() => visitor.locator('#chat-state').getAttribute('data-state')).toBe('active');
      await agent.locator(`#conversation-list li[data-uid="${uid}"] .conversation-open`).click();
      await agent.waitForSelector('#chat-state[data-state="active"]', { state: 'attached' });

      await visitor.getByLabel('Attach a file').setInputFiles({
        name: 'photo.png',
        mimeType: 'image/png',
        buffer: await png(64, 48),
      });
      await visitor.waitForSelector('#attachment-result[data-verdict="sent"]');
      // The XMLHttpRequest's upload progress reached the whole file (the bar is hidden again after).
      expect(await visitor.locator('#upload-progress').evaluate((bar) => (bar as HTMLProgressElement).value)).toBe(1);
      expect(await visitor.locator('#upload-progress').isHidden()).toBe(true);
      const loaded = (page: Page) =>
        page.waitForFunction(() => {
          const img = document.querySelector('#messages img.attachment-thumb') as HTMLImageElement | null;
          return Boolean(img?.complete && img.naturalWidth > 0);
        });
      await loaded(visitor);
      await loaded(agent);
      expect(await agent.locator('#messages img.attachment-thumb').getAttribute('alt')).toBe('photo.png');

      await agent.getByLabel('Send a file').setInputFiles({
        name: 'terms.txt',
        mimeType: 'text/plain',
        buffer: Buffer.from('The terms of sale.\n'),
      });
      const link = visitor.locator('#messages a.attachment-link.file');
      await link.waitFor();
      expect(await link.textContent()).toContain('terms.txt');
      const [download] = await Promise.all([visitor.waitForEvent('download'), link.click()]);
      expect(download.suggestedFilename()).toBe('terms.txt');
      const body = await download.createReadStream();
      const chunks: Buffer[] = [];
      for await (const chunk of body) chunks.push(chunk as Buffer);
      expect(Buffer.concat(chunks).toString()).toBe('The terms of sale.\n');
      await screenshot(visitor, 'chat-visitor-attachments');

      // The page's copy of the settings says images are fine; the server now says otherwise.
      const [demo] = await t.app.deps.db.select().from(merchants).where(eq(merchants.bid, 'demo'));
      const { switches, imageMaxBytes } = demo!;
      try {
        await t.app.deps.db.update(merchants).set({ imageMaxBytes: 100 }).where(eq(merchants.bid, 'demo'));
        t.app.deps.configCache.invalidate(demo!.id);
        await visitor
          .getByLabel('Attach a file')
          .setInputFiles({ name: 'big.png', mimeType: 'image/png', buffer: await png(64, 64) });
        await visitor.waitForSelector('#attachment-result[data-verdict="refused"]');
        expect(await visitor.locator('#attachment-result').textContent()).toContain(
          'big.png was refused: File larger than the image limit of 100 bytes',
        );

        await t.app.deps.db
          .update(merchants)
          .set({ imageMaxBytes, switches: { ...switches, upload_img: 'off' } })
          .where(eq(merchants.bid, 'demo'));
        t.app.deps.configCache.invalidate(demo!.id);
        await visitor
          .getByLabel('Attach a file')
          .setInputFiles({ name: 'off.png', mimeType: 'image/png', buffer: await png(8, 8) });
        await poll(() => visitor.locator('#attachment-result').textContent()).toContain(
          'off.png was refused: Uploads of kind image are switched off for this merchant (upload_img)',
        );
        expect(await visitor.locator('#messages img.attachment-thumb').count()).toBe(1);
      } finally {
        await t.app.deps.db.update(merchants).set({ switches, imageMaxBytes }).where(eq(merchants.bid, 'demo'));
        t.app.deps.configCache.invalidate(demo!.id);
      }
      // Console errors of the refused uploads' 4xx answers are expected; script errors are not.
      expect(visitorTab.problems.filter((p) => p.startsWith('page error'))).toEqual([]);
      expect(agentTab.problems).toEqual([]);
    },
    STORY_TIMEOUT,
  );

  // Last: Carol stays a known agent of the merchant; earlier tests expect Alice to be the only one online.
  it(
    'the agent transfers to another agent seen online; the visitor and both workbenches follow',
    async () => {
      await createAgent(t.app.deps, { bid: 'demo', username: 'carol', password: 'carol-password', nickname: 'Carol' });
      await openWorkbench();
      const uid = await openVisitor();
      await poll(() => visitor.locator('#chat-state').textContent()).toBe('Chatting with Alice');
      const carolTab = await openTab(browser);
      try {
        // Carol comes online: Alice's page learns it from global-{bid} (agent.login, agent.state).
        await openWorkbenchLoggedIn(carolTab.page, t, 'carol');
        await live(carolTab.page);
        await agent.locator(`#conversation-list li[data-uid="${uid}"] .conversation-open`).click();
        await poll(() => agent.locator('#transfer-target option').allTextContents()).toContain('Carol');
        await agent.locator('#transfer-target').selectOption({ label: 'Carol' });
        await agent.getByRole('button', { name: 'Transfer' }).click();
        await poll(() => visitor.locator('#chat-state').textContent()).toBe('Chatting with Carol');
        await carolTab.page.locator(`#conversation-list li[data-uid="${uid}"]`).waitFor();
        await poll(() => agent.locator(`#conversation-list li[data-uid="${uid}"]`).count()).toBe(0);
        await agent.waitForSelector('#chat-state[data-state="elsewhere"]', { state: 'attached' });
        expect(carolTab.problems).toEqual([]);
      } finally {
        await carolTab.close();
      }
    },
    STORY_TIMEOUT,
  );
});

describeInBrowser('the pages’ test hooks', () => {
  it(
    'window.__parley exists outside production and is absent with NODE_ENV=production',
    async () => {
      for (const env of ['test', 'production'] as const) {
        // The file's server runs with NODE_ENV=test. Production never loads the demo data: the
        // page stops at "which merchant?", its script has run.
        const app = env === 'test' ? t : await startTestApp({ config: { env, demoSeed: false } });
        expect(app.config.env).toBe(env);
        const tab = await openTab(browser);
        try {
          await tab.page.goto(`${app.url}/widget/frame?appkey=demo-appkey`);
          await tab.page.waitForSelector('#main[aria-busy="false"]', { state: 'attached' });
          const hooks = await tab.page.evaluate(() => typeof (window as unknown as Hooks).__parley);
          expect(hooks, env).toBe(env === 'production' ? 'undefined' : 'object');
          expect(await tab.page.locator('html').getAttribute('data-test-hooks')).toBe(
            env === 'production' ? 'off' : 'on',
          );
        } finally {
          await tab.close();
          if (app !== t) await app.stop();
        }
      }
    },
    STORY_TIMEOUT,
  );
});
