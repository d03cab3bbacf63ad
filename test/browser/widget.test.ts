import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import type { Browser, Frame, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { merchants } from '../../src/db/schema.js';
import { userHashFor } from '../../src/resolvers/visitor.js';
import { expectNoSeriousViolations } from '../support/axe.js';
import {
  describeInBrowser,
  openTab,
  openWorkbenchLoggedIn,
  screenshot,
  useBrowserApp,
  waitUntilLive,
} from '../support/browser.js';
import type { TestApp } from '../support/test-app.js';

/**
 * The widget as a merchant's site embeds it (issue 34, "Done when"): a plain host page on
 * another origin with the snippet; the visitor chats through the launcher's panel with Alice in
 * the workbench; the host page's globals and styles are untouched, and every request of the
 * widget goes to the gateway.
 */

type Hooks = { __parley?: { dropSocket(): void; restoreSocket(): void } };
const poll = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 20_000, interval: 100 });
const STORY_TIMEOUT = 180_000;
const LAUNCHER_COLOR = 'rgb(10, 125, 56)';

/** The merchant's page: its own styles (which must neither reach the widget nor be changed by it) and the snippet. */
const hostPage = (
  gateway: string,
  options: { snippet: boolean; lang?: string; user?: { id: string; hash: string }; twice?: boolean },
) => `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Corner Shop</title>
  <link rel="icon" href="data:,">
  <style>
    body { font-family: Georgia, serif; margin: 2rem; color: #222; }
    button { background: rgb(1, 2, 3); color: #fff; border-radius: 0; padding: 0.5rem 1rem; }
    .price { color: rgb(140, 20, 20); font-size: 20px; }
    iframe { border: 5px solid red; }
  </style>
</head>
<body>
  <main>
    <h1>Corner Shop</h1>
    <p class="price">Teapot: 25 €</p>
    <button type="button" id="buy">Buy</button>
  </main>
  ${
    options.snippet
      ? `<script src="${gateway}/widget.js" data-appkey="demo-appkey" data-lang="${options.lang ?? 'en'}" data-color="#0a7d38" data-position="right"${
          options.user ? ` data-user-id="${options.user.id}" data-user-hash="${options.user.hash}"` : ''
        } async></script>`.repeat(options.twice ? 2 : 1)
      : ''
  }
</body>
</html>`;

let t: TestApp;
let browser: Browser;
let host: Server;
let hostUrl: string;
let identitySecret = '';
useBrowserApp((made) => ({ t, browser } = made));
beforeAll(async () => {
  if (!t) return;
  const [demo] = await t.app.deps.db.select().from(merchants).where(eq(merchants.bid, 'demo'));
  identitySecret = demo?.identitySecret ?? '';
  host = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://host');
    if (url.pathname !== '/' && url.pathname !== '/plain') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    const userId = url.searchParams.get('user');
    const user = userId
      ? { id: userId, hash: url.searchParams.get('hash') ?? userHashFor(identitySecret, userId) }
      : undefined;
    const twice = url.searchParams.has('twice');
    res.end(
      hostPage(t.url, { snippet: url.pathname === '/', lang: url.searchParams.get('lang') ?? 'en', user, twice }),
    );
  });
  await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
  // Another origin than the gateway's (http://127.0.0.1:<port>): another host name and port.
  hostUrl = `http://localhost:${(host.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => host?.close(resolve));
});

/** Opens the launcher and answers the panel's frame once its visitor is known. */
async function openPanel(page: Page): Promise<Frame> {
  await page.locator('parley-widget').getByRole('button').click();
  const iframe = page.locator('parley-widget iframe');
  await iframe.waitFor();
  const frame = await (await iframe.elementHandle())?.contentFrame();
  if (!frame) throw new Error('the widget has no panel frame');
  await frame.locator('#main[data-visitor-id]').waitFor({ state: 'attached', timeout: 15_000 });
  await waitUntilLive(frame);
  return frame;
}

const say = async (where: Page | Frame, text: string) => {
  await where.locator('#message-input').fill(text);
  await where.getByRole('button', { name: 'Send', exact: true }).click();
};

describeInBrowser('the widget on a merchant’s page of another origin', () => {
  it('every catalogue speaks every word English has', async () => {
    // The catalogue is a browser module (plain JavaScript, no declarations): imported as it is served.
    const { CATALOGUES } = (await import('../../src/pages/assets/widget-i18n.js' as string)) as {
      CATALOGUES: Record<string, Record<string, string>>;
    };
    const keys = Object.keys(CATALOGUES.en ?? {}).sort();
    for (const [lang, catalogue] of Object.entries(CATALOGUES))
      expect(Object.keys(catalogue).sort(), lang).toEqual(keys);
  });

  it(
    'a launcher opens the panel; the visitor chats with Alice (both ways, a file, a dropped socket, the badge, a rating); the host page is untouched and only the gateway is called',
    async () => {
      const [agentTab, visitorTab] = await Promise.all([openTab(browser), openTab(browser)]);
      const agent = agentTab.page;
      const page = visitorTab.page;
      try {
        // The host page's own globals, without the widget: the baseline, read in the visitor's tab
        // before it opens the page with the snippet (a new document has a new window; a third
        // tab for it cost a renderer).
        await page.goto(`${hostUrl}/plain`);
        const baseline = await page.evaluate(() => Object.getOwnPropertyNames(window).sort());

        await openWorkbenchLoggedIn(agent, t, 'alice');
        await agent.waitForSelector('#agent-state[data-state="online"]', { state: 'attached', timeout: 15_000 });

        const requests: string[] = [];
        const sockets: string[] = [];
        page.on('request', (request) => requests.push(request.url()));
        page.on('websocket', (socket) => sockets.push(socket.url()));
        await page.goto(`${hostUrl}/`);
        const launcher = page.locator('parley-widget').getByRole('button');
        await launcher.waitFor();
        expect(await launcher.getAttribute('aria-label')).toBe('Chat with us');
        expect(await launcher.getAttribute('aria-expanded')).toBe('false');
        // Nothing but the loader until the visitor opens it.
        expect(await page.locator('parley-widget iframe').count()).toBe(0);
        expect(requests.filter((u) => u.startsWith(t.url))).toEqual([`${t.url}/widget.js`]);

        // From the keyboard: Tab reaches the launcher, Enter opens the panel, focus goes into it.
        await page.locator('#buy').focus();
        await page.keyboard.press('Tab');
        await page.keyboard.press('Enter');
        const iframe = page.locator('parley-widget iframe');
        await iframe.waitFor();
        const panel = await openPanelFrame(page);
        expect(await launcher.getAttribute('aria-expanded')).toBe('true');
        await poll(() => panel.evaluate(() => document.activeElement?.id)).toBe('message-input');
        const uid = (await panel.locator('#main').getAttribute('data-visitor-id')) ?? '';
        await poll(() => panel.locator('#chat-state').getAttribute('data-state')).toBe('active');
        expect(await panel.locator('#chat-state').textContent()).toBe('Chatting with Alice');

        // The host page: no new global, its rules still apply, none reaches into the widget, none of the widget's leaks out.
        const after = await page.evaluate(() => Object.getOwnPropertyNames(window).sort());
        expect(after.filter((key) => !baseline.includes(key))).toEqual([]);
        const styles = await page.evaluate(() => {
          const css = (el: Element | null | undefined) => (el ? getComputedStyle(el) : undefined);
          const root = document.querySelector('parley-widget')?.shadowRoot;
          return {
            price: css(document.querySelector('.price'))?.color,
            buy: css(document.querySelector('#buy'))?.backgroundColor,
            buyRadius: css(document.querySelector('#buy'))?.borderTopLeftRadius,
            body: css(document.body)?.fontFamily,
            launcher: css(root?.querySelector('button'))?.backgroundColor,
            launcherRadius: css(root?.querySelector('button'))?.borderTopLeftRadius,
            frameBorder: css(root?.querySelector('iframe'))?.borderTopWidth,
            documentSheets: document.styleSheets.length,
            adopted: document.adoptedStyleSheets.length,
          };
        });
        expect(styles).toEqual({
          price: 'rgb(140, 20, 20)',
          buy: 'rgb(1, 2, 3)',
          buyRadius: '0px',
          body: 'Georgia, serif',
          launcher: LAUNCHER_COLOR,
          launcherRadius: '50%',
          frameBorder: '0px',
          documentSheets: 1,
          adopted: 0,
        });

        // Messages both ways, typing and read receipts.
        await agent.locator(`#conversation-list li[data-uid="${uid}"] .conversation-open`).click();
        await agent.waitForSelector('#chat-state[data-state="active"]', { state: 'attached' });
        await panel.locator('#message-input').pressSequentially('Hello from the shop');
        await poll(() => agent.locator('#typing').textContent()).toMatch(/is typing/);
        await panel.getByRole('button', { name: 'Send', exact: true }).click();
        await agent.locator('#messages li[data-sender="visitor"]', { hasText: 'Hello from the shop' }).waitFor();
        await panel.locator('#messages li.mine[data-read="true"]', { hasText: 'Hello from the shop' }).waitFor();
        await say(agent, 'Hi! The teapot ships today.');
        const reply = panel.locator('#messages li[data-sender="agent"]', { hasText: 'Hi! The teapot ships today.' });
        await reply.waitFor();
        expect(await reply.locator('.message-text').getAttribute('dir')).toBe('auto');
        // The live region announces it.
        await poll(() => panel.locator('#announcer').textContent()).toBe(
          'New message from Alice: Hi! The teapot ships today.',
        );

        // An attachment, checked before it leaves, then on the agent's side.
        await panel.getByLabel('Attach a file').setInputFiles({
          name: 'receipt.txt',
          mimeType: 'text/plain',
          buffer: Buffer.from('order 42\n'),
        });
        await panel.waitForSelector('#attachment-result[data-verdict="sent"]');
        await agent.locator('#messages a.attachment-link.file', { hasText: 'receipt.txt' }).waitFor();

        await expectNoSeriousViolations(page, 'axe: the host page with the panel open');
        await saveScreenshot(page, 'widget');

        // Minimised: Escape in the panel closes it and gives the focus back to the launcher.
        await panel.locator('#message-input').press('Escape');
        await poll(() => launcher.getAttribute('aria-expanded')).toBe('false');
        expect(await iframe.isHidden()).toBe(true);
        await poll(() => page.evaluate(() => document.activeElement?.tagName)).toBe('PARLEY-WIDGET');
        // While it is closed, the agent's messages count on the launcher's badge, with the alert sound (switch on).
        await say(agent, 'Your order is packed.');
        await poll(() => launcher.getAttribute('aria-label')).toBe('Chat with us (1 unread)');
        expect(await page.locator('parley-widget .badge').textContent()).toBe('1');
        expect(Number(await panel.locator('#main').getAttribute('data-alerts'))).toBeGreaterThanOrEqual(1);
        await expectNoSeriousViolations(page, 'axe: the launcher with its badge');
        await launcher.click();
        await poll(() => page.locator('parley-widget .badge').isHidden()).toBe(true);

        // The socket drops; the agent writes meanwhile; after the reconnect everything is there, once, in order.
        await panel.evaluate(() => (window as unknown as Hooks).__parley?.dropSocket());
        await panel.waitForSelector('#connection-status[data-state="reconnecting"]', { state: 'attached' });
        for (const text of ['Away 1', 'Away 2', 'Away 3']) await say(agent, text);
        await agent.locator('#messages li[data-message-id]', { hasText: 'Away 3' }).waitFor();
        await panel.evaluate(() => (window as unknown as Hooks).__parley?.restoreSocket());
        await panel.waitForSelector('#connection-status[data-resubscribed]', { state: 'attached', timeout: 15_000 });
        await panel.locator('#messages li', { hasText: 'Away 3' }).waitFor();
        const texts = await panel.locator('#messages li .message-text').allTextContents();
        expect(texts.filter((x) => x.startsWith('Away'))).toEqual(['Away 1', 'Away 2', 'Away 3']);

        // Alice closes; the panel invites to rate; the visitor rates.
        await agent.getByRole('button', { name: 'Close the conversation' }).click();
        await panel.locator('#rating-form').waitFor();
        await expectNoSeriousViolations(page, 'axe: the rating invitation');
        await panel.getByLabel('Rating').selectOption('5');
        await panel.getByRole('button', { name: 'Send rating' }).click();
        await panel.locator('#rating-result[data-result="rated"]').waitFor();
        expect(await panel.locator('#rating-result').textContent()).toBe('Thank you for your rating.');

        // Every request of the widget went to the gateway (the host page's own document aside).
        const foreign = requests.filter((u) => !u.startsWith(`${t.url}/`) && !u.startsWith(`${hostUrl}/`));
        expect(foreign).toEqual([]);
        expect(requests.filter((u) => u.startsWith(`${hostUrl}/`))).toEqual([`${hostUrl}/`]);
        expect(sockets.length).toBeGreaterThan(0);
        for (const socket of sockets) expect(socket).toBe(`${t.wsUrl}`);
        expect(visitorTab.problems).toEqual([]);
        expect(agentTab.problems).toEqual([]);
      } finally {
        await Promise.all([agentTab.close(), visitorTab.close()]);
      }
    },
    STORY_TIMEOUT,
  );

  it(
    'data-lang picks the language (Simplified Chinese), times in the visitor’s locale; on a phone the panel fills the screen',
    async () => {
      const tab = await openTab(browser);
      try {
        await tab.page.setViewportSize({ width: 390, height: 780 });
        // The snippet pasted twice on this page: one launcher all the same.
        await tab.page.goto(`${hostUrl}/?lang=zh-CN&twice`);
        const launcher = tab.page.locator('parley-widget').getByRole('button');
        await launcher.waitFor();
        expect(await tab.page.locator('parley-widget').count()).toBe(1);
        expect(await launcher.getAttribute('aria-label')).toBe('在线咨询');
        const panel = await openPanel(tab.page);
        expect(await panel.locator('html').getAttribute('lang')).toBe('zh-CN');
        expect(await panel.locator('#message-input').getAttribute('placeholder')).toBe('输入消息…');
        expect(await panel.getByRole('button', { name: '发送', exact: true }).count()).toBe(1);
        expect(await panel.getByRole('button', { name: '收起聊天窗口' }).count()).toBe(1);
        await panel.locator('#message-input').fill('你好');
        await panel.getByRole('button', { name: '发送', exact: true }).click();
        const mine = panel.locator('#messages li.mine[data-message-id]', { hasText: '你好' });
        await mine.waitFor();
        expect(await mine.locator('.message-sender').textContent()).toBe('我');
        const time = await mine.locator('time').evaluate((node) => ({
          text: node.textContent,
          expected: new Intl.DateTimeFormat('zh-CN', { hour: 'numeric', minute: '2-digit' }).format(
            new Date(node.getAttribute('datetime') ?? ''),
          ),
        }));
        expect(time.text).toBe(time.expected);
        // Full screen below 480 px.
        const box = await tab.page.locator('parley-widget iframe').boundingBox();
        expect(box).toEqual({ x: 0, y: 0, width: 390, height: 780 });
        await expectNoSeriousViolations(tab.page, 'axe: the panel in Chinese on a phone');
        expect(tab.problems).toEqual([]);
        // The visitor leaves: its conversation closes, so Alice's capacity stays free.
        await panel.getByRole('button', { name: '结束会话' }).click();
        await poll(() => panel.locator('#chat-state').getAttribute('data-state')).toBe('closed');
      } finally {
        await tab.close();
      }
    },
    STORY_TIMEOUT,
  );

  it(
    'data-user-id with data-user-hash: the same identified visitor on every device; the hash never travels in a URL; a wrong hash is refused',
    async () => {
      const uids: string[] = [];
      for (let device = 0; device < 2; device++) {
        const tab = await openTab(browser);
        const urls: string[] = [];
        tab.page.on('request', (request) => urls.push(request.url()));
        try {
          await tab.page.goto(`${hostUrl}/?user=customer-42`);
          const panel = await openPanel(tab.page);
          uids.push((await panel.locator('#main').getAttribute('data-visitor-id')) ?? '');
          // The identity went in the iframe address's fragment, which no request carries.
          const hash = userHashFor(identitySecret, 'customer-42');
          expect(urls.filter((u) => u.includes(hash))).toEqual([]);
          expect(panel.url()).not.toContain(hash);
          await panel.getByRole('button', { name: 'End the conversation' }).click();
          expect(tab.problems).toEqual([]);
        } finally {
          await tab.close();
        }
      }
      expect(uids[0]).toMatch(/^v/);
      expect(uids[1]).toBe(uids[0]);

      const tab = await openTab(browser);
      try {
        await tab.page.goto(`${hostUrl}/?user=customer-42&hash=${'0'.repeat(64)}`);
        await tab.page.locator('parley-widget').getByRole('button').click();
        const iframe = tab.page.locator('parley-widget iframe');
        await iframe.waitFor();
        const panel = await (await iframe.elementHandle())?.contentFrame();
        const alert = panel?.getByRole('alert').first();
        await alert?.waitFor();
        expect(await alert?.textContent()).toBe('user_hash does not match user_id');
      } finally {
        await tab.close();
      }
    },
    STORY_TIMEOUT,
  );
});

/** The panel's frame once the launcher has made it. */
async function openPanelFrame(page: Page): Promise<Frame> {
  const frame = await (await page.locator('parley-widget iframe').elementHandle())?.contentFrame();
  if (!frame) throw new Error('the widget has no panel frame');
  await frame.locator('#main[data-visitor-id]').waitFor({ state: 'attached', timeout: 15_000 });
  await waitUntilLive(frame);
  return frame;
}

/** test-results/<name>.png always; docs/widget.png too when WIDGET_SCREENSHOT=1 (docs/widget.md). */
async function saveScreenshot(page: Page, name: string) {
  await screenshot(page, name);
  if (process.env.WIDGET_SCREENSHOT === '1') {
    await page.screenshot({ path: join(import.meta.dirname, '..', '..', 'docs', `${name}.png`) });
  }
}
