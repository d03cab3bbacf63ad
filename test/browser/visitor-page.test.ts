import { eq } from 'drizzle-orm';
import type { Browser, Frame, Page } from 'playwright-core';
import { expect, it } from 'vitest';
import { merchants } from '../../src/db/schema.js';
import { expectNoSeriousViolations } from '../support/axe.js';
import {
  type BrowserTab,
  describeInBrowser,
  publish,
  screenshot,
  useBrowserApp,
  useTab,
  waitForSubscription,
  waitUntilLive,
} from '../support/browser.js';
import type { TestApp } from '../support/test-app.js';

const poll = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 20_000, interval: 100 });

describeInBrowser('visitor chat page in a real browser', () => {
  let t: TestApp;
  let browser: Browser;
  let tab: BrowserTab;
  let page: Page;

  useBrowserApp((made) => ({ t, browser } = made));
  useTab(
    () => browser,
    (made) => ({ tab, page } = made),
  );

  /** Opens /visitor/ (the host page), then the widget's panel; answers the panel's frame. */
  const openChat = async (appkey = 'demo-appkey'): Promise<Frame> => {
    await page.goto(`${t.url}/visitor/?appkey=${appkey}`);
    const launcher = page.locator('parley-widget').getByRole('button');
    await launcher.waitFor();
    // Nothing of the panel exists before the visitor opens it: the loader alone costs the host page.
    expect(await page.locator('parley-widget iframe').count()).toBe(0);
    await launcher.click();
    const frame = await (await page.locator('parley-widget iframe').elementHandle())?.contentFrame();
    if (!frame) throw new Error('no panel frame');
    await waitUntilLive(frame);
    return frame;
  };

  it('the host page embeds the widget; its developer details show the visitor, the switches and the events of its channel', async () => {
    const panel = await openChat();
    expect(await panel.locator('#merchant-name').textContent()).toBe('Demo Shop');
    expect(await page.locator('#snippet').textContent()).toContain('/widget.js" data-appkey="demo-appkey" async>');

    // The details are behind a toggle; the panel's visitor shows there once the panel created it.
    expect(await page.locator('#visitor-facts').isVisible()).toBe(false);
    await page.getByText('Developer details').click();
    await page.locator('#visitor-channel').waitFor();
    expect(await page.locator('#merchant-name').textContent()).toBe('Demo Shop');
    expect(await page.locator('#visitor-nickname').textContent()).not.toBe('');
    expect(await page.locator('#visitor-facts dd').first().textContent()).toBe(
      await panel.locator('#main').getAttribute('data-visitor-id'),
    );
    const switches = page.locator('#switches');
    expect(await switches.textContent()).toContain('Image uploads');
    expect(await switches.locator('dd.switch.on').count()).toBe(7);
    expect(await page.locator('#upload-limits').textContent()).toContain('20 MB');

    const channel = (await page.locator('#visitor-channel').textContent()) ?? '';
    expect(channel).toMatch(/^visitor-/);
    await waitForSubscription(page, t, channel);
    const first = await publish(t, channel, 'shop.hello', { from: 'agent', text: 'Hello, how can I help?' });
    const item = page.locator(`#event-feed li[data-event-id="${first.id}"]`);
    await item.waitFor();
    expect(await item.textContent()).toContain('Hello, how can I help?');
    const second = await publish(t, channel, 'shop.typing', { typing: true });
    await page.locator(`#event-feed li[data-event-id="${second.id}"]`).waitFor();
    await screenshot(page, 'visitor-chat');
    expect(tab.problems).toEqual([]);
  });

  it('the attachment picker rejects a file over upload_limits before anything is sent', async () => {
    await t.app.deps.db.update(merchants).set({ fileMaxBytes: 1024 }).where(eq(merchants.bid, 'demo'));
    t.app.deps.configCache.invalidate(); // the bootstrap reads the merchant through the configuration cache
    try {
      const panel = await openChat();
      expect(await panel.locator('#attachment-rules').textContent()).toContain('files up to 1.0 KB');

      const sent: string[] = [];
      page.on('request', (request) => sent.push(`${request.method()} ${request.url()}`));
      await panel.getByLabel('Attach a file').setInputFiles({
        name: 'report.pdf',
        mimeType: 'application/pdf',
        buffer: Buffer.alloc(4096, 1),
      });
      const result = panel.locator('#attachment-result');
      await result.waitFor();
      expect(await result.getAttribute('data-verdict')).toBe('rejected');
      expect(await result.textContent()).toContain('report.pdf (4.0 KB) was not sent');
      expect(await result.textContent()).toContain('limit of 1.0 KB for files');
      expect(await panel.getByLabel('Attach a file').inputValue()).toBe('');
      await screenshot(page, 'visitor-attachment-rejected');

      // The oversized file was refused in the page: no upload left it.
      expect(sent.filter((r) => r.includes('/upload'))).toEqual([]);
      await panel.getByLabel('Attach a file').setInputFiles({
        name: 'note.txt',
        mimeType: 'text/plain',
        buffer: Buffer.from('small enough'),
      });
      // A file within the limits is uploaded for real, then sent as a message.
      await panel.waitForSelector('#attachment-result[data-verdict="sent"]');
      expect(await result.textContent()).toBe('note.txt was sent.');
      expect(sent).toContain(`POST ${t.url}/visitor/upload`);
      expect(await panel.locator('#messages a.attachment-link.file').textContent()).toContain('note.txt');
      expect(tab.problems).toEqual([]);
    } finally {
      await t.app.deps.db.update(merchants).set({ fileMaxBytes: 20971520 }).where(eq(merchants.bid, 'demo'));
      t.app.deps.configCache.invalidate();
    }
  });

  it('an upload switch turned off refuses that kind of file', async () => {
    const [demo] = await t.app.deps.db.select().from(merchants).where(eq(merchants.bid, 'demo'));
    const switches = demo!.switches;
    await t.app.deps.db
      .update(merchants)
      .set({ switches: { ...switches, upload_img: 'off' } })
      .where(eq(merchants.bid, 'demo'));
    t.app.deps.configCache.invalidate();
    try {
      const panel = await openChat();
      await panel.getByLabel('Attach a file').setInputFiles({
        name: 'photo.png',
        mimeType: 'image/png',
        buffer: Buffer.alloc(64),
      });
      await panel.waitForSelector('#attachment-result[data-verdict="rejected"]');
      expect(await panel.locator('#attachment-result').textContent()).toContain('images are not accepted here');
    } finally {
      await t.app.deps.db.update(merchants).set({ switches }).where(eq(merchants.bid, 'demo'));
      t.app.deps.configCache.invalidate();
    }
  });

  it('with nobody online the panel says the message is kept and asks for the contact details the merchant wants', async () => {
    await t.app.deps.db
      .update(merchants)
      .set({ contactFields: ['email'] })
      .where(eq(merchants.bid, 'demo'));
    t.app.deps.configCache.invalidate();
    try {
      // No agent has a workbench open in this file: nobody can answer.
      const panel = await openChat();
      const notice = panel.locator('#message-left[data-reason="no_agent"]');
      await notice.waitFor();
      expect(await notice.textContent()).toBe(
        'Nobody can answer right now. Write your message: it is kept, and an agent answers here.',
      );
      expect(await panel.locator('#contact-name').isHidden()).toBe(true);
      await panel.getByLabel('E-mail').fill('lily@example.com');
      await panel.getByRole('button', { name: 'Send my details' }).click();
      await poll(() => panel.locator('#contact-result').textContent()).toBe('Thank you: we will get back to you.');
      await expectNoSeriousViolations(page, 'the demo host page, panel open with a message left');
      expect(tab.problems).toEqual([]);
    } finally {
      await t.app.deps.db.update(merchants).set({ contactFields: [] }).where(eq(merchants.bid, 'demo'));
      t.app.deps.configCache.invalidate();
    }
  });

  it('an unknown appkey stops before the conversation and says why; no appkey asks for one', async () => {
    await page.goto(`${t.url}/widget/frame?appkey=no-such-appkey`);
    const alert = page.getByRole('alert').first();
    await alert.waitFor();
    expect(await alert.textContent()).not.toBe('');
    expect(await page.locator('#composer').isHidden()).toBe(true);
    await page.goto(`${t.url}/visitor/`);
    expect(await page.locator('#appkey-form').isVisible()).toBe(true);
    expect(await page.locator('parley-widget').count()).toBe(0);
  });
});
