import { eq } from 'drizzle-orm';
import type { Browser, Frame, Page } from 'playwright-core';
import { beforeAll, expect, it } from 'vitest';
import {
  agents,
  attachments,
  merchants,
  visitorAttributeDefs,
  visitorAttributes,
  visitors,
} from '../../src/db/schema.js';
import {
  type BrowserTab,
  describeInBrowser,
  waitUntilLive as live,
  logInWithApi,
  openTab,
  openWorkbenchOnline,
  useBrowserApp,
} from '../support/browser.js';
import type { TestApp } from '../support/test-app.js';

/**
 * Every user-controlled value the chat pages show, fed markup, scripts, bidirectional controls
 * and a very long run: each must come out as text. A value written as HTML creates an element
 * (an `<img src=x>` or an inline `<script>`), sets `window.__pwned`, or trips the
 * Content-Security-Policy (no inline handler or script may run); each of these fails the test.
 */
const hostile = (tag: string) =>
  `<img src=x onerror="window.__pwned='${tag}'"><script>window.__pwned='${tag}'</script>` +
  `<b onmouseover=alert(1)>${tag}</b>&amp;\u202Etxt.exe ${'W'.repeat(600)}`;
// A file name: no slash (a browser keeps only the base name) and no quotes (Chromium sends them as %22).
const hostileFileName = `<img src=x onerror=window.__pwned=1>\u202Egnp.exe ${'F'.repeat(200)}.txt`;

const value = {
  agentNickname: hostile('agent-nickname'),
  ticketNickname: hostile('ticket-nickname'),
  appname: hostile('appname'),
  visitorNickname: hostile('visitor-nickname'),
  attributeLabel: hostile('attribute-label'),
  attributeValue: hostile('attribute-value'),
  visitorMessage: `${hostile('visitor-message')}${'V'.repeat(2500)}`,
  // The composer takes at most 4000 characters.
  agentMessage: `${hostile('agent-message')}${'A'.repeat(2500)}`,
};

let t: TestApp;
let browser: Browser;
useBrowserApp((made) => ({ t, browser } = made));
beforeAll(async () => {
  if (!t) return;
  const db = t.app.deps.db;
  await db.update(agents).set({ nickname: value.agentNickname }).where(eq(agents.username, 'alice'));
  await db.update(agents).set({ nickname: value.ticketNickname }).where(eq(agents.username, 'tom'));
  await db.update(merchants).set({ appname: value.appname }).where(eq(merchants.bid, 'demo'));
  await db
    .insert(visitorAttributeDefs)
    .values({ merchantId: 'm_demo', key: 'hostile', label: value.attributeLabel, type: 'text', position: 99 });
  t.app.deps.configCache.invalidate('m_demo');
});

/** A tab that records CSP violations (the DOM event), besides the script and console errors openTab records. */
async function hostileTab(): Promise<BrowserTab> {
  const tab = await openTab(browser);
  await tab.context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      const w = window as unknown as { __csp?: string[] };
      w.__csp = [...(w.__csp ?? []), `${e.violatedDirective} ${e.blockedURI}`];
    });
  });
  return tab;
}

/** Nothing ran, nothing was built from the values, nothing was blocked by the CSP: in the page and each of its frames. */
async function assertInert(tab: BrowserTab) {
  for (const frame of tab.page.frames()) await assertFrameInert(frame);
  // Chromium reports a CSP violation on the console too; any script or console error fails.
  expect(tab.problems).toEqual([]);
}
async function assertFrameInert(frame: Frame) {
  const seen = await frame.evaluate(() => {
    const w = window as unknown as { __pwned?: string; __csp?: string[] };
    return {
      pwned: w.__pwned ?? null,
      csp: w.__csp ?? [],
      injectedImages: document.querySelectorAll('img[src="x"]').length,
      inlineScripts: [...document.scripts].filter((s) => !s.src).length,
      bold: document.querySelectorAll('b[onmouseover]').length,
    };
  });
  expect(seen, frame.url()).toEqual({ pwned: null, csp: [], injectedImages: 0, inlineScripts: 0, bold: 0 });
}

const textOf = (page: Page | Frame, selector: string) => page.locator(selector).first().textContent();
const say = async (page: Page | Frame, text: string) => {
  await page.locator('#message-input').fill(text);
  await page.getByRole('button', { name: 'Send', exact: true }).click();
};

describeInBrowser('pages under hostile content: every user-controlled value is shown as text', () => {
  it('the visitor page and the workbench show markup, scripts, bidi controls and long strings as text', async () => {
    const [agentTab, visitorTab] = await Promise.all([hostileTab(), hostileTab()]);
    const agent = agentTab.page;
    // The visitor demo: a host page whose widget panel (an iframe) holds the conversation, and
    // whose developer details show the visitor and the merchant.
    const host = visitorTab.page;
    const openPanel = async (): Promise<Frame> => {
      await host.locator('parley-widget').getByRole('button').click();
      const iframe = host.locator('parley-widget iframe');
      await iframe.waitFor({ state: 'attached' });
      const frame = await (await iframe.elementHandle())?.contentFrame();
      if (!frame) throw new Error('the widget has no panel frame');
      await frame.locator('#main[data-visitor-id]').waitFor({ state: 'attached', timeout: 15_000 });
      return frame;
    };
    const showDetails = async () => {
      await host.locator('#developer-details summary').click();
      await host.locator('#visitor-facts dd').first().waitFor();
    };
    try {
      await openWorkbenchOnline(agent, t, 'alice');

      // The visitor arrives, then gets a hostile nickname and attribute; the reload shows them.
      await host.goto(`${t.url}/visitor/?appkey=demo-appkey`);
      let visitor = await openPanel();
      const uid = (await visitor.locator('#main').getAttribute('data-visitor-id')) ?? '';
      await t.app.deps.db.update(visitors).set({ nickname: value.visitorNickname }).where(eq(visitors.id, uid));
      await t.app.deps.db
        .insert(visitorAttributes)
        .values({ visitorId: uid, key: 'hostile', value: value.attributeValue });
      // Both pages load them afresh (the workbench listed the visitor under its first name).
      await Promise.all([host.reload(), agent.reload()]);
      visitor = await openPanel();
      await Promise.all([live(visitor), live(agent)]);
      await expect
        .poll(() => visitor.locator('#chat-state').getAttribute('data-state'), { timeout: 20_000 })
        .toBe('active');
      await showDetails();

      expect(await textOf(host, '#visitor-nickname')).toBe(value.visitorNickname);
      expect(await textOf(host, '#merchant-name')).toBe(value.appname);
      expect(await host.title()).toBe(`${value.appname} · Parley chat`);
      expect(await host.locator('#visitor-attributes dt').allTextContents()).toContain(value.attributeLabel);
      expect(await host.locator('#visitor-attributes dd').allTextContents()).toContain(value.attributeValue);
      expect(await textOf(visitor, '#merchant-name')).toBe(value.appname);
      expect(await textOf(visitor, '#chat-state')).toBe(`Chatting with ${value.agentNickname}`);

      // The workbench: its own nickname, the merchant, the visitor's name in the list and heading.
      expect(await textOf(agent, '#agent-nickname')).toBe(value.agentNickname);
      expect(await textOf(agent, '#merchant-name')).toBe(value.appname);
      const row = agent.locator(`#conversation-list li[data-uid="${uid}"]`);
      await row.waitFor();
      expect(await row.locator('.conversation-name').textContent()).toBe(value.visitorNickname);
      await row.locator('.conversation-open').click();
      await agent.waitForSelector('#chat-state[data-state="active"]', { state: 'attached' });
      expect(await textOf(agent, '#chat-heading')).toBe(`Chat with ${value.visitorNickname}`);

      // Messages from both sides, live and from the history (after a reload).
      await say(visitor, value.visitorMessage);
      await say(agent, value.agentMessage);
      for (const page of [agent, visitor]) {
        await expect
          .poll(() => page.locator('#messages li[data-message-id] .message-text').allTextContents(), {
            timeout: 20_000,
          })
          .toEqual(expect.arrayContaining([value.visitorMessage, value.agentMessage]));
        // Issue 27 row 8: each message's text is isolated (dir="auto") on both pages, so the
        // right-to-left override inside it cannot reorder what surrounds it.
        const dirs = await page
          .locator('#messages li[data-message-id] .message-text')
          .evaluateAll((texts) => texts.map((text) => text.getAttribute('dir')));
        expect(dirs.length).toBeGreaterThanOrEqual(2);
        expect(new Set(dirs)).toEqual(new Set(['auto']));
      }

      // An attachment with a hostile file name, sent by the visitor.
      await visitor.getByLabel('Attach a file').setInputFiles({
        name: hostileFileName,
        mimeType: 'text/plain',
        buffer: Buffer.from('hello\n'),
      });
      await visitor.waitForSelector('#attachment-result[data-verdict="sent"]');
      // The server sanitises the name (bidi controls, length); the pages show what it stored, markup included.
      const [stored] = await t.app.deps.db.select({ name: attachments.name }).from(attachments);
      expect(stored?.name).toContain('<img src=x onerror=window.__pwned=1>');
      for (const page of [agent, visitor]) {
        const link = page.locator('#messages a.attachment-link.file').last();
        await link.waitFor();
        expect(await link.textContent()).toBe(`${stored?.name} (6 B)`);
        expect(await link.getAttribute('download')).toBe(stored?.name);
      }

      await Promise.all([agent.reload(), host.reload()]);
      visitor = await openPanel();
      await Promise.all([live(agent), live(visitor)]);
      await visitor.locator('#messages a.attachment-link.file').waitFor();
      expect(await visitor.locator('#messages li[data-message-id] .message-text').allTextContents()).toEqual(
        expect.arrayContaining([value.visitorMessage, value.agentMessage]),
      );

      await assertInert(agentTab);
      await assertInert(visitorTab);
    } finally {
      await Promise.all([agentTab.close(), visitorTab.close()]);
    }
  }, 120_000);

  it('the server-rendered ticket page escapes the agent nickname it writes into the HTML', async () => {
    const tab = await hostileTab();
    try {
      await logInWithApi(tab.page, t, 'tom');
      await tab.page.goto(`${t.url}/agent/ticket`);
      expect(await textOf(tab.page, '#ticket-heading')).toBe(`Signed in as ${value.ticketNickname}`);
      await assertInert(tab);
    } finally {
      await tab.close();
    }
  });
});
