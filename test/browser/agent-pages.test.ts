import type { Browser, Page } from 'playwright-core';
import { expect, it } from 'vitest';
import { expectNoSeriousViolations } from '../support/axe.js';
import {
  type BrowserTab,
  describeInBrowser,
  logInThroughPage,
  openWorkbenchLoggedIn,
  publish,
  screenshot,
  showDeveloperFeed,
  useBrowserApp,
  useTab,
  waitForSubscription,
  waitUntilLive,
} from '../support/browser.js';
import type { TestApp } from '../support/test-app.js';

/** The workbench's own bootstrap, read in the page the way its script reads it. */
const bootstrapOf = (page: Page) =>
  page.evaluate(async () => {
    const res = await fetch('/agent/data/get', { credentials: 'include' });
    return (await res.json()) as { code: number; data: { agent: { agent_id: string }; setting: { bid: string } } };
  });

describeInBrowser('agent pages in a real browser', () => {
  let t: TestApp;
  let browser: Browser;
  let tab: BrowserTab;
  let page: Page;

  useBrowserApp((made) => ({ t, browser } = made));
  useTab(
    () => browser,
    (made) => ({ tab, page } = made),
  );

  it('GET /agent/ with no login Session redirects to the login page', async () => {
    await page.goto(`${t.url}/agent/`);
    expect(new URL(page.url()).pathname).toBe('/agent/login');
    await page.getByRole('heading', { name: 'Agent login' }).waitFor();
    expect(await page.getByRole('button', { name: /captcha/i }).isVisible()).toBe(true);
    await screenshot(page, 'agent-login');
    await expectNoSeriousViolations(page, 'the login page');
    await page.emulateMedia({ colorScheme: 'dark' });
    await expectNoSeriousViolations(page, 'the login page, dark');
    expect(tab.problems).toEqual([]);
  });

  it('alice logs in with the captcha and sees the workbench: the demo conversations, pinned first, unread count', async () => {
    await logInThroughPage(page, t, 'alice');
    await page.waitForURL(`${t.url}/agent/`);
    await page.locator('.conversation').nth(1).waitFor();

    const conversations = page.locator('.conversation');
    expect(await conversations.count()).toBe(2);
    expect(await conversations.locator('.conversation-name').allTextContents()).toEqual(['Lily', '王先生']);
    expect(await conversations.nth(0).getAttribute('data-pinned')).toBe('true');
    expect(await conversations.nth(0).locator('.badge.pinned').textContent()).toBe('Pinned');
    const unread = conversations.nth(1).locator('.badge.unread');
    expect(await unread.locator('[aria-hidden="true"]').textContent()).toBe('3');
    expect(await unread.getAttribute('title')).toBe('3 unread');
    // Read out with the name: "王先生 3 unread".
    await page.getByRole('button', { name: '王先生 3 unread' }).waitFor();
    expect(await conversations.nth(1).getAttribute('data-unread')).toBe('3');
    expect(await page.title()).toBe('(3) Alice · Demo Shop · Parley');
    // Relative times, with the full date as the tooltip.
    const when = conversations.nth(1).locator('time.conversation-time');
    expect(await when.textContent()).toMatch(/now|ago/);
    expect(await when.getAttribute('title')).toMatch(/\d/);
    // The raw event feed is a developer's tool: hidden until its switch is on.
    expect(await page.locator('#live-panel').isHidden()).toBe(true);
    expect(await page.getByRole('checkbox', { name: 'Show the live event feed' }).isChecked()).toBe(false);

    expect(await page.locator('#agent-nickname').textContent()).toBe('Alice');
    expect(await page.locator('#agent-avatar').getAttribute('src')).toBe('/assets/avatar-alice.svg');
    expect(await page.locator('#agent-state').textContent()).toMatch(/\w+/);
    expect(await page.locator('#agent-groups li').allTextContents()).toEqual(['Default (default)', 'Sales']);
    await waitUntilLive(page);
    // Connected: the state shown is the one the server has now (presence), not the one before connecting.
    await page.waitForSelector('#agent-state[data-state="online"]', { state: 'attached' });
    await screenshot(page, 'agent-workbench');
    await expectNoSeriousViolations(page, 'the workbench, no conversation open');
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, 'agent-workbench-phone');
    expect(tab.problems).toEqual([]);
  });

  it('an event published to agent-{agent_id} and global-{bid} appears in the live feed', async () => {
    await openWorkbenchLoggedIn(page, t, 'alice');
    await waitUntilLive(page);
    const { data } = await bootstrapOf(page);
    await waitForSubscription(page, t, `agent-${data.agent.agent_id}`);
    await waitForSubscription(page, t, `global-${data.setting.bid}`);

    await showDeveloperFeed(page);
    const personal = await publish(t, `agent-${data.agent.agent_id}`, 'shop.test', { text: 'Hello Alice' });
    const item = page.locator(`#event-feed li[data-event-id="${personal.id}"]`);
    await item.waitFor();
    expect(await item.textContent()).toContain('Hello Alice');
    expect(await item.getAttribute('data-channel')).toBe(`agent-${data.agent.agent_id}`);

    const global = await publish(t, `global-${data.setting.bid}`, 'shop.broadcast', { text: 'Hello team' });
    await page.locator(`#event-feed li[data-event-id="${global.id}"]`).waitFor();
    await screenshot(page, 'agent-workbench-event');
    await expectNoSeriousViolations(page, 'the workbench with the developer feed on');
    // The switch is remembered: after a reload the feed is still shown.
    await page.reload();
    await page.locator('#live-panel').waitFor();
    expect(await page.getByRole('checkbox', { name: 'Show the live event feed' }).isChecked()).toBe(true);
    expect(tab.problems).toEqual([]);
  });

  it('after a network drop the workbench reconnects, resubscribes with since and shows the missed event', async () => {
    await openWorkbenchLoggedIn(page, t, 'alice');
    await waitUntilLive(page);
    const { data } = await bootstrapOf(page);
    const channel = `agent-${data.agent.agent_id}`;
    await waitForSubscription(page, t, channel);
    await showDeveloperFeed(page);

    const seen = await publish(t, channel, 'shop.before', { n: 1 });
    await page.locator(`#event-feed li[data-event-id="${seen.id}"]`).waitFor();

    await page.evaluate(() => (window as unknown as { __parley: { dropSocket(): void } }).__parley.dropSocket());
    await page.waitForSelector('#connection-status[data-state="reconnecting"]', { state: 'attached' });
    await page.locator('#event-feed li[data-note="disconnected"]').waitFor();

    const missed = await publish(t, channel, 'shop.missed', { text: 'sent while offline' });
    await page.evaluate(() => (window as unknown as { __parley: { restoreSocket(): void } }).__parley.restoreSocket());

    const note = page.locator('#event-feed li[data-note="resubscribed"]');
    await note.waitFor({ timeout: 15_000 });
    expect(await note.textContent()).toContain(`${channel} since ${seen.id}`);
    await page.locator(`#event-feed li[data-event-id="${missed.id}"]`).waitFor();
    expect(await page.locator(`#event-feed li[data-event-id="${missed.id}"]`).count()).toBe(1);
    await waitUntilLive(page);
    await screenshot(page, 'agent-workbench-reconnected');
    expect(tab.problems).toEqual([]);
  });

  it('a failed login shows the msg, clears the captcha input and loads a new captcha image', async () => {
    await page.goto(`${t.url}/agent/login`);
    const image = page.locator('#captcha-image');
    const before = await image.getAttribute('src');
    await page.getByLabel('Username').fill('alice');
    await page.getByLabel('Password').fill('alice-password');
    await page.getByRole('textbox', { name: /captcha/i }).fill('wrong');
    await page.getByRole('button', { name: 'Log in' }).click();

    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toMatch(/captcha/i);
    expect(await page.getByRole('textbox', { name: /captcha/i }).inputValue()).toBe('');
    const after = await image.getAttribute('src');
    expect(after).not.toBe(before);
    expect(after).toMatch(/^\/agent\/login\/logincaptcha\?rand=/);
    await page.waitForFunction(() => {
      const img = document.getElementById('captcha-image') as HTMLImageElement;
      return img.complete && img.naturalWidth > 0 && img.src.includes('rand=');
    });
    await screenshot(page, 'agent-login-failed');
    await expectNoSeriousViolations(page, 'the login page after a failed login');

    // The new image's captcha is the one that counts now.
    await page.getByRole('textbox', { name: /captcha/i }).fill('test1');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${t.url}/agent/`);
    expect(tab.problems).toEqual([]);
  });

  it('tom (ticket_agent) is sent to the ticket entry, also when he opens the workbench', async () => {
    await logInThroughPage(page, t, 'tom');
    await page.waitForURL(`${t.url}/agent/ticket`);
    await page.getByRole('heading', { name: 'Ticket entry' }).waitFor();
    expect(await page.locator('main').textContent()).toContain('Signed in as Tom');
    expect(await page.locator('main').textContent()).toContain('ticket work happens elsewhere');

    await page.goto(`${t.url}/agent/`);
    expect(new URL(page.url()).pathname).toBe('/agent/ticket');
    await screenshot(page, 'agent-ticket-entry');
    await expectNoSeriousViolations(page, 'the ticket entry');

    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(`${t.url}/agent/login`);
    expect(tab.problems).toEqual([]);
  });

  it('the registration page says registration is off (REGISTRATION defaults to off) and its form cannot be sent', async () => {
    await page.goto(`${t.url}/agent/join`);
    await page.getByRole('heading', { name: 'Register a merchant' }).waitFor();
    expect(await page.locator('#registration-off').isVisible()).toBe(true);
    expect(await page.locator('#registration-off').textContent()).toContain('Merchant registration is turned off');
    expect(await page.locator('#join-scope').isVisible()).toBe(false);
    expect(await page.getByRole('button', { name: 'Register', exact: true }).isDisabled()).toBe(true);
    await screenshot(page, 'join-registration-off');
    await expectNoSeriousViolations(page, 'the registration page, registration off');
    expect(tab.problems).toEqual([]);
  });

  it('when the Session ends (logout elsewhere) the workbench goes back to the login page', async () => {
    await openWorkbenchLoggedIn(page, t, 'alice');
    await waitUntilLive(page);
    const { data } = await bootstrapOf(page);
    await waitForSubscription(page, t, `agent-${data.agent.agent_id}`);
    // The Session is ended by a request the page's script did not make.
    await page.evaluate(() => fetch('/agent/logout', { method: 'POST', credentials: 'include' }));
    await page.waitForURL(`${t.url}/agent/login`, { timeout: 15_000 });
    await screenshot(page, 'agent-session-ended');
  });
});
