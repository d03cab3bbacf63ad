import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../../src/auth/passwords.js';
import { agents } from '../../src/db/schema.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { describeWhen } from '../support/required.js';
import { CAPTCHA, freshStores, startTestApp, type TestApp, withClockAhead } from '../support/test-app.js';
import { eventually } from '../support/ws.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());

const NOT_LOGGED_IN = { code: -1, msg: '请先登录', data: [] };
const cookieHeader = (client: HttpClient) => [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
const sessionIdOf = (client: HttpClient) =>
  t.app.sessions.sessionIdOf({ headers: { cookie: cookieHeader(client) }, url: '/' } as IncomingMessage);

/** GET /agent/data/get as a fresh client (no cookie jar) with the given headers/path suffix. */
const workbench = (suffix = '', headers: Record<string, string> = {}) =>
  new HttpClient(t.url).json(`/agent/data/get${suffix}`, { headers });

/** Runs `fn` with the domain clock moved `ms` forward. */
const later = <T>(ms: number, fn: () => Promise<T>) => withClockAhead(t, ms, fn);

const setAgent = (id: string, values: Partial<typeof agents.$inferInsert>) =>
  t.app.deps.db.update(agents).set(values).where(eq(agents.id, id));

describe('Sessions — token header, token query, cookie', () => {
  it('the token header identifies the agent on GET /agent/data/get', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const { status, body } = await workbench('', { token });
    expect(status).toBe(200);
    expect(body.code).toBe(0);
    expect(body.data.agent.agent_id).toBe('a_alice');
  });

  it('the token query parameter identifies the agent', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const { body } = await workbench(`?token=${token}`);
    expect(body.code).toBe(0);
    expect(body.data.agent.agent_id).toBe('a_alice');
  });

  it('the Session cookie identifies the agent', async () => {
    const { client } = await agentSession(t.url, 'alice');
    const { body } = await client.json('/agent/data/get');
    expect(body.code).toBe(0);
    expect(body.data.agent.agent_id).toBe('a_alice');
  });

  it('the header wins over the query, which wins over the cookie', async () => {
    const alice = await agentSession(t.url, 'alice');
    const bob = await agentSession(t.url, 'bob');
    const bobCookie = cookieHeader(bob.client);
    const headerFirst = await workbench(`?token=${bob.token}`, { token: alice.token, cookie: bobCookie });
    expect(headerFirst.body.data.agent.agent_id).toBe('a_alice');
    const queryNext = await workbench(`?token=${alice.token}`, { cookie: bobCookie });
    expect(queryNext.body.data.agent.agent_id).toBe('a_alice');
    const cookieLast = await workbench('', { cookie: bobCookie });
    expect(cookieLast.body.data.agent.agent_id).toBe('a_bob');
  });

  it('a token that names no Session is not adopted, and does not fall back to the cookie', async () => {
    const forged = 'f'.repeat(32);
    const { client } = await agentSession(t.url, 'alice');
    expect((await workbench('', { token: forged })).body).toEqual(NOT_LOGGED_IN);
    expect((await workbench('', { token: forged, cookie: cookieHeader(client) })).body).toEqual(NOT_LOGGED_IN);
    expect((await workbench('', { token: 'not a session id' })).body).toEqual(NOT_LOGGED_IN);

    // A captcha fetched under a forged token lands in a new Session with a server-made ID.
    const attacker = new HttpClient(t.url);
    const res = await attacker.request('/agent/login/logincaptcha', { headers: { token: forged } });
    await res.arrayBuffer();
    const issued = sessionIdOf(attacker);
    expect(issued).toBeTruthy();
    expect(issued).not.toBe(forged);
    expect(await t.app.sessions.storedPort(forged)).toBeUndefined();
    // So a login under the forged ID has no captcha to match.
    const login = await new HttpClient(t.url).json('/agent/login/check', {
      method: 'POST',
      headers: { token: forged },
      form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA },
    });
    expect(login.body.code).toBe(1001);
  });

  it('a token given twice (repeated query parameter) is refused', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const { body } = await workbench(`?token=${token}&token=${token}`);
    expect(body.code).not.toBe(0);
  });

  it('the cookie is refreshed on use (rolling idle lifetime of SESSION_TTL_SECONDS)', async () => {
    const { client, token } = await agentSession(t.url, 'alice');
    const { headers } = await client.json('/agent/data/get');
    const cookie = headers.getSetCookie().find((c) => c.startsWith('parley.sid='));
    expect(cookie).toBeDefined();
    const expires = Date.parse(/Expires=([^;]+)/i.exec(cookie as string)?.[1] ?? '');
    const ttl = t.config.sessionTtlSeconds * 1000;
    expect(Math.abs(expires - (Date.now() + ttl))).toBeLessThan(60_000);
    if (t.app.deps.redis) {
      const seconds = await t.app.deps.redis.ttl(`sess:${token}`);
      expect(seconds).toBeGreaterThan(t.config.sessionTtlSeconds - 60);
      expect(seconds).toBeLessThanOrEqual(t.config.sessionTtlSeconds);
    }
  });

  it('a token in the header or query is answered without a cookie: a shared link cannot plant a Session in a browser', async () => {
    const alice = await agentSession(t.url, 'alice');
    const browser = await agentSession(t.url, 'bob');
    const before = cookieHeader(browser.client);
    for (const [suffix, headers] of [
      [`?token=${alice.token}`, {}],
      ['', { token: alice.token }],
    ] as const) {
      const res = await browser.client.request(`/agent/data/get${suffix}`, { headers });
      expect(((await res.json()) as { data: { agent: { agent_id: string } } }).data.agent.agent_id).toBe('a_alice');
      expect(res.headers.getSetCookie().filter((c) => c.startsWith('parley.sid='))).toEqual([]);
    }
    expect(cookieHeader(browser.client)).toBe(before);
    expect((await browser.client.json('/agent/data/get')).body.data.agent.agent_id).toBe('a_bob');
    // A logout by token ends that Session only, and leaves the browser's cookie alone.
    const logout = await browser.client.request('/agent/logout', { method: 'POST', headers: { token: alice.token } });
    expect(logout.headers.getSetCookie()).toEqual([]);
    expect((await workbench('', { token: alice.token })).body.code).toBe(-1);
    expect((await browser.client.json('/agent/data/get')).body.data.agent.agent_id).toBe('a_bob');
  });

  it('a login by token header still answers the new Session ID as cookie and token', async () => {
    const client = new HttpClient(t.url);
    await client.captcha('login');
    const anonymous = sessionIdOf(client) as string;
    const fresh = new HttpClient(t.url);
    const { headers, body } = await fresh.json('/agent/login/check', {
      method: 'POST',
      headers: { token: anonymous },
      form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA },
    });
    expect(body.code).toBe(0);
    expect(headers.getSetCookie().some((c) => c.startsWith('parley.sid='))).toBe(true);
    expect(sessionIdOf(fresh)).toBe(body.data.token);
  });

  it('a Session ends at its absolute lifetime, however recently it was used', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const absolute = t.config.sessionAbsoluteTtlSeconds * 1000;
    expect((await later(absolute - 60_000, () => workbench('', { token }))).body.code).toBe(0);
    expect((await later(absolute + 1000, () => workbench('', { token }))).body).toEqual(NOT_LOGGED_IN);
    expect((await workbench('', { token })).body).toEqual(NOT_LOGGED_IN); // discarded, not just refused
  });

  it('logout (POST /agent/logout) destroys the Session', async () => {
    const { client, token } = await agentSession(t.url, 'alice');
    const { headers, body } = await client.json('/agent/logout', { method: 'POST' });
    expect(body).toEqual({ code: 0, msg: 'ok', data: [] });
    expect(headers.getSetCookie().join('\n')).toMatch(/parley\.sid=;/);
    expect(await t.app.sessions.storedPort(token)).toBeUndefined();
    expect((await workbench('', { token })).body).toEqual(NOT_LOGGED_IN);
    expect((await workbench(`?token=${token}`)).body).toEqual(NOT_LOGGED_IN);
    // Logging out again is the ordinary "please log in".
    expect((await new HttpClient(t.url).json('/agent/logout', { method: 'POST', headers: { token } })).body).toEqual(
      NOT_LOGGED_IN,
    );
  });

  it('logout by token header ends only that Session', async () => {
    const first = await agentSession(t.url, 'alice');
    const second = await agentSession(t.url, 'alice');
    const { body } = await new HttpClient(t.url).json('/agent/logout', {
      method: 'POST',
      headers: { token: first.token },
    });
    expect(body.code).toBe(0);
    expect((await workbench('', { token: first.token })).body.code).toBe(-1);
    expect((await workbench('', { token: second.token })).body.code).toBe(0);
  });
});

describe('The two identities cannot be exchanged', () => {
  it('the visitor Bearer token is never accepted as an agent identity', async () => {
    const visitor = await visitorToken(t.url);
    expect((await workbench('', { authorization: `Bearer ${visitor.token}` })).body).toEqual(NOT_LOGGED_IN);
    expect((await workbench('', { token: visitor.token })).body).toEqual(NOT_LOGGED_IN);
    expect((await workbench(`?token=${encodeURIComponent(visitor.token)}`)).body).toEqual(NOT_LOGGED_IN);
    const gql = await new HttpClient(t.url).graphql('{ currentAgent { agentId } }', undefined, {
      authorization: `Bearer ${visitor.token}`,
    });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it('an agent Session is never accepted as a visitor (GET /visitor/data/get)', async () => {
    const { client, token } = await agentSession(t.url, 'alice');
    const byCookie = await client.json('/visitor/data/get', { headers: { accept: 'application/json' } });
    expect(byCookie.status).toBe(401);
    expect(byCookie.body.code).not.toBe(0);
    const byHeader = await new HttpClient(t.url).json('/visitor/data/get', { headers: { token } });
    expect(byHeader.body.code).not.toBe(0);
    const asBearer = await new HttpClient(t.url).json('/visitor/data/get', {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(asBearer.status).toBe(401);
    expect(asBearer.body.code).not.toBe(0);
  });
});

describe('Guards', () => {
  it('a JSON request under /agent/* without a Session: HTTP 200 {code:-1, msg:"请先登录", data:[]}', async () => {
    const get = await new HttpClient(t.url).json('/agent/data/get');
    expect(get.status).toBe(200);
    expect(get.body).toEqual(NOT_LOGGED_IN);
    const logout = await new HttpClient(t.url).json('/agent/logout', { method: 'POST' });
    expect(logout.status).toBe(200);
    expect(logout.body).toEqual(NOT_LOGGED_IN);
    const gql = await new HttpClient(t.url).graphql('{ agentWorkbench { agent { agentId } } }');
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it('an anonymous Session (captcha fetched, no login) is not logged in', async () => {
    const client = new HttpClient(t.url);
    await client.captcha('login');
    expect((await client.json('/agent/data/get')).body).toEqual(NOT_LOGGED_IN);
  });

  it('ticket_agent on GET /agent/data/get: HTTP 403 envelope; on GraphQL agentWorkbench: FORBIDDEN', async () => {
    const { token } = await agentSession(t.url, 'tom');
    const { status, body } = await workbench('', { token });
    expect(status).toBe(403);
    expect(body).toEqual({ code: 1403, msg: expect.stringMatching(/ticket/i), data: [] });
    const gql = await new HttpClient(t.url).graphql('{ agentWorkbench { agent { agentId } } }', undefined, { token });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(gql.body.data ?? null).toBeNull();
    // The Session itself stays valid: the ticket agent is logged in, only not for online reception.
    const current = await new HttpClient(t.url).graphql('{ currentAgent { level } }', undefined, { token });
    expect(current.body.data.currentAgent.level).toBe('ticket_agent');
  });

  it('a Session of an account disabled after login: 1003 on the next request (Session destroyed), -1 afterwards', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const other = await agentSession(t.url, 'alice');
    await setAgent('a_alice', { disabled: true });
    try {
      const first = await workbench('', { token });
      expect(first.body).toEqual({ code: 1003, msg: expect.stringMatching(/disabled/i), data: [] });
      expect(await t.app.sessions.storedPort(token)).toBeUndefined();
      expect((await workbench('', { token })).body).toEqual(NOT_LOGGED_IN);
      // GraphQL sees the same through the shared domain code.
      const gql = await new HttpClient(t.url).graphql('{ currentAgent { agentId } }', undefined, {
        token: other.token,
      });
      expect(gql.body.errors?.[0]?.extensions?.code).toBe('ACCOUNT_DISABLED');
    } finally {
      await setAgent('a_alice', { disabled: false });
    }
  });

  describe('a Session whose agent no longer matches: invalid parameter (1004) and the Session is discarded', () => {
    const createAgent = async (id: string) => {
      await t.app.deps.db.insert(agents).values({
        id,
        merchantId: 'm_demo',
        username: id,
        passwordHash: await hashPassword(`${id}-password`),
        nickname: id,
      });
    };

    it('the agent moved to another merchant', async () => {
      await createAgent('a_eve');
      const { token } = await agentSession(t.url, 'a_eve');
      await setAgent('a_eve', { merchantId: 'm_acme' });
      const { status, body } = await workbench('', { token });
      expect(status).toBe(200);
      expect(body).toEqual({ code: 1004, msg: expect.stringMatching(/invalid parameter/i), data: [] });
      expect(await t.app.sessions.storedPort(token)).toBeUndefined();
      expect((await workbench('', { token })).body).toEqual(NOT_LOGGED_IN);
    });

    it('the agent was deleted', async () => {
      await createAgent('a_finn');
      const { token } = await agentSession(t.url, 'a_finn');
      await t.app.deps.db.delete(agents).where(eq(agents.id, 'a_finn'));
      expect((await workbench('', { token })).body.code).toBe(1004);
      expect((await workbench('', { token })).body).toEqual(NOT_LOGGED_IN);
    });
  });
});

describeWhen(
  Boolean(process.env.REDIS_URL),
  'REQUIRE_SERVICES',
  'Several instances sharing one Redis',
  'REDIS_URL is unset',
  () => {
    it("two instances recognise each other's Sessions and captchas", async () => {
      const stores = await freshStores();
      const one = await startTestApp({ stores });
      const two = await startTestApp({ stores });
      try {
        // Captcha fetched on one instance, login submitted on the other.
        const client = new HttpClient(one.url);
        await client.captcha('login');
        const cookie = cookieHeader(client);
        const login = await new HttpClient(two.url).json('/agent/login/check', {
          method: 'POST',
          headers: { cookie },
          form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA },
        });
        expect(login.body.code).toBe(0);
        const { token } = login.body.data;
        for (const base of [one.url, two.url]) {
          const byHeader = await new HttpClient(base).json('/agent/data/get', { headers: { token } });
          expect(byHeader.body.data.agent.agent_id).toBe('a_alice');
        }
        // Logout on one ends the Session on both.
        expect(
          (await new HttpClient(one.url).json('/agent/logout', { method: 'POST', headers: { token } })).body.code,
        ).toBe(0);
        expect((await new HttpClient(two.url).json('/agent/data/get', { headers: { token } })).body.code).toBe(-1);
      } finally {
        await one.stop();
        await two.stop();
        await stores.drop();
      }
    });
  },
);

/**
 * Redis MONITOR on a plain socket, resolved once MONITOR is on, calling `onLine` with each line.
 * Not ioredis's monitor(): when MONITOR's OK and the first reported command arrive in one packet
 * (a busy Redis), ioredis reads that line before it knows it is monitoring and throws
 * "Command queue state error" out of its socket handler.
 */
async function monitorRedis(url: string, onLine: (line: string) => void): Promise<Socket> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port || 6379), hostname);
  socket.setEncoding('utf8');
  let pending = '';
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.on('data', (chunk: string) => {
      const lines = (pending + chunk).split('\r\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (line === '+OK') resolve();
        else onLine(line);
      }
    });
    socket.write('MONITOR\r\n');
  });
  return socket;
}

describeWhen(Boolean(process.env.REDIS_URL), 'REQUIRE_SERVICES', 'Sessions on Redis', 'REDIS_URL is unset', () => {
  it('reading a Session rolls its idle lifetime in Redis in the same round trip (GETEX)', async () => {
    const app = await startTestApp({ env: { SESSION_TTL_SECONDS: '600' } });
    try {
      const { token } = await agentSession(app.url, 'alice');
      const redis = app.app.deps.redis as NonNullable<typeof app.app.deps.redis>;
      await redis.expire(`sess:${token}`, 30);
      const commands: string[] = [];
      const monitor = await monitorRedis(process.env.REDIS_URL as string, (line) => {
        const [, name = '', firstArgument = ''] = /\] "([^"]+)" "([^"]*)"/.exec(line) ?? [];
        if (firstArgument.includes(token)) commands.push(name.toLowerCase());
      });
      expect((await new HttpClient(app.url).json('/agent/data/get', { headers: { token } })).body.code).toBe(0);
      // MONITOR reports commands in the order Redis ran them: once a marker sent after the
      // request shows up, everything the request did on the Session has been seen.
      await redis.echo(`end-of-request:${token}`);
      await eventually(() => commands.includes('echo'), 'the marker in MONITOR');
      const seen = commands.slice(0, commands.indexOf('echo'));
      monitor.destroy();
      expect(seen).toEqual(['getex']);
      expect(await redis.ttl(`sess:${token}`)).toBeGreaterThan(590);
    } finally {
      await app.stop();
    }
  });
});

describe('Sessions cannot be resurrected', () => {
  it('a save by a request still in flight after logout does not bring the Session back', async () => {
    const { client, token } = await agentSession(t.url, 'alice');
    const { store } = t.app.sessions;
    const before = await new Promise<unknown>((resolve, reject) =>
      store.get(token, (err, data) => (err ? reject(err) : resolve(data))),
    );
    expect(before).toBeTruthy();
    expect((await client.json('/agent/logout', { method: 'POST' })).body.code).toBe(0);
    // What express-session does at the end of a request that modified the Session it loaded.
    await new Promise<void>((resolve, reject) =>
      store.set(token, before as never, (err) => (err ? reject(err) : resolve())),
    );
    const after = await new Promise<unknown>((resolve, reject) =>
      store.get(token, (err, data) => (err ? reject(err) : resolve(data))),
    );
    expect(after).toBeFalsy();
    expect((await new HttpClient(t.url).json('/agent/data/get', { headers: { token } })).body.code).toBe(-1);
  });
});
