import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpClient } from '../support/clients.js';
import { CAPTCHA, startTestApp, type TestApp } from '../support/test-app.js';

// Issue 18 rows 2 and 4: CORS on /graphql from the Origin allowlist; login CSRF.
const SHOP = 'https://shop.example.com';
const SIBLING = 'https://evil.example.com';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ env: { ALLOWED_ORIGINS: SHOP } });
});
afterAll(() => t?.stop());

describe('CORS on /graphql: the same allowlist as the WebSocket Origin check', () => {
  it('an origin outside ALLOWED_ORIGINS gets no Access-Control-Allow-Origin and no credentials', async () => {
    const { token } = await loginAs('alice');
    const res = await fetch(`${t.url}/graphql?query=${encodeURIComponent('{ agentWorkbench { setting { bid } } }')}`, {
      headers: { origin: SIBLING, token, 'x-parley-csrf': '1' },
    });
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();
  });

  it('a preflight from an unlisted origin is answered without CORS headers', async () => {
    const res = await fetch(`${t.url}/graphql`, {
      method: 'OPTIONS',
      headers: {
        origin: SIBLING,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    expect(res.headers.get('access-control-allow-methods')).toBeNull();
  });

  it('a listed origin gets its own origin back (never a wildcard), with credentials', async () => {
    const pre = await fetch(`${t.url}/graphql`, {
      method: 'OPTIONS',
      headers: {
        origin: SHOP,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe(SHOP);
    expect(pre.headers.get('access-control-allow-headers')).toBe('content-type');
    const res = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { origin: SHOP, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe(SHOP);
    expect(res.headers.get('access-control-allow-credentials')).toBe('true');
    expect(res.headers.get('vary')).toMatch(/origin/i);
  });
});

describe('login CSRF: state-changing requests from outside the allowlist are refused', () => {
  it('a cross-site form posting the login with ?token=<attacker pre-login id> is refused and plants nothing', async () => {
    const attacker = new HttpClient(t.url);
    await attacker.captcha('login');
    const attackerSid = [...attacker.cookies.values()][0];
    expect(attackerSid).toBeDefined();
    const preLoginId = decodeURIComponent(attackerSid as string)
      .slice(2)
      .split('.')[0] as string;
    const victim = new HttpClient(t.url);
    const { status, body } = await victim.json(`/agent/login/check?token=${preLoginId}`, {
      method: 'POST',
      headers: { origin: SIBLING, 'sec-fetch-site': 'cross-site' },
      form: { username: 'tom', password: 'tom-password', captcha: CAPTCHA },
    });
    expect(status).toBe(403);
    expect(body).toEqual({ code: 1403, msg: expect.any(String), data: [] });
    expect(victim.cookies.size).toBe(0);
  });

  it('Sec-Fetch-Site cross-site or same-site without an Origin is refused too', async () => {
    for (const site of ['cross-site', 'same-site']) {
      const client = new HttpClient(t.url);
      await client.captcha('login');
      const { status } = await client.json('/agent/login/check', {
        method: 'POST',
        headers: { 'sec-fetch-site': site },
        form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA },
      });
      expect(status).toBe(403);
    }
  });

  it('a `null` Origin (sandboxed frame) is refused on every state-changing route', async () => {
    for (const path of ['/agent/logout', '/visitor/token', '/graphql']) {
      const res = await fetch(t.url + path, { method: 'POST', headers: { origin: 'null' } });
      expect(res.status, path).toBe(403);
    }
  });

  it('the login never adopts a Session ID chosen in the URL, even without browser headers', async () => {
    const attacker = new HttpClient(t.url);
    await attacker.captcha('login');
    const preLoginId = decodeURIComponent([...attacker.cookies.values()][0] as string)
      .slice(2)
      .split('.')[0];
    const victim = new HttpClient(t.url);
    const { body } = await victim.json(`/agent/login/check?token=${preLoginId}`, {
      method: 'POST',
      form: { username: 'tom', password: 'tom-password', captcha: CAPTCHA },
    });
    expect(body.code).toBe(1000);
    expect(victim.cookies.size).toBe(0);
  });

  it('same-origin pages, listed origins and non-browser clients still log in', async () => {
    for (const headers of [
      { origin: t.url, 'sec-fetch-site': 'same-origin' },
      { origin: SHOP, 'sec-fetch-site': 'cross-site' },
      {} as Record<string, string>,
    ]) {
      const client = new HttpClient(t.url);
      await client.captcha('login');
      const { body } = await client.json('/agent/login/check', {
        method: 'POST',
        headers,
        form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA },
      });
      expect(body.code, JSON.stringify(headers)).toBe(0);
    }
  });

  it('the token header still works for a non-browser client logging in under its captcha Session', async () => {
    const client = new HttpClient(t.url);
    await client.captcha('login');
    const sid = decodeURIComponent([...client.cookies.values()][0] as string)
      .slice(2)
      .split('.')[0] as string;
    const bare = new HttpClient(t.url);
    const { body } = await bare.json('/agent/login/check', {
      method: 'POST',
      headers: { token: sid },
      form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA },
    });
    expect(body.code).toBe(0);
  });
});

async function loginAs(username: string) {
  const client = new HttpClient(t.url);
  const { body } = await client.login(username);
  expect(body.code).toBe(0);
  return { client, token: body.data.token as string };
}
