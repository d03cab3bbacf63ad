import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpClient } from '../support/clients.js';
import { CAPTCHA, startTestApp, type TestApp } from '../support/test-app.js';

// TRUST_PROXY lets each test come from an address of its own (X-Forwarded-For), so the
// per-address brute-force counter of one test never locks out another.
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ env: { TRUST_PROXY: 'on' } });
});
afterAll(() => t?.stop());

let lastIp = 0;
/** A client coming from an address no other test uses. */
function clientFromNewAddress() {
  const ip = `10.1.${Math.floor(++lastIp / 250)}.${(lastIp % 250) + 1}`;
  const client = new HttpClient(t.url);
  const request = client.request.bind(client);
  client.request = (path, init = {}) => {
    const headers = new Headers(init.headers);
    if (!headers.has('x-forwarded-for')) headers.set('x-forwarded-for', ip);
    return request(path, { ...init, headers });
  };
  return client;
}

const cookieHeader = (client: HttpClient) => [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
const sessionIdOf = (client: HttpClient) =>
  t.app.sessions.sessionIdOf({ headers: { cookie: cookieHeader(client) }, url: '/' } as IncomingMessage);

/** Fetches a login captcha and submits the login form with `fields`. */
async function submit(client: HttpClient, fields: Record<string, string>) {
  await client.captcha('login');
  return client.json<{ token: string; redirect: string }>('/agent/login/check', { method: 'POST', form: fields });
}
const credentials = (username: string, password = `${username}-password`) => ({ username, password, captcha: CAPTCHA });

describe('Login — POST /agent/login/check', () => {
  it('success answers {code:0, msg:"ok", data:{token, redirect}} and sets the Session cookie', async () => {
    const client = clientFromNewAddress();
    const { status, headers, body } = await submit(client, credentials('alice'));
    expect(status).toBe(200);
    expect(body).toEqual({ code: 0, msg: 'ok', data: { token: expect.any(String), redirect: '/agent/' } });
    const cookie = headers.getSetCookie().find((c) => c.startsWith('parley.sid='));
    expect(cookie).toBeDefined();
    expect(cookie).toMatch(/; HttpOnly/i);
    expect(cookie).toMatch(/; SameSite=Lax/i);
    expect(cookie).toMatch(/; Path=\//i);
    expect(cookie).toMatch(/; Expires=/i);
    expect(cookie).not.toMatch(/; Secure/i); // plain HTTP, not production
    expect(sessionIdOf(client)).toBe(body.data.token);
  });

  it('the cookie is Secure under HTTPS', async () => {
    const client = clientFromNewAddress();
    await client.captcha('login');
    const { headers, body } = await client.json('/agent/login/check', {
      method: 'POST',
      headers: { 'x-forwarded-proto': 'https' },
      form: credentials('alice'),
    });
    expect(body.code).toBe(0);
    expect(headers.getSetCookie().find((c) => c.startsWith('parley.sid='))).toMatch(/; Secure/i);
  });

  it('the login regenerates the Session ID: the token differs from the ID the captcha was fetched under', async () => {
    const client = clientFromNewAddress();
    await client.captcha('login');
    const before = sessionIdOf(client);
    expect(before).toBeTruthy();
    const { body } = await client.json('/agent/login/check', { method: 'POST', form: credentials('alice') });
    expect(body.code).toBe(0);
    expect(body.data.token).not.toBe(before);
    // The pre-login ID is worth nothing afterwards.
    expect(
      (await new HttpClient(t.url).json('/agent/data/get', { headers: { token: before as string } })).body.code,
    ).toBe(-1);
  });

  it('a ticket agent is sent to the ticket entry', async () => {
    const { body } = await submit(clientFromNewAddress(), credentials('tom'));
    expect(body).toMatchObject({ code: 0, data: { redirect: '/agent/ticket' } });
  });

  it('the optional cid is stored with the Session', async () => {
    const { body } = await submit(clientFromNewAddress(), { ...credentials('alice'), cid: 'push-42' });
    expect(body.code).toBe(0);
    const stored = await t.app.sessions.storedPort(body.data.token);
    expect(stored?.state.cid).toBe('push-42');
    expect(stored?.state.agent).toMatchObject({ agentId: 'a_alice', bid: 'demo' });
  });

  it('a JSON body is accepted as well as a form', async () => {
    const client = clientFromNewAddress();
    await client.captcha('login');
    const { body } = await client.json('/agent/login/check', { method: 'POST', json: credentials('alice') });
    expect(body.code).toBe(0);
  });

  it('usernames match case-insensitively', async () => {
    expect((await submit(clientFromNewAddress(), credentials('ALICE', 'alice-password'))).body.code).toBe(0);
  });
});

describe('Login failures', () => {
  it('wrong captcha: code 1001 and a clear msg', async () => {
    const { body } = await submit(clientFromNewAddress(), { ...credentials('alice'), captcha: 'nope' });
    expect(body).toEqual({ code: 1001, msg: expect.stringMatching(/captcha/i), data: [] });
  });

  it('no captcha fetched at all: code 1001', async () => {
    const { body } = await clientFromNewAddress().json('/agent/login/check', {
      method: 'POST',
      form: credentials('alice'),
    });
    expect(body.code).toBe(1001);
  });

  it('wrong password and unknown username give the same code and msg (the username is never revealed)', async () => {
    const wrong = await submit(clientFromNewAddress(), credentials('alice', 'wrong-password'));
    const unknown = await submit(clientFromNewAddress(), credentials('nobody-here'));
    expect(wrong.body.code).toBe(1002);
    expect(wrong.body.msg).toMatch(/username or password/i);
    expect(unknown.body).toEqual(wrong.body);
    expect(unknown.status).toBe(wrong.status);
  });

  it.each([
    ['username', { password: 'alice-password', captcha: CAPTCHA }],
    ['password', { username: 'alice', captcha: CAPTCHA }],
    ['captcha', { username: 'alice', password: 'alice-password' }],
    ['username', { username: '   ', password: 'alice-password', captcha: CAPTCHA }],
  ])('missing %s: a non-zero code and a msg naming the field', async (field, fields) => {
    const { body } = await submit(clientFromNewAddress(), fields as Record<string, string>);
    expect(body.code).toBe(1000);
    expect(body.msg).toContain(field);
    expect(body.data).toEqual([]);
  });

  it('a disabled account cannot log in (clear message)', async () => {
    const { body } = await submit(clientFromNewAddress(), credentials('dave'));
    expect(body).toEqual({ code: 1003, msg: expect.stringMatching(/disabled/i), data: [] });
  });

  it('a disabled account with a wrong password looks like any wrong password', async () => {
    const { body } = await submit(clientFromNewAddress(), credentials('dave', 'guess'));
    expect(body.code).toBe(1002);
  });
});

describe('Brute-force throttling', () => {
  it('repeated failures on one username lock it, with the same generic error even for the right password', async () => {
    for (let i = 0; i < 5; i++) {
      const { body } = await submit(clientFromNewAddress(), credentials('bob', `guess-${i}`));
      expect(body.code).toBe(1002);
    }
    const locked = await submit(clientFromNewAddress(), credentials('bob'));
    expect(locked.body).toEqual({ code: 1002, msg: 'Wrong username or password', data: [] });
    // Other accounts are not affected.
    expect((await submit(clientFromNewAddress(), credentials('alice'))).body.code).toBe(0);
  });

  it('a successful login resets the username counter', async () => {
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 4; i++) {
        expect((await submit(clientFromNewAddress(), credentials('tom', 'guess'))).body.code).toBe(1002);
      }
      expect((await submit(clientFromNewAddress(), credentials('tom'))).body.code).toBe(0);
    }
  });

  it('repeated failures from one address lock that address, whatever the username', async () => {
    const attacker = clientFromNewAddress();
    for (let i = 0; i < 30; i++) {
      const { body } = await submit(attacker, credentials(`user-${i}`, 'guess'));
      expect(body.code).toBe(1002);
    }
    expect((await submit(attacker, credentials('alice'))).body.code).toBe(1002);
    expect((await submit(clientFromNewAddress(), credentials('alice'))).body.code).toBe(0);
  });

  it('successful logins do not count against the address (many agents behind one NAT)', async () => {
    const office = clientFromNewAddress();
    for (let i = 0; i < 35; i++) {
      expect((await submit(office, credentials(i % 2 ? 'alice' : 'tom'))).body.code).toBe(0);
    }
  });

  it('a lock applies to the GraphQL login too (one domain implementation)', async () => {
    const client = clientFromNewAddress();
    await client.captcha('login');
    const { body } = await client.graphql(
      'mutation($u:String!,$p:String!,$c:String!){ login(username:$u,password:$p,captcha:$c){ token } }',
      { u: 'bob', p: 'bob-password', c: CAPTCHA },
    );
    expect(body.errors?.[0]?.extensions?.code).toBe('LOGIN_FAILED');
  });
});

describe('GraphQL — login, currentAgent, logout', () => {
  const LOGIN =
    'mutation($u:String!,$p:String!,$c:String!,$cid:String){ login(username:$u,password:$p,captcha:$c,cid:$cid){ token redirect } }';
  const CURRENT = '{ currentAgent { agentId nickname level } }';

  it('login mutation sets the Session; currentAgent reads it; logout ends it', async () => {
    const client = clientFromNewAddress();
    await client.captcha('login');
    const before = sessionIdOf(client);
    const login = await client.graphql(LOGIN, { u: 'alice', p: 'alice-password', c: CAPTCHA, cid: 'gql-cid' });
    expect(login.body.errors).toBeUndefined();
    const { token, redirect } = login.body.data.login;
    expect(redirect).toBe('/agent/');
    expect(token).not.toBe(before);
    expect(sessionIdOf(client)).toBe(token);
    expect((await t.app.sessions.storedPort(token))?.state.cid).toBe('gql-cid');

    const current = await client.graphql(CURRENT);
    expect(current.body.data.currentAgent).toEqual({
      agentId: 'a_alice',
      nickname: expect.any(String),
      level: 'agent',
    });
    // The token works as a header too, and with REST.
    const byHeader = await new HttpClient(t.url).graphql(CURRENT, undefined, { token });
    expect(byHeader.body.data.currentAgent.agentId).toBe('a_alice');
    expect((await new HttpClient(t.url).json('/agent/data/get', { headers: { token } })).body.code).toBe(0);

    const logout = await client.graphql('mutation { logout }');
    expect(logout.body.data).toEqual({ logout: true });
    const after = await new HttpClient(t.url).graphql(CURRENT, undefined, { token });
    expect(after.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect((await new HttpClient(t.url).json('/agent/data/get', { headers: { token } })).body.code).toBe(-1);
  });

  it('a login made with REST is the current agent of GraphQL, whatever the role', async () => {
    const { body } = await submit(clientFromNewAddress(), credentials('tom'));
    const current = await new HttpClient(t.url).graphql(CURRENT, undefined, { token: body.data.token });
    expect(current.body.data.currentAgent).toMatchObject({ agentId: 'a_tom', level: 'ticket_agent' });
  });

  it('wrong captcha, wrong credentials, disabled account: the same errors as REST', async () => {
    const attempt = async (u: string, p: string, c = CAPTCHA) => {
      const client = clientFromNewAddress();
      await client.captcha('login');
      const { body } = await client.graphql(LOGIN, { u, p, c });
      return body.errors?.[0];
    };
    expect((await attempt('alice', 'alice-password', 'nope'))?.extensions?.code).toBe('CAPTCHA_INVALID');
    const wrong = await attempt('alice', 'wrong');
    const unknown = await attempt('nobody-at-all', 'wrong');
    expect(wrong?.extensions?.code).toBe('LOGIN_FAILED');
    expect(unknown?.message).toBe(wrong?.message);
    expect((await attempt('dave', 'dave-password'))?.extensions?.code).toBe('ACCOUNT_DISABLED');
    expect((await attempt('', 'x'))?.extensions?.code).toBe('BAD_USER_INPUT');
  });

  it('currentAgent and logout without a Session: UNAUTHENTICATED', async () => {
    const client = clientFromNewAddress();
    expect((await client.graphql(CURRENT)).body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect((await client.graphql('mutation { logout }')).body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });
});

describe('SMS captcha when SMS verification for registration is off', () => {
  it('POST /agent/login/smscaptcha answers a clear error', async () => {
    const client = clientFromNewAddress();
    await client.captcha('join');
    const { body } = await client.json('/agent/login/smscaptcha', {
      method: 'POST',
      form: { mobile: '13800138000', captcha: CAPTCHA },
    });
    expect(body).toEqual({ code: 1005, msg: expect.stringMatching(/not enabled/i), data: [] });
  });

  it('POST /agent/login/smsverify answers the same error', async () => {
    const { body } = await clientFromNewAddress().json('/agent/login/smsverify', {
      method: 'POST',
      form: { mobile: '13800138000', code: '123456' },
    });
    expect(body.code).toBe(1005);
  });
});

describe('CAPTCHA_TEST_ANSWER', () => {
  it('the server logs a warning when it is on', () => {
    expect(t.logs.some((l) => l.level === 40 && String(l.msg).includes('CAPTCHA_TEST_ANSWER'))).toBe(true);
  });
});
