import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WIDGET_BUDGETS } from '../../src/pages/widget.js';
import { HttpClient } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { measureWidget } from '../support/widget-size.js';

// The widget over plain HTTP (docs/widget.md): what other origins may do with it, and its size budgets.
describe('the widget over HTTP', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('GET /widget.js is a script any origin may load, with the launcher words of every language filled in', async () => {
    const res = await new HttpClient(t.url).request('/widget.js');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(res.headers.get('cross-origin-resource-policy')).toBe('cross-origin');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const body = await res.text();
    expect(body).not.toContain('/*WORDS*/');
    expect(body).toContain('"launcher":"Chat with us"');
    expect(body).toContain('"zh-CN":{"launcher":"在线咨询"');
  });

  it('the panel may be framed by any site (frame-ancestors *) and keeps the pages’ strict policy otherwise', async () => {
    const res = await new HttpClient(t.url).request('/widget/frame?appkey=demo-appkey');
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain('frame-ancestors *');
    expect(csp).toContain("script-src 'self';");
    expect(csp).toContain("style-src 'self';");
    expect(csp).toContain(`connect-src 'self' ${t.wsUrl.replace('/graphql', '')}`);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(res.headers.get('x-frame-options')).toBeNull();
    expect(res.headers.get('cache-control')).toBe('no-store');
    // Every other page still refuses to be framed by another site.
    const visitor = await new HttpClient(t.url).request('/visitor/?appkey=demo-appkey');
    expect(visitor.headers.get('content-security-policy')).toContain("frame-ancestors 'self'");
    expect(visitor.headers.get('x-frame-options')).toBe('SAMEORIGIN');
  });

  it('the /visitor/ demo embeds the merchant snippet with its appkey, escaped', async () => {
    const res = await new HttpClient(t.url).request('/visitor/?appkey=%22%3E%3Cscript%3E');
    const html = await res.text();
    expect(html).toContain('<script src="/widget.js" data-appkey="&quot;&gt;&lt;script&gt;" async></script>');
  });

  it(`size budgets: the loader at most ${WIDGET_BUDGETS.loader} B gzipped, the panel at most ${WIDGET_BUDGETS.panel} B`, async () => {
    const sizes = await measureWidget(t.url);
    console.info(
      `widget sizes (gzipped): loader ${sizes.loaderGzipped} B; panel ${sizes.panelGzipped} B in ${sizes.panel.length} files\n` +
        sizes.panel.map((f) => `  ${f.path} ${f.bytes} B -> ${f.gzipped} B`).join('\n'),
    );
    expect(sizes.panel.map((f) => f.path)).toEqual(
      expect.arrayContaining([
        '/assets/widget.js',
        '/assets/vendor/parley-client.js',
        '/assets/vendor/graphql-ws/client.js',
      ]),
    );
    expect(sizes.loaderGzipped).toBeLessThanOrEqual(WIDGET_BUDGETS.loader);
    expect(sizes.panelGzipped).toBeLessThanOrEqual(WIDGET_BUDGETS.panel);
  });
});
