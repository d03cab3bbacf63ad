import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { escapeHtml, render } from '../../src/pages/routes.js';
import { agentSession, HttpClient } from '../support/clients.js';
import { startTestApp, type TestApp, withClockAhead } from '../support/test-app.js';

// What the pages promise over plain HTTP; these run with or without a browser.
const VIEWS = join(import.meta.dirname, '..', '..', 'src', 'pages', 'views');

describe('pages over HTTP', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('GET /agent/ with no login Session redirects to the login page', async () => {
    const res = await new HttpClient(t.url).request('/agent/');
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/agent/login');
  });

  it('a ticket_agent is redirected to the ticket entry; a logged-in agent skips the login form', async () => {
    const tom = await agentSession(t.url, 'tom');
    const workbench = await tom.client.request('/agent/');
    expect(workbench.status).toBe(303);
    expect(workbench.headers.get('location')).toBe('/agent/ticket');
    const ticket = await tom.client.request('/agent/ticket');
    expect(ticket.status).toBe(200);
    expect(await ticket.text()).toContain('Signed in as Tom');

    const alice = await agentSession(t.url, 'alice');
    expect((await alice.client.request('/agent/')).status).toBe(200);
    const login = await alice.client.request('/agent/login');
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/agent/');
  });

  it('the admin page is for admins only, and names their merchant; any other agent goes to its own entry', async () => {
    const anonymous = await new HttpClient(t.url).request('/agent/admin');
    expect(anonymous.status).toBe(303);
    expect(anonymous.headers.get('location')).toBe('/agent/login');

    const ada = await agentSession(t.url, 'ada');
    const page = await ada.client.request('/agent/admin');
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(await page.text()).toContain(
      '<span class="merchant-name">Demo Shop</span> · <code id="merchant-bid">demo</code>',
    );

    for (const [username, entry] of [
      ['alice', '/agent/'],
      ['tom', '/agent/ticket'],
    ] as const) {
      const { client } = await agentSession(t.url, username);
      const res = await client.request('/agent/admin');
      expect(res.status, username).toBe(303);
      expect(res.headers.get('location'), username).toBe(entry);
    }
  });

  it('a Session past its absolute lifetime counts as none: the login form again, the pages redirect to it', async () => {
    const { client } = await agentSession(t.url, 'alice');
    expect((await client.request('/agent/')).status).toBe(200);
    await withClockAhead(t, (t.config.sessionAbsoluteTtlSeconds + 60) * 1000, async () => {
      const login = await client.request('/agent/login');
      expect(login.status).toBe(200);
      expect(await login.text()).toContain('<form');
    });
    // The expired Session was ended, not merely skipped: it stays gone with the clock back.
    for (const path of ['/agent/', '/agent/ticket', '/agent/admin']) {
      const res = await client.request(path);
      expect(res.status, path).toBe(303);
      expect(res.headers.get('location'), path).toBe('/agent/login');
    }
  });

  it('the join page says whether registration and SMS registration are open (both off by default)', async () => {
    const html = await (await new HttpClient(t.url).request('/agent/join')).text();
    expect(html).toContain('data-sms-registration="off" data-registration="off"');
  });

  it('the pages install their test hooks outside production only', async () => {
    const html = await (await new HttpClient(t.url).request('/visitor/?appkey=demo-appkey')).text();
    expect(html).toContain('<html lang="en" data-test-hooks="on">');
  });

  it('template values are written as text: every HTML-special character escaped, the appkey trimmed and bounded', async () => {
    const hostile = `'&"<b>`;
    const res = await new HttpClient(t.url).request(`/visitor/?appkey=${encodeURIComponent(`  ${hostile}  `)}`);
    expect(await res.text()).toContain('data-appkey="&#39;&amp;&quot;&lt;b&gt;"');
    const long = await new HttpClient(t.url).request(`/visitor/?appkey=${'k'.repeat(300)}`);
    expect(await long.text()).toContain(`data-appkey="${'k'.repeat(128)}"`);
    const none = await new HttpClient(t.url).request('/visitor/');
    expect(await none.text()).toContain('data-appkey=""');
  });

  it('unknown JSON paths under /agent/* answer -1 without a Session and 404 with one', async () => {
    const anonymous = await new HttpClient(t.url).json('/agent/no/such/thing');
    expect(anonymous.body.code).toBe(-1);
    const { client } = await agentSession(t.url, 'alice');
    const known = await client.json('/agent/no/such/thing');
    expect(known.status).toBe(404);
    expect(known.body).toEqual({ code: 1404, msg: 'Not found', data: [] });
  });

  it('every page is sent with a Content-Security-Policy allowing this server (and its WebSocket) only', async () => {
    for (const path of ['/agent/login', '/agent/join', '/visitor/?appkey=demo-appkey']) {
      const res = await new HttpClient(t.url).request(path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("script-src 'self';");
      expect(csp).toContain("style-src 'self';");
      expect(csp).toContain("img-src 'self' blob:;");
      expect(csp).toContain(`connect-src 'self' ${t.wsUrl.replace('/graphql', '')}`);
      expect(csp).toContain("object-src 'none'");
      expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('x-frame-options')).toBe('SAMEORIGIN');
      expect(res.headers.get('referrer-policy')).toBe('no-referrer');
      expect(res.headers.get('cache-control')).toBe('no-store');
    }
  });

  it('pages load no script, style or font from outside the server, and have no inline script or style', () => {
    for (const file of readdirSync(VIEWS)) {
      const html = readFileSync(join(VIEWS, file), 'utf8');
      expect(html, file).not.toMatch(/(src|href)="(https?:)?\/\//);
      expect(html, file).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
      expect(html, file).not.toMatch(/<style|\sstyle="/);
    }
  });

  it('serves the graphql-ws browser client and the avatars of the demo data', async () => {
    const client = new HttpClient(t.url);
    const ws = await client.request('/assets/vendor/graphql-ws/client.js');
    expect(ws.status).toBe(200);
    expect(ws.headers.get('content-type')).toMatch(/^text\/javascript/);
    const source = await ws.text();
    expect(source).toContain('function createClient');
    // Its one import, resolved relative to it, is served as well.
    const chunk = /from '\.\/(common-[\w-]+\.js)'/.exec(source)?.[1];
    expect(chunk).toBeDefined();
    expect((await client.request(`/assets/vendor/graphql-ws/${chunk}`)).status).toBe(200);
    expect((await client.request('/assets/vendor/graphql-ws/package.json')).status).toBe(404);
    // Only the browser client and its chunk: the package's server code and CommonJS builds are not served.
    for (const file of ['index.js', 'client.cjs', 'client.d.ts'])
      expect((await client.request(`/assets/vendor/graphql-ws/${file}`)).status, file).toBe(404);
    // A chunk name that is not there is a plain 404, not a server error.
    const missing = await client.request('/assets/vendor/graphql-ws/common-nosuch.js');
    expect(missing.status).toBe(404);
    expect(t.logs.filter((l) => Number(l.level) >= 50)).toEqual([]);

    for (const asset of [
      'avatar-alice.svg',
      'avatar-tom.svg',
      'avatar-dave.svg',
      'avatar-bob.svg',
      'avatar-ada.svg',
      'member-card-gold.svg',
      'member-card-silver.svg',
    ]) {
      const res = await client.request(`/assets/${asset}`);
      expect(res.status, asset).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
    }
  });

  it('serves the Parley client to the pages with its graphql-ws import pointed at the served browser build', async () => {
    const res = await new HttpClient(t.url).request('/assets/vendor/parley-client.js');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    const source = await res.text();
    expect(source).toContain("from '/assets/vendor/graphql-ws/client.js'");
    expect(source).not.toContain("from 'graphql-ws'");
  });

  it('offers the client package as a gzip download', async () => {
    const res = await new HttpClient(t.url).request('/client/parley-client.tgz');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/gzip');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="parley-client.tgz"');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    const bytes = Buffer.from(await res.arrayBuffer());
    expect([...bytes.subarray(0, 2)]).toEqual([0x1f, 0x8b]);
  });

  it('assets are revalidated on every load (no-cache and an ETag), with no directory listing or redirect', async () => {
    const client = new HttpClient(t.url);
    const css = await client.request('/assets/parley.css');
    expect(css.status).toBe(200);
    expect(css.headers.get('cache-control')).toBe('no-cache');
    const etag = css.headers.get('etag');
    expect(etag).toBeTruthy();
    // A browser's revalidation (fetch would add `Cache-Control: no-cache` to a conditional request of its own).
    const again = await client.request('/assets/parley.css', {
      headers: { 'if-none-match': etag ?? '', 'cache-control': 'max-age=0' },
    });
    expect(again.status).toBe(304);
    for (const path of ['/assets/', '/assets/vendor']) {
      const res = await client.request(path);
      expect(res.status, path).toBe(404);
      expect(res.headers.get('location'), path).toBeNull();
    }
  });
});

describe('pages over HTTP in production, with registration open', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      config: { env: 'production', demoSeed: false, registration: true, smsRegistration: true },
    });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('no page installs its test hooks', async () => {
    for (const path of ['/visitor/?appkey=demo-appkey', '/widget/frame?appkey=demo-appkey']) {
      const html = await (await new HttpClient(t.url).request(path)).text();
      expect(html, path).toContain('<html lang="en" data-test-hooks="off">');
    }
  });

  it('the join page says both registrations are open', async () => {
    const html = await (await new HttpClient(t.url).request('/agent/join')).text();
    expect(html).toContain('data-sms-registration="on" data-registration="on"');
  });
});

describe('page templates', () => {
  it('render fills each placeholder with its value as text, and an unknown placeholder with nothing', () => {
    expect(render('<p title="{{a}}">{{a}}{{missing}}</p>', { a: `<i>'&"` })).toBe(
      '<p title="&lt;i&gt;&#39;&amp;&quot;">&lt;i&gt;&#39;&amp;&quot;</p>',
    );
    expect(escapeHtml('plain text')).toBe('plain text');
  });
});
