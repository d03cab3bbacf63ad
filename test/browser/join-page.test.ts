import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { expectNoSeriousViolations } from '../support/axe.js';
import { type BrowserTab, describeInBrowser, screenshot, useBrowserApp, useTab } from '../support/browser.js';
import { CAPTCHA, type TestApp } from '../support/test-app.js';

/** A stand-in SMS gateway for SMS_DRIVER=webhook: it keeps the codes it was asked to send. */
async function smsGateway() {
  const codes = new Map<string, string>();
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      const { mobile, code } = JSON.parse(body) as { mobile: string; code: string };
      codes.set(mobile, code);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/sms`,
    codes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describeInBrowser('registration page in a real browser (SMS registration on)', () => {
  let t: TestApp;
  let gateway: Awaited<ReturnType<typeof smsGateway>>;
  let browser: Browser;
  let tab: BrowserTab;
  let page: Page;

  beforeAll(async () => {
    gateway = await smsGateway();
  });
  afterAll(async () => {
    await gateway?.close();
  });
  useBrowserApp(
    (made) => ({ t, browser } = made),
    () => ({
      env: { REGISTRATION: 'on', SMS_REGISTRATION: 'on', SMS_DRIVER: 'webhook', SMS_WEBHOOK_URL: gateway.url },
    }),
  );
  useTab(
    () => browser,
    (made) => ({ tab, page } = made),
  );

  const sendCode = async (mobile: string) => {
    await page.getByLabel(/mobile number/i).fill(mobile);
    await page.getByRole('textbox', { name: /captcha/i }).fill(CAPTCHA);
    await page.getByRole('button', { name: 'Send SMS code' }).click();
  };

  it('sends the SMS code with the join captcha, counts down, refuses a wrong code, then registers with the right one', async () => {
    await page.goto(`${t.url}/agent/join`);
    expect(await page.locator('#join-scope').textContent()).toContain('creates the merchant');
    await page.getByLabel('Business name').fill('Join Test Shop');
    await page.getByLabel(/^Username/).fill('join-test-owner');
    await page.getByLabel('Your name').fill('Jo');
    await page.getByLabel(/^Password/).fill('join-test-password');
    const before = await page.locator('#captcha-image').getAttribute('src');
    const mobile = '13800138000';
    await sendCode(mobile);

    await page.getByText('SMS code sent').waitFor();
    await expectNoSeriousViolations(page, 'the registration page, SMS code sent');
    const send = page.locator('#sms-send');
    expect(await send.isDisabled()).toBe(true);
    expect(await send.textContent()).toMatch(/^Resend in \d+ s$/);
    // The join captcha was used up by the send: cleared and replaced.
    expect(await page.getByRole('textbox', { name: /captcha/i }).inputValue()).toBe('');
    expect(await page.locator('#captcha-image').getAttribute('src')).not.toBe(before);

    const code = gateway.codes.get(mobile);
    expect(code).toMatch(/^\d{6}$/);
    const wrong = code === '000000' ? '111111' : '000000';
    await page.getByLabel('SMS code').fill(wrong);
    await page.getByRole('button', { name: 'Register' }).click();
    await page
      .getByRole('alert')
      .getByText(/wrong sms code/i)
      .waitFor();

    await page.getByLabel('SMS code').fill(code as string);
    await page.getByRole('button', { name: 'Register' }).click();
    // Registered and logged in as the new merchant's admin.
    await page.waitForURL(`${t.url}/agent/admin`);
    await page.locator('#agents tr[data-agent="join-test-owner"]').waitFor();
    await screenshot(page, 'join-registered');
    await expectNoSeriousViolations(page, 'the admin page of a new merchant');
    expect(tab.problems).toEqual([]);
  });

  it("when sending is rate limited, the server's msg is shown and the button waits", async () => {
    await page.goto(`${t.url}/agent/join`);
    await sendCode('13900139000');
    await page.getByText('SMS code sent').waitFor();

    // A second send from the same browser Session within the limit window.
    await page.reload();
    await sendCode('13700137000');
    const alert = page.getByRole('alert');
    await alert.getByText(/too many sms requests/i).waitFor();
    expect(await alert.textContent()).toMatch(/wait \d+ seconds/);
    expect(await page.locator('#sms-send').isDisabled()).toBe(true);
    expect(await page.locator('#sms-send').textContent()).toMatch(/^Resend in \d+ s$/);
    await screenshot(page, 'join-rate-limited');
  });
});
