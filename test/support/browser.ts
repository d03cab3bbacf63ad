import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, type BrowserContext, chromium, type Frame, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, it } from 'vitest';
import { CAPTCHA, INTERNAL_TOKEN, startTestApp, type TestApp } from './test-app.js';

/**
 * Debian's Chromium (`apt-get install chromium`), or another build named by CHROMIUM_PATH; the
 * tests never download a browser.
 */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
export const browserAvailable = existsSync(CHROMIUM_PATH);

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'test-results');

/**
 * `describe` for browser tests. Without Chromium the suite is skipped with a clear message, or
 * fails when REQUIRE_BROWSER=1 (CI), so a missing browser can never pass silently there.
 */
export function describeInBrowser(name: string, body: () => void) {
  if (browserAvailable) return describe(name, body);
  if (process.env.REQUIRE_BROWSER === '1') {
    return describe(name, () => {
      it(`needs Chromium at ${CHROMIUM_PATH}`, () => {
        throw new Error(`REQUIRE_BROWSER=1 but there is no Chromium at ${CHROMIUM_PATH} (apt-get install chromium)`);
      });
    });
  }
  console.warn(
    `\n[browser tests] SKIPPED "${name}": no Chromium at ${CHROMIUM_PATH}. ` +
      'Install it (apt-get install chromium) to run them; REQUIRE_BROWSER=1 turns this skip into a failure.\n',
  );
  return describe.skip(name, body);
}

/**
 * Headless Chromium. Playwright gives every launch a fresh, temporary user-data-dir, and each
 * test opens its own context (its own cookies and storage).
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS });
}

export interface BrowserTab {
  context: BrowserContext;
  page: Page;
  /** Script errors, console errors and Content-Security-Policy violations seen so far. */
  problems: string[];
  close(): Promise<void>;
}

/** A new isolated context with one page, recording anything that went wrong in it. */
export async function openTab(browser: Browser): Promise<BrowserTab> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, locale: 'en-US' });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    // A failed resource load says only its status: the location names the resource.
    if (message.type() === 'error') problems.push(`console: ${message.text()} (${message.location().url})`);
  });
  return { context, page, problems, close: () => context.close() };
}

type AppOptions = Parameters<typeof startTestApp>[0];

/**
 * The set-up of a browser test file, written once: before its tests, one gateway
 * (`startTestApp(options)`; a function is read then, after the file's earlier hooks) and one
 * Chromium (a launch costs about 2 s of CPU), handed to `use`, which keeps them in the file's
 * variables; after them, both stopped. Without Chromium nothing starts (`describeInBrowser`
 * skips the tests, or fails them in CI).
 */
export function useBrowserApp(
  use: (made: { t: TestApp; browser: Browser }) => unknown,
  options?: AppOptions | (() => AppOptions),
): void {
  let made: { t?: TestApp; browser?: Browser } = {};
  beforeAll(async () => {
    if (!browserAvailable) return;
    const [t, browser] = await Promise.allSettled([
      startTestApp(typeof options === 'function' ? options() : options),
      launchChromium(),
    ]);
    made = {
      t: t.status === 'fulfilled' ? t.value : undefined,
      browser: browser.status === 'fulfilled' ? browser.value : undefined,
    };
    if (t.status === 'rejected') throw t.reason;
    if (browser.status === 'rejected') throw browser.reason;
    use(made as { t: TestApp; browser: Browser });
  });
  afterAll(async () => {
    await made.browser?.close();
    await made.t?.stop();
  });
}

/** A fresh tab (its own context) for each test, handed to `use` with its page; closed after the test. */
export function useTab(browser: () => Browser, use: (made: { tab: BrowserTab; page: Page }) => unknown): void {
  let tab: BrowserTab | undefined;
  beforeEach(async () => {
    tab = await openTab(browser());
    use({ tab, page: tab.page });
  });
  afterEach(async () => {
    await tab?.close();
  });
}

/**
 * An agent's tab and a visitor's tab for each test, handed to `use`. After the test the visitor
 * leaves (its conversation closes, so the agent's capacity is free for the next test) and both
 * tabs close.
 */
export function useChatTabs(
  browser: () => Browser,
  use: (made: { agentTab: BrowserTab; visitorTab: BrowserTab; agent: Page; visitor: Page }) => unknown,
): void {
  let tabs: { agentTab: BrowserTab; visitorTab: BrowserTab } | undefined;
  beforeEach(async () => {
    const [agentTab, visitorTab] = await Promise.all([openTab(browser()), openTab(browser())]);
    tabs = { agentTab, visitorTab };
    use({ ...tabs, agent: agentTab.page, visitor: visitorTab.page });
  });
  afterEach(async () => {
    if (!tabs) return;
    await tabs.visitorTab.page
      .evaluate(async () => {
        const token = sessionStorage.getItem('parley.visitor-token:demo-appkey');
        if (token)
          await fetch('/visitor/chat/close', { method: 'POST', headers: { authorization: `Bearer ${token}` } });
      })
      .catch(() => {});
    await Promise.all([tabs.agentTab.close(), tabs.visitorTab.close()]);
  });
}

/** Waits until the page's socket is live (`#connection-status[data-state="live"]`). */
export const waitUntilLive = (page: Page | Frame) =>
  page.waitForSelector('#connection-status[data-state="live"]', { state: 'attached', timeout: 15_000 });

/** Saves a full-page screenshot as test-results/<name>.png. */
export async function screenshot(page: Page, name: string) {
  await mkdir(RESULTS_DIR, { recursive: true });
  await page.screenshot({ path: join(RESULTS_DIR, `${name}.png`), fullPage: true });
}

/** Logs in through the login page, the way a person does. */
export async function logInThroughPage(page: Page, t: TestApp, username: string, password = `${username}-password`) {
  await page.goto(`${t.url}/agent/login`);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('textbox', { name: /captcha/i }).fill(CAPTCHA);
  await page.getByRole('button', { name: 'Log in' }).click();
}

/**
 * Logs the tab's context in with the login API (captcha, then `POST /agent/login/check`), whose
 * Session cookie the context keeps: for tests about what follows a login. The login page itself
 * is tested through the page (`logInThroughPage`).
 */
export async function logInWithApi(page: Page, t: TestApp, username: string, password = `${username}-password`) {
  const request = page.context().request;
  await request.get(`${t.url}/agent/login/logincaptcha?rand=${Math.random()}`);
  const res = await request.post(`${t.url}/agent/login/check`, { form: { username, password, captcha: CAPTCHA } });
  const body = (await res.json()) as { code: number };
  if (body.code !== 0) throw new Error(`login as ${username} failed: ${res.status()} ${JSON.stringify(body)}`);
}

/** Logs in with the login API (`logInWithApi`) and opens the workbench. */
export async function openWorkbenchLoggedIn(
  page: Page,
  t: TestApp,
  username: string,
  password = `${username}-password`,
) {
  await logInWithApi(page, t, username, password);
  await page.goto(`${t.url}/agent/`);
}

/**
 * Logs in with the login API and opens the workbench, then waits until its socket is live and
 * the agent shows online: the start of every chat story.
 */
export async function openWorkbenchOnline(page: Page, t: TestApp, username: string) {
  await openWorkbenchLoggedIn(page, t, username);
  await waitUntilLive(page);
  await page.waitForSelector('#agent-state[data-state="online"]', { state: 'attached' });
}

/**
 * Drops, on the page's GraphQL socket, every `message.created` frame that carries `text` (the
 * rest pass): a message lost on the way, for the seq-jump recovery. Answers how many it dropped.
 */
export async function dropMessageFrames(page: Page, text: string): Promise<() => number> {
  let dropped = 0;
  await page.routeWebSocket(/\/graphql$/, (ws) => {
    const server = ws.connectToServer();
    server.onMessage((frame) => {
      if (typeof frame === 'string' && frame.includes('message.created') && frame.includes(text)) {
        dropped += 1;
        return;
      }
      ws.send(frame);
    });
  });
  return () => dropped;
}

/** Turns the workbench's developer switch on: the raw event feed shows (it is hidden by default). */
export async function showDeveloperFeed(page: Page) {
  await page.getByRole('checkbox', { name: 'Show the live event feed' }).check();
  await page.locator('#live-panel').waitFor();
}

/** Publishes an event through the internal API, as the services the spec leaves out do. */
export async function publish(t: TestApp, channel: string, event: string, data: unknown): Promise<{ id: string }> {
  const res = await fetch(`${t.url}/internal/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ channel, event, data }),
  });
  const body = (await res.json()) as { code: number; msg: string; data: { id: string } };
  if (body.code !== 0) throw new Error(`publish to ${channel} failed: ${res.status} ${JSON.stringify(body)}`);
  return body.data;
}

/**
 * Waits until the page's subscription to `channel` is in place on the server. graphql-ws does
 * not acknowledge a subscribe, so this publishes `test.probe` events until one shows in the
 * page's feed (probes published before the subscription started are simply never seen).
 */
export async function waitForSubscription(page: Page, t: TestApp, channel: string) {
  for (let attempt = 1; attempt <= 40; attempt++) {
    const probe = await publish(t, channel, 'test.probe', { attempt });
    const shown = await page
      .locator(`#event-feed li[data-event-id="${probe.id}"]`)
      // Attached, not visible: the workbench's feed is hidden unless its developer switch is on.
      .waitFor({ state: 'attached', timeout: 500 })
      .then(() => true)
      .catch(() => false);
    if (shown) return;
  }
  throw new Error(`the page never showed an event of ${channel}`);
}
