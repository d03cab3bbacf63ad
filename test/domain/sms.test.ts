import { beforeAll, describe, expect, it } from 'vitest';
import type { Deps } from '../../src/deps.js';
import { issueCaptcha, peekCaptchaAnswer } from '../../src/resolvers/captcha.js';
import { SMS_CODE_TRIES, SMS_CODE_TTL_SECONDS, sendSmsCaptcha, verifySmsCode } from '../../src/resolvers/sms.js';
import { chargingInOrder } from '../../src/stores/rate-limits.js';
import { clientIp, codeOf, metricValue, type TestDeps, testDeps, testSession } from '../support/deps.js';

let base: TestDeps;
beforeAll(async () => {
  base = await testDeps();
});

type Sent = { mobile: string; code: string; purpose: string };

/**
 * The deps with SMS registration on and an SMS gateway that records what it was handed (the
 * driver is the edge to the outside world); `now` fixes the domain clock.
 */
function smsDeps(opts: { now?: () => number; failing?: boolean; registration?: boolean } = {}) {
  const sent: Sent[] = [];
  const deps: Deps = {
    ...base,
    config: { ...base.config, smsRegistration: opts.registration ?? true },
    sms: async (message) => {
      if (opts.failing) throw new Error('gateway down');
      sent.push(message);
    },
    ...(opts.now ? { now: opts.now } : {}),
  };
  return { deps, sent };
}

/** A unique mainland mobile number. */
let counter = 0;
const mobile = () => `139${String(Date.now() % 1e4).padStart(4, '0')}${String(counter++ % 1e4).padStart(4, '0')}`;

/** A Session with a registration captcha, as the join page has before asking for an SMS. */
async function joinSession(deps: Deps) {
  const session = testSession();
  await issueCaptcha(deps, session, 'join');
  return { session, captcha: (await peekCaptchaAnswer(deps, session.id, 'join')) as string };
}

async function send(deps: Deps, number: string, ip = clientIp(), existing?: Awaited<ReturnType<typeof joinSession>>) {
  const { session, captcha } = existing ?? (await joinSession(deps));
  await sendSmsCaptcha(deps, session, { mobile: number, captcha }, ip);
  return session;
}

describe('SMS registration codes: sending', () => {
  it('is refused while SMS registration is off', async () => {
    const { deps, sent } = smsDeps({ registration: false });
    const { session, captcha } = await joinSession(deps);
    await expect(sendSmsCaptcha(deps, session, { mobile: mobile(), captcha }, clientIp())).rejects.toMatchObject({
      code: 'SMS_DISABLED',
      message: 'SMS verification for registration is not enabled',
    });
    await expect(verifySmsCode(deps, session, { mobile: mobile(), code: '123456' })).rejects.toMatchObject({
      code: 'SMS_DISABLED',
    });
    expect(sent).toEqual([]);
  });

  it('takes mainland-China mobile numbers only (11 digits, 13–19)', async () => {
    const { deps, sent } = smsDeps();
    for (const bad of ['12912345678', '1391234567', '139123456789', 'x13912345678', '13912345678x', '+8613912345678']) {
      const { session, captcha } = await joinSession(deps);
      expect(await codeOf(sendSmsCaptcha(deps, session, { mobile: bad, captcha }, clientIp()))).toBe('BAD_USER_INPUT');
      // The captcha was not spent on a malformed number.
      expect(await peekCaptchaAnswer(deps, session.id, 'join')).toBe(captcha);
    }
    expect(sent).toEqual([]);
  });

  it('needs the registration captcha, not the login one', async () => {
    const { deps, sent } = smsDeps();
    const session = testSession();
    await issueCaptcha(deps, session, 'login');
    const loginAnswer = (await peekCaptchaAnswer(deps, session.id, 'login')) as string;
    const loginFailures = await metricValue(deps, 'parley_login_failures_total', { reason: 'captcha' });
    expect(await codeOf(sendSmsCaptcha(deps, session, { mobile: mobile(), captcha: loginAnswer }, clientIp()))).toBe(
      'CAPTCHA_INVALID',
    );
    expect(sent).toEqual([]);
    // A wrong registration captcha is not a failed login.
    expect(await metricValue(deps, 'parley_login_failures_total', { reason: 'captcha' })).toBe(loginFailures);
  });

  it('hands a 6-digit code to the gateway and keeps only its keyed hash in the Session, for 5 minutes', async () => {
    const t0 = Date.now();
    const { deps, sent } = smsDeps({ now: () => t0 });
    const number = mobile();
    const before = await metricValue(deps, 'parley_sms_sends_total', { outcome: 'sent' });
    const session = await send(deps, number);
    expect(sent).toEqual([{ mobile: number, code: expect.stringMatching(/^\d{6}$/), purpose: 'register' }]);
    expect(session.state.sms).toEqual({
      id: expect.any(String),
      mobile: number,
      codeHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      expiresAt: t0 + SMS_CODE_TTL_SECONDS * 1000,
    });
    expect(JSON.stringify(session.state)).not.toContain(sent[0]?.code);
    expect(session.state.createdAt).toBe(t0);
    expect(session.saves).toBeGreaterThan(0);
    expect(await metricValue(deps, 'parley_sms_sends_total', { outcome: 'sent' })).toBe(before + 1);
    expect(SMS_CODE_TTL_SECONDS).toBe(300);
  });

  it('a code the gateway refused is not kept, and the caller is told to retry later', async () => {
    const { deps } = smsDeps({ failing: true });
    const before = await metricValue(deps, 'parley_sms_sends_total', { outcome: 'failed' });
    const { session, captcha } = await joinSession(deps);
    const number = mobile();
    await expect(sendSmsCaptcha(deps, session, { mobile: number, captcha }, clientIp())).rejects.toMatchObject({
      code: 'SMS_SEND_FAILED',
      message: 'The SMS could not be sent, please try again later',
    });
    expect(session.state.sms).toBeUndefined();
    expect(await metricValue(deps, 'parley_sms_sends_total', { outcome: 'failed' })).toBe(before + 1);
  });

  it('one SMS per Session per minute; the refused request does not use the number’s quota', async () => {
    const { deps, sent } = smsDeps();
    const first = await joinSession(deps);
    await send(deps, mobile(), clientIp(), first);
    await issueCaptcha(deps, first.session, 'join');
    const captcha = (await peekCaptchaAnswer(deps, first.session.id, 'join')) as string;
    const other = mobile();
    await expect(sendSmsCaptcha(deps, first.session, { mobile: other, captcha }, clientIp())).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: expect.stringMatching(/^Too many SMS requests, please wait \d+ seconds before trying again$/),
    });
    // That number's per-minute quota is untouched.
    await send(deps, other);
    expect(sent.map((s) => s.mobile)).toEqual([expect.any(String), other]);
  });

  it('one SMS per number per minute, whatever the Session', async () => {
    const { deps } = smsDeps();
    const number = mobile();
    await send(deps, number);
    expect(await codeOf(send(deps, number))).toBe('RATE_LIMITED');
  });

  it('ten SMS per client address per hour; the refused one does not use the number’s quota', async () => {
    const { deps } = smsDeps();
    const ip = clientIp();
    for (let i = 0; i < 10; i++) await send(deps, mobile(), ip);
    const number = mobile();
    expect(await codeOf(send(deps, number, ip))).toBe('RATE_LIMITED');
    await send(deps, number, clientIp());
  });
});

describe('SMS registration codes: verifying', () => {
  async function sentCode(now?: () => number) {
    const { deps, sent } = smsDeps(now ? { now } : {});
    const number = mobile();
    const session = await send(deps, number);
    return { deps, session, number, code: sent[0]?.code as string };
  }
  const otherCode = (code: string) => (code === '000000' ? '000001' : '000000');

  it('accepts the right code once, and remembers the verified number', async () => {
    const { deps, session, number, code } = await sentCode();
    const saves = session.saves;
    await verifySmsCode(deps, session, { mobile: number, code });
    expect(session.state.smsVerifiedMobile).toBe(number);
    expect(session.state.sms).toBeUndefined();
    expect(session.saves).toBe(saves + 1);
    await expect(verifySmsCode(deps, session, { mobile: number, code })).rejects.toMatchObject({
      code: 'SMS_CODE_INVALID',
      message: 'No SMS code was sent to this number, request a new one',
    });
  });

  it('refuses a code for another number than the one it was sent to', async () => {
    const { deps, session, code } = await sentCode();
    expect(await codeOf(verifySmsCode(deps, session, { mobile: mobile(), code }))).toBe('SMS_CODE_INVALID');
    expect(session.state.smsVerifiedMobile).toBeUndefined();
  });

  it('refuses a code when none was sent in this Session', async () => {
    const { deps } = smsDeps();
    expect(await codeOf(verifySmsCode(deps, testSession(), { mobile: mobile(), code: '123456' }))).toBe(
      'SMS_CODE_INVALID',
    );
  });

  it('a wrong code is refused and the right one still works', async () => {
    const { deps, session, number, code } = await sentCode();
    await expect(verifySmsCode(deps, session, { mobile: number, code: otherCode(code) })).rejects.toMatchObject({
      code: 'SMS_CODE_INVALID',
      message: 'Wrong SMS code',
    });
    expect(session.state.sms).toBeDefined();
    await verifySmsCode(deps, session, { mobile: number, code });
    expect(session.state.smsVerifiedMobile).toBe(number);
  });

  it(`compares at most ${SMS_CODE_TRIES} codes, then discards the code`, async () => {
    const { deps, session, number, code } = await sentCode();
    expect(SMS_CODE_TRIES).toBe(5);
    for (let i = 0; i < SMS_CODE_TRIES; i++)
      expect(await codeOf(verifySmsCode(deps, session, { mobile: number, code: otherCode(code) }))).toBe(
        'SMS_CODE_INVALID',
      );
    const saves = session.saves;
    await expect(verifySmsCode(deps, session, { mobile: number, code })).rejects.toMatchObject({
      code: 'SMS_CODE_INVALID',
      message: 'No tries left for this SMS code, request a new one',
    });
    expect(session.state.sms).toBeUndefined();
    expect(session.saves).toBe(saves + 1);
    expect(session.state.smsVerifiedMobile).toBeUndefined();
  });

  it('an unreachable tries counter is that failure: the code is kept', async () => {
    const { deps, session, number, code } = await sentCode();
    const down = new Error('limit store down');
    const broken = {
      ...deps,
      rateLimiter: chargingInOrder(() => ({
        ...deps.rateLimiter({ name: 'x', points: 1, durationSeconds: 1 }),
        consume: () => Promise.reject(down),
      })),
    };
    await expect(verifySmsCode(broken, session, { mobile: number, code })).rejects.toBe(down);
    expect(session.state.sms).toBeDefined();
    await verifySmsCode(deps, session, { mobile: number, code });
  });

  it('parallel guesses get no more than the tries compared', async () => {
    const { deps, session, number, code } = await sentCode();
    const results = await Promise.all(
      Array.from({ length: 12 }, () => codeOf(verifySmsCode(deps, session, { mobile: number, code: otherCode(code) }))),
    );
    expect(results.every((r) => r === 'SMS_CODE_INVALID')).toBe(true);
    expect(await codeOf(verifySmsCode(deps, session, { mobile: number, code }))).toBe('SMS_CODE_INVALID');
  });

  it('expires 5 minutes after sending (by the domain clock), and is then discarded', async () => {
    let now = Date.now();
    const { deps, session, number, code } = await sentCode(() => now);
    const sentAt = now;
    now = sentAt + SMS_CODE_TTL_SECONDS * 1000 - 1;
    const fresh = structuredClone(session.state.sms);
    await verifySmsCode(deps, session, { mobile: number, code });
    // The same code again at the exact expiry: refused, and the pending code goes.
    session.state.sms = fresh;
    now = sentAt + SMS_CODE_TTL_SECONDS * 1000;
    await expect(verifySmsCode(deps, session, { mobile: number, code })).rejects.toMatchObject({
      code: 'SMS_CODE_INVALID',
      message: 'The SMS code has expired, request a new one',
    });
    expect(session.state.sms).toBeUndefined();
  });
});
