import { writeFile } from 'node:fs/promises';
import { chromium } from 'playwright-core';
import sharp from 'sharp';
import { startGatewayProcess, stopProcess } from './gateway-process.js';

/**
 * `npm run docs:screenshot`: the workbench picture of docs/pages.md (docs/workbench.png). Starts
 * the gateway with the demo data, logs alice in with Debian's Chromium (CHROMIUM_PATH, default
 * /usr/bin/chromium; nothing is downloaded), opens Lily's conversation (王先生's waits with 3 unread) and saves a small PNG
 * (960 px wide, a 128-colour palette).
 */
const OUT = new URL('../docs/workbench.png', import.meta.url);
const CAPTCHA = 'test1';

const { child, url } = await startGatewayProcess({ CAPTCHA_TEST_ANSWER: CAPTCHA });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
try {
  const context = await browser.newContext({
    viewport: { width: 1280, height: 760 },
    locale: 'en-US',
    colorScheme: 'light',
  });
  const page = await context.newPage();
  await context.request.get(`${url}/agent/login/logincaptcha?rand=1`);
  const login = await context.request.post(`${url}/agent/login/check`, {
    form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA },
  });
  if (((await login.json()) as { code: number }).code !== 0) throw new Error('alice could not log in');
  await page.goto(`${url}/agent/`);
  await page.waitForSelector('#connection-status[data-state="live"]', { state: 'attached', timeout: 30_000 });
  await page.locator('.conversation-open', { hasText: 'Lily' }).click();
  await page.locator('#messages li[data-message-id]').first().waitFor();
  await page.waitForTimeout(500); // the read receipt's reload settles
  const shot = await page.screenshot({ fullPage: false });
  const png = await sharp(shot)
    .resize({ width: 960 })
    .png({ palette: true, colours: 128, compressionLevel: 9 })
    .toBuffer();
  await writeFile(OUT, png);
  console.log(`wrote docs/workbench.png (${png.length} bytes)`);
} finally {
  await browser.close();
  await stopProcess(child);
}
