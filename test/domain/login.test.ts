import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { agents } from '../../src/db/schema.js';
import { CAPTCHA_TTL_SECONDS, issueCaptcha, peekCaptchaAnswer } from '../../src/resolvers/captcha.js';
import { globalChannel, sessionFingerprint } from '../../src/resolvers/events.js';
import { login, logout, TICKET_ENTRY_PATH, WORKBENCH_PATH } from '../../src/resolvers/login.js';
import { agentSessionsKey } from '../../src/resolvers/session.js';
import { chargingInOrder, type Limit, type RateLimiter } from '../../src/stores/rate-limits.js';
import {
  clientIp,
  codeOf,
  type Factories,
  metricValue,
  recordEvents,
  type TestDeps,
  testSession,
  useTestDeps,
} from '../support/deps.js';

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const PASSWORD = 'test-password-1';

/** A fresh pre-login Session holding a login captcha, and its answer. */
async function withCaptcha() {
  const session = testSession();
  await issueCaptcha(deps, session, 'login');
  const answer = (await peekCaptchaAnswer(deps, session.id, 'login')) as string;
  return { session, answer };
}

/** One login attempt as the login page makes it (a new Session, a right captcha). */
async function attempt(username: string, password: string, ip: string) {
  const { session, answer } = await withCaptcha();
  return login(deps, session, { username, password, captcha: answer }, ip);
}

const locked = (scope: 'account' | 'ip') => metricValue(deps, 'parley_login_lockouts_total', { scope });
const failures = (reason: string) => metricValue(deps, 'parley_login_failures_total', { reason });

async function agentOf(opts: { level?: 'agent' | 'admin' | 'ticket_agent' } = {}) {
  const m = await f.merchant();
  const agent = await f.agent(m, opts);
  return { m, agent, username: agent.agent.username };
}

describe('Login', () => {
  it('logs in with the right password: a new Session ID carrying the agent, indexed, announced on global-{bid}', async () => {
    const { m, agent, username } = await agentOf();
    const feed = recordEvents(deps, [globalChannel(m.bid)]);
    await feed.ready;
    const { session, answer } = await withCaptcha();
    const before = session.id;
    const at = deps.now();
    const result = await login(
      deps,
      session,
      { username, password: PASSWORD, captcha: answer, cid: 'push-1' },
      clientIp(),
    );

    expect(result).toEqual({ token: session.id, redirect: WORKBENCH_PATH });
    expect(result.token).not.toBe(before);
    expect(session.regenerations).toBe(1);
    expect(session.state.agent).toEqual({
      agentId: agent.agentId,
      merchantId: m.merchantId,
      bid: m.bid,
      level: 'agent',
    });
    expect(session.state.cid).toBe('push-1');
    expect(session.state.createdAt).toBeGreaterThanOrEqual(at);
    expect(session.saves).toBeGreaterThan(0);
    expect(await deps.kv.members(agentSessionsKey(agent.agentId))).toEqual([session.id]);
    const event = await feed.first('agent.login');
    expect(event?.data).toEqual({ agent_id: agent.agentId, nickname: agent.agent.nickname });
    feed.stop();
  });

  it('keeps no cid when none is given', async () => {
    const { username } = await agentOf();
    const { session, answer } = await withCaptcha();
    await login(deps, session, { username, password: PASSWORD, captcha: answer }, clientIp());
    expect(session.state).not.toHaveProperty('cid');
  });

  it('sends a ticket agent to the ticket entry', async () => {
    const { username } = await agentOf({ level: 'ticket_agent' });
    expect((await attempt(username, PASSWORD, clientIp())).redirect).toBe(TICKET_ENTRY_PATH);
    expect(TICKET_ENTRY_PATH).toBe('/agent/ticket');
    expect(WORKBENCH_PATH).toBe('/agent/');
  });

  it('takes the login name case-insensitively, around spaces', async () => {
    const { agent, username } = await agentOf();
    const { session, answer } = await withCaptcha();
    await login(
      deps,
      session,
      { username: `  ${username.toUpperCase()} `, password: PASSWORD, captcha: answer },
      clientIp(),
    );
    expect(session.state.agent?.agentId).toBe(agent.agentId);
  });

  it('refuses a wrong password and an unknown user alike, without a Session', async () => {
    const { username } = await agentOf();
    const before = await failures('credentials');
    for (const [name, password] of [
      [username, 'wrong-password'],
      [`nobody-${username}`, PASSWORD],
    ] as const) {
      const { session, answer } = await withCaptcha();
      await expect(
        login(deps, session, { username: name, password, captcha: answer }, clientIp()),
      ).rejects.toMatchObject({
        code: 'LOGIN_FAILED',
        message: 'Wrong username or password',
      });
      expect(session.state.agent).toBeUndefined();
      expect(session.regenerations).toBe(0);
    }
    expect(await failures('credentials')).toBe(before + 2);
  });

  it('checks the captcha first: a wrong one refuses even the right password, and uses the captcha up', async () => {
    const { username } = await agentOf();
    const { session, answer } = await withCaptcha();
    const before = await failures('captcha');
    const wrong = answer === 'zzzz' ? 'yyyy' : 'zzzz';
    expect(await codeOf(login(deps, session, { username, password: PASSWORD, captcha: wrong }, clientIp()))).toBe(
      'CAPTCHA_INVALID',
    );
    expect(await failures('captcha')).toBe(before + 1);
    // The answer was taken with the wrong guess: the right one no longer passes.
    expect(await codeOf(login(deps, session, { username, password: PASSWORD, captcha: answer }, clientIp()))).toBe(
      'CAPTCHA_INVALID',
    );
  });

  it('refuses a disabled agent (after its right password) and keeps no Session', async () => {
    const { agent, username } = await agentOf();
    await deps.db.update(agents).set({ disabled: true }).where(eq(agents.id, agent.agentId));
    const before = await failures('disabled');
    const { session, answer } = await withCaptcha();
    await expect(
      login(deps, session, { username, password: PASSWORD, captcha: answer }, clientIp()),
    ).rejects.toMatchObject({ code: 'ACCOUNT_DISABLED', message: 'This agent account is disabled' });
    expect(await failures('disabled')).toBe(before + 1);
    expect(session.state.agent).toBeUndefined();
    // A wrong password says nothing about the account being disabled.
    expect(await codeOf(attempt(username, 'wrong-password', clientIp()))).toBe('LOGIN_FAILED');
  });
});

describe('Login when a store fails', () => {
  it('an unreachable limit store is that failure, not a wrong password', async () => {
    const { username } = await agentOf();
    const down = new Error('limit store down');
    const broken: RateLimiter = {
      consume: () => Promise.reject(down),
      isBlocked: () => Promise.reject(down),
      reset: () => Promise.reject(down),
      reward: () => Promise.reject(down),
    };
    const withBrokenLimits = {
      ...deps,
      rateLimiter: chargingInOrder((limit: Limit) =>
        limit.name.startsWith('login') ? broken : deps.rateLimiter(limit),
      ),
    };
    const { session, answer } = await withCaptcha();
    await expect(
      login(withBrokenLimits, session, { username, password: PASSWORD, captcha: answer }, clientIp()),
    ).rejects.toBe(down);
  });
});

describe('Login brute-force limits', () => {
  it('locks an account after 5 attempts in 15 minutes: even the right password is refused', async () => {
    const { username } = await agentOf();
    const before = await locked('account');
    for (let i = 0; i < 5; i++) expect(await codeOf(attempt(username, `wrong-${i}`, clientIp()))).toBe('LOGIN_FAILED');
    expect(await locked('account')).toBe(before);
    expect(await codeOf(attempt(username, PASSWORD, clientIp()))).toBe('LOGIN_FAILED');
    expect(await locked('account')).toBe(before + 1);
  });

  it('counts the account case-insensitively', async () => {
    const { username } = await agentOf();
    for (let i = 0; i < 5; i++) await codeOf(attempt(i % 2 ? username.toUpperCase() : username, 'wrong', clientIp()));
    expect(await codeOf(attempt(username, PASSWORD, clientIp()))).toBe('LOGIN_FAILED');
  });

  it('a successful login starts the account count again', async () => {
    const { username } = await agentOf();
    for (let i = 0; i < 4; i++) await codeOf(attempt(username, 'wrong', clientIp()));
    await attempt(username, PASSWORD, clientIp());
    for (let i = 0; i < 4; i++) await codeOf(attempt(username, 'wrong', clientIp()));
    expect((await attempt(username, PASSWORD, clientIp())).redirect).toBe(WORKBENCH_PATH);
  });

  it('an address the account logged in from keeps a budget of its own while the account is locked', async () => {
    const { username } = await agentOf();
    const office = clientIp();
    await attempt(username, PASSWORD, office);
    const attacker = clientIp();
    for (let i = 0; i < 6; i++) await codeOf(attempt(username, 'wrong', attacker));
    expect(await codeOf(attempt(username, PASSWORD, attacker))).toBe('LOGIN_FAILED');
    // The office still gets in (1 of its 5 attempts while the account is locked)…
    expect((await attempt(username, PASSWORD, office)).redirect).toBe(WORKBENCH_PATH);
    // …and its guesses are still compared (a wrong password, not a lock) within its budget…
    for (let i = 0; i < 5; i++) await codeOf(attempt(username, 'wrong', attacker));
    const lockedBefore = await locked('account');
    const credentialsBefore = await failures('credentials');
    for (let i = 0; i < 3; i++) expect(await codeOf(attempt(username, 'wrong', office))).toBe('LOGIN_FAILED');
    expect(await failures('credentials')).toBe(credentialsBefore + 3);
    expect(await locked('account')).toBe(lockedBefore);
    expect((await attempt(username, PASSWORD, office)).redirect).toBe(WORKBENCH_PATH);
    // …which is now spent: while the account is locked again, even the office's right password is refused.
    for (let i = 0; i < 5; i++) await codeOf(attempt(username, 'wrong', attacker));
    expect(await codeOf(attempt(username, PASSWORD, office))).toBe('LOGIN_FAILED');
    expect(await locked('account')).toBeGreaterThan(lockedBefore);
  });

  it('an address that never logged in to the account gets no such budget', async () => {
    const { username } = await agentOf();
    const elsewhere = clientIp();
    // A success of another account from this address does not make it known for this one.
    const other = await agentOf();
    await attempt(other.username, PASSWORD, elsewhere);
    for (let i = 0; i < 5; i++) await codeOf(attempt(username, 'wrong', clientIp()));
    expect(await codeOf(attempt(username, PASSWORD, elsewhere))).toBe('LOGIN_FAILED');
  });

  it('locks an address after 30 failed attempts; its successes give their point back', async () => {
    const ip = clientIp();
    const { username } = await agentOf();
    // Unknown names, so no account limit is met.
    for (let i = 0; i < 29; i++)
      expect(await codeOf(attempt(`nobody-${i}-${username}`, 'wrong', ip))).toBe('LOGIN_FAILED');
    await attempt(username, PASSWORD, ip);
    await attempt(username, PASSWORD, ip);
    const before = await locked('ip');
    expect(await codeOf(attempt(`nobody-x-${username}`, 'wrong', ip))).toBe('LOGIN_FAILED');
    expect(await locked('ip')).toBe(before);
    expect(await codeOf(attempt(username, PASSWORD, ip))).toBe('LOGIN_FAILED');
    expect(await locked('ip')).toBe(before + 1);
    expect(await failures('locked')).toBeGreaterThan(0);
    // Another address is not affected.
    expect((await attempt(username, PASSWORD, clientIp())).redirect).toBe(WORKBENCH_PATH);
  });
});

describe('Captcha', () => {
  it('is single-use and tied to the Session and its purpose', async () => {
    const { username } = await agentOf();
    const join = testSession();
    await issueCaptcha(deps, join, 'join');
    const joinAnswer = (await peekCaptchaAnswer(deps, join.id, 'join')) as string;
    // A registration captcha does not open a login.
    expect(await codeOf(login(deps, join, { username, password: PASSWORD, captcha: joinAnswer }, clientIp()))).toBe(
      'CAPTCHA_INVALID',
    );
    // Nor does another Session's answer.
    const { session, answer } = await withCaptcha();
    expect(
      await codeOf(login(deps, testSession(), { username, password: PASSWORD, captcha: answer }, clientIp())),
    ).toBe('CAPTCHA_INVALID');
    // Case and surrounding spaces do not matter.
    await login(deps, session, { username, password: PASSWORD, captcha: ` ${answer.toUpperCase()} ` }, clientIp());
    expect(await peekCaptchaAnswer(deps, session.id, 'login')).toBeUndefined();
    expect(await codeOf(login(deps, session, { username, password: PASSWORD, captcha: answer }, clientIp()))).toBe(
      'CAPTCHA_INVALID',
    );
  });

  it('a new captcha replaces the earlier one; an answer of another length is wrong', async () => {
    const { username } = await agentOf();
    const { session, answer } = await withCaptcha();
    await issueCaptcha(deps, session, 'login');
    const second = (await peekCaptchaAnswer(deps, session.id, 'login')) as string;
    if (second !== answer)
      expect(await codeOf(login(deps, session, { username, password: PASSWORD, captcha: answer }, clientIp()))).toBe(
        'CAPTCHA_INVALID',
      );
    await issueCaptcha(deps, session, 'login');
    const third = (await peekCaptchaAnswer(deps, session.id, 'login')) as string;
    expect(await codeOf(login(deps, session, { username, password: PASSWORD, captcha: `${third}x` }, clientIp()))).toBe(
      'CAPTCHA_INVALID',
    );
  });

  it('expires after 5 minutes by the domain clock', async () => {
    const { username } = await agentOf();
    expect(CAPTCHA_TTL_SECONDS).toBe(300);
    const t0 = Date.now();
    const at = (ms: number) => ({ ...deps, now: () => t0 + ms });
    const fresh = testSession();
    await issueCaptcha(at(0), fresh, 'login');
    const answer = (await peekCaptchaAnswer(deps, fresh.id, 'login')) as string;
    await login(at(299_999), fresh, { username, password: PASSWORD, captcha: answer }, clientIp());
    const late = testSession();
    await issueCaptcha(at(0), late, 'login');
    const lateAnswer = (await peekCaptchaAnswer(deps, late.id, 'login')) as string;
    await expect(
      login(at(300_000), late, { username, password: PASSWORD, captcha: lateAnswer }, clientIp()),
    ).rejects.toMatchObject({ code: 'CAPTCHA_INVALID', message: 'Wrong or expired captcha, please enter the new one' });
  });

  it('creates the Session on the first captcha (saved once), and counts captchas issued', async () => {
    const session = testSession();
    const before = await metricValue(deps, 'parley_captchas_issued_total', { purpose: 'join' });
    const t0 = deps.now();
    const jpeg = await issueCaptcha(deps, session, 'join');
    expect(jpeg.subarray(0, 2)).toEqual(Buffer.from([0xff, 0xd8]));
    expect(session.state.createdAt).toBeGreaterThanOrEqual(t0);
    expect(session.saves).toBe(1);
    const createdAt = session.state.createdAt;
    await issueCaptcha({ ...deps, now: () => t0 + 60_000 }, session, 'join');
    expect(session.saves).toBe(1);
    expect(session.state.createdAt).toBe(createdAt);
    expect(await metricValue(deps, 'parley_captchas_issued_total', { purpose: 'join' })).toBe(before + 2);
  });

  it('refuses every answer from an address after 30 wrong ones; right answers give their point back', async () => {
    const { username } = await agentOf();
    const ip = clientIp();
    const wrongOnce = async () => {
      const { session, answer } = await withCaptcha();
      return codeOf(login(deps, session, { username, password: PASSWORD, captcha: `${answer}-` }, ip));
    };
    for (let i = 0; i < 29; i++) expect(await wrongOnce()).toBe('CAPTCHA_INVALID');
    // Two right answers in a row: each gives its point back.
    await attempt(username, PASSWORD, ip);
    await attempt(username, PASSWORD, ip);
    expect(await wrongOnce()).toBe('CAPTCHA_INVALID');
    const { session, answer } = await withCaptcha();
    await expect(login(deps, session, { username, password: PASSWORD, captcha: answer }, ip)).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: expect.stringMatching(/^Too many wrong captchas, please wait \d+ seconds before trying again$/),
    });
  });
});

describe('Logout', () => {
  async function loggedIn() {
    const { m, agent, username } = await agentOf();
    const { session, answer } = await withCaptcha();
    await login(deps, session, { username, password: PASSWORD, captcha: answer }, clientIp());
    return { m, agent, session };
  }

  it('ends this Session only, announces it, and tells the agent channel which Session ended', async () => {
    const { m, agent, session } = await loggedIn();
    const other = await loggedIn().then(async () => {
      const { session: s, answer } = await withCaptcha();
      await login(deps, s, { username: agent.agent.username, password: PASSWORD, captcha: answer }, clientIp());
      return s;
    });
    const feed = recordEvents(deps, [globalChannel(m.bid), `agent-${agent.agentId}`]);
    await feed.ready;
    await logout(deps, session);
    expect(session.destroyed).toBe(true);
    expect(other.destroyed).toBe(false);
    expect(await deps.kv.members(agentSessionsKey(agent.agentId))).toEqual([other.id]);
    const logoutEvent = await feed.first('agent.logout');
    expect(logoutEvent?.data).toEqual({ agent_id: agent.agentId });
    const ended = await feed.first('session.ended');
    expect(ended?.data).toEqual({ reason: 'logout', sessions: [sessionFingerprint(session.id)] });
    feed.stop();
  });

  it('without a logged-in Session is "please log in", and the anonymous Session goes', async () => {
    const session = testSession({ createdAt: Date.now() });
    await expect(logout(deps, session)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    expect(session.destroyed).toBe(true);
  });
});
