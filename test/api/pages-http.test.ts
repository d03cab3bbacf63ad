import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, HttpClient } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

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

  it('unknown JSON paths under /agent/* answer -1 without a Session and 404 with one', async () => {
    const anonymous = await new HttpClient(t.url).json('/agent/no/such/thing');
    expect(anonymous.body.code).toBe(-1);
    const { client } = await agentSession(t.url, 'alice');
    const known = await client.json('/agent/no/such/thing');
    expect(known.status).toBe(404);
    expect(known.body.code).toBe(1404);
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
});
