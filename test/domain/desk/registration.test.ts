import { asc, eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { verifyPassword } from '../../../src/auth/passwords.js';
import { agentGroups, agents, auditLog, merchants } from '../../../src/db/schema.js';
import type { Deps } from '../../../src/deps.js';
import { issueCaptcha, peekCaptchaAnswer } from '../../../src/resolvers/captcha.js';
import { ADMIN_PAGE_PATH, registerMerchant } from '../../../src/resolvers/desk/registration.js';
import { globalChannel } from '../../../src/resolvers/events.js';
import { agentSessionsKey } from '../../../src/resolvers/session.js';
import { sendSmsCaptcha } from '../../../src/resolvers/sms.js';
import { clientIp, recordEvents, refusalOf, type TestDeps, testSession, useTestDeps } from '../../support/deps.js';

let base: TestDeps;
useTestDeps((made) => {
  base = made.deps;
});

/** The run's deps with REGISTRATION (and SMS_REGISTRATION) as a test wants them; the SMS driver records what it sends. */
function regDeps(opts: { registration?: boolean; sms?: boolean } = {}) {
  const sent: { mobile: string; code: string }[] = [];
  // The merchants whose configuration change was announced to the other instances.
  const announced: string[] = [];
  const deps: Deps = {
    ...base,
    config: { ...base.config, registration: opts.registration ?? true, smsRegistration: opts.sms ?? false },
    sms: async (message) => {
      sent.push(message);
    },
    configCache: {
      ...base.configCache,
      announceChanged: async (merchantId: string) => {
        announced.push(merchantId);
        return base.configCache.announceChanged(merchantId);
      },
    },
  };
  return { deps, sent, announced };
}

let counter = 0;
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}${Math.random().toString(36).slice(2, 6)}`;
const mobile = () => `138${String(Date.now() % 1e4).padStart(4, '0')}${String(counter++ % 1e4).padStart(4, '0')}`;

/** A join Session holding a captcha, and its answer (as GET /agent/login/joincaptcha leaves it). */
async function joinSession(deps: Deps) {
  const session = testSession();
  await issueCaptcha(deps, session, 'join');
  return { session, captcha: (await peekCaptchaAnswer(deps, session.id, 'join')) as string };
}

const applicant = () => {
  const u = unique();
  return { merchantName: `Shop ${u}`, username: `owner_${u}`, nickname: `Owner ${u}`, password: 'owner-password' };
};

const merchantByName = (appname: string) => base.db.select().from(merchants).where(eq(merchants.appname, appname));
const agentsByName = (username: string) =>
  base.db
    .select()
    .from(agents)
    .where(eq(sql`lower(${agents.username})`, username.toLowerCase()));

describe('Registering a merchant (registerMerchant)', () => {
  it('is refused with REGISTRATION_DISABLED while REGISTRATION is off, and creates nothing', async () => {
    const { deps } = regDeps({ registration: false });
    const { session, captcha } = await joinSession(deps);
    const input = { ...applicant(), captcha };
    expect(await refusalOf(registerMerchant(deps, session, input, clientIp()))).toBe(
      'REGISTRATION_DISABLED: Merchant registration is turned off on this server',
    );
    expect(await merchantByName(input.merchantName)).toEqual([]);
    // The captcha was not even looked at: it is still there.
    expect(await peekCaptchaAnswer(deps, session.id, 'join')).toBe(captcha);
  });

  it('creates the merchant, its Default group and the admin in one go, logs the admin in and audits it', async () => {
    const { deps, announced } = regDeps();
    const { session, captcha } = await joinSession(deps);
    const input = applicant();
    const ip = clientIp();
    const oldId = session.id;
    const result = await registerMerchant(deps, session, { ...input, captcha }, ip);

    expect(result.redirect).toBe('/agent/admin');
    expect(ADMIN_PAGE_PATH).toBe('/agent/admin');
    // Generated: `m` + 12 lowercase letters or digits, and `<bid>-<random>`.
    expect(result.bid).toMatch(/^m[a-z0-9]{12}$/);
    expect(result.appkey.startsWith(`${result.bid}-`)).toBe(true);
    expect(result.appkey.length).toBe(result.bid.length + 1 + 16);
    // A new Session ID (no fixation), logged in as the new admin and indexed under it.
    expect(session.regenerations).toBe(1);
    expect(result.token).toBe(session.id);
    expect(result.token).not.toBe(oldId);

    const [m] = await merchantByName(input.merchantName);
    expect(m).toMatchObject({ bid: result.bid, appkey: result.appkey, appname: input.merchantName });
    expect(m?.registeredMobile).toBeNull();
    expect(announced).toEqual([m?.id]);
    expect(m?.identitySecret.length).toBeGreaterThanOrEqual(43);
    const groups = await base.db
      .select()
      .from(agentGroups)
      .where(eq(agentGroups.merchantId, m?.id ?? ''));
    expect(groups.map((g) => [g.name, g.isDefault])).toEqual([['Default', true]]);
    const [admin] = await agentsByName(input.username);
    expect(admin).toMatchObject({
      merchantId: m?.id,
      username: input.username,
      nickname: input.nickname,
      level: 'admin',
      groupId: groups[0]?.id,
    });
    expect(await verifyPassword(admin?.passwordHash, input.password)).toBe(true);
    expect(session.state.agent).toEqual({ agentId: admin?.id, merchantId: m?.id, bid: result.bid, level: 'admin' });
    expect(await deps.kv.members(agentSessionsKey(admin?.id ?? ''))).toEqual([session.id]);

    const audit = await base.db
      .select()
      .from(auditLog)
      .where(eq(auditLog.merchantId, m?.id ?? ''));
    expect(
      audit.map((r) => [r.actorKind, r.actorId, r.actorName, r.action, r.targetType, r.targetId, r.before, r.after]),
    ).toEqual([
      [
        'agent',
        admin?.id,
        input.nickname,
        'merchant.registered',
        'merchant',
        m?.id,
        null,
        { bid: result.bid, appname: input.merchantName, adminUsername: input.username, smsVerified: false },
      ],
    ]);
    expect(audit[0]?.clientAddress).toBe(ip);
    // The captcha was single-use: a second registration with it is refused.
    const again = await joinSession(deps);
    expect(await refusalOf(registerMerchant(deps, again.session, { ...applicant(), captcha }, clientIp()))).toBe(
      'CAPTCHA_INVALID: Wrong or expired captcha, please enter the new one',
    );
  });

  it('announces the new admin on the merchant’s global channel (agent.login)', async () => {
    const { deps } = regDeps();
    const { session, captcha } = await joinSession(deps);
    const bid = `r${unique()}`.slice(0, 32);
    const events = recordEvents(deps, [globalChannel(bid)]);
    await events.ready;
    const input = applicant();
    await registerMerchant(deps, session, { ...input, captcha, bid }, clientIp());
    const login = await events.first('agent.login');
    events.stop();
    const [admin] = await agentsByName(input.username);
    expect(JSON.stringify(login.data)).toContain(admin?.id ?? 'missing');
    expect(JSON.stringify(login.data)).toContain(input.nickname);
  });

  it('keeps a wanted bid and appkey', async () => {
    const { deps } = regDeps();
    const { session, captcha } = await joinSession(deps);
    const bid = `w${unique()}`.slice(0, 32);
    const appkey = `key_${unique()}`;
    const result = await registerMerchant(deps, session, { ...applicant(), captcha, bid, appkey }, clientIp());
    expect([result.bid, result.appkey]).toEqual([bid, appkey]);
    const [m] = await base.db.select().from(merchants).where(eq(merchants.bid, bid));
    expect(m?.appkey).toBe(appkey);
  });

  it('refuses a wrong or missing captcha with CAPTCHA_INVALID and leaves nothing', async () => {
    const { deps, announced } = regDeps();
    for (const captcha of ['wrong-answer', undefined]) {
      const { session } = await joinSession(deps);
      const input = applicant();
      expect(
        await refusalOf(registerMerchant(deps, session, { ...input, ...(captcha ? { captcha } : {}) }, clientIp())),
      ).toBe('CAPTCHA_INVALID: Wrong or expired captcha, please enter the new one');
      expect(await merchantByName(input.merchantName)).toEqual([]);
      expect(await agentsByName(input.username)).toEqual([]);
      expect(session.regenerations).toBe(0);
    }
    expect(announced).toEqual([]);
  });

  it('refuses blank names and malformed bids or appkeys by field', async () => {
    const { deps } = regDeps();
    const cases: [Record<string, string>, string][] = [
      [{ merchantName: '   ' }, 'BAD_USER_INPUT: merchantName is required'],
      [{ nickname: '  ' }, 'BAD_USER_INPUT: nickname is required'],
      [{ bid: 'A-upper' }, 'BAD_USER_INPUT: bid must be 2-32 lowercase letters, digits, _ or -'],
      [{ bid: 'x' }, 'BAD_USER_INPUT: bid must be 2-32 lowercase letters, digits, _ or -'],
      [{ appkey: 'short' }, 'BAD_USER_INPUT: appkey must be 8-128 letters, digits, _ or -'],
    ];
    for (const [change, refusal] of cases) {
      const { session, captcha } = await joinSession(deps);
      expect(await refusalOf(registerMerchant(deps, session, { ...applicant(), captcha, ...change }, clientIp()))).toBe(
        refusal,
      );
    }
  });

  it('refuses a taken username, bid or appkey by name and leaves nothing behind', async () => {
    const { deps } = regDeps();
    const first = await joinSession(deps);
    const taken = applicant();
    const made = await registerMerchant(deps, first.session, { ...taken, captcha: first.captcha }, clientIp());
    const cases: [Record<string, string>, string][] = [
      // Unique across Parley, case-insensitively.
      [{ username: taken.username.toUpperCase() }, 'BAD_USER_INPUT: username is already taken'],
      [{ bid: made.bid }, 'BAD_USER_INPUT: bid is already taken'],
      [{ appkey: made.appkey }, 'BAD_USER_INPUT: appkey is already taken'],
    ];
    for (const [change, refusal] of cases) {
      const { session, captcha } = await joinSession(deps);
      const input = { ...applicant(), ...change };
      expect(await refusalOf(registerMerchant(deps, session, { ...input, captcha }, clientIp()))).toBe(refusal);
      // The transaction rolled back: no merchant, group or agent of the attempt.
      expect(await merchantByName(input.merchantName)).toEqual([]);
      expect(session.regenerations).toBe(0);
      if (!change.username) expect(await agentsByName(input.username)).toEqual([]);
    }
    expect((await base.db.select().from(merchants).where(eq(merchants.bid, made.bid))).length).toBe(1);
  });

  it('allows 10 registrations an hour from one address; the 11th is RATE_LIMITED before anything else', async () => {
    // SMS mode without a mobile number: each attempt is counted, then refused cheaply.
    const { deps } = regDeps({ sms: true });
    const ip = clientIp();
    for (let i = 0; i < 10; i++) {
      expect(await refusalOf(registerMerchant(deps, testSession(), applicant(), ip))).toBe(
        'BAD_USER_INPUT: mobile: is required',
      );
    }
    expect(await refusalOf(registerMerchant(deps, testSession(), applicant(), ip))).toMatch(
      /^RATE_LIMITED: Too many registrations, please wait \d+ seconds$/,
    );
    // Another address is not affected.
    expect(await refusalOf(registerMerchant(deps, testSession(), applicant(), clientIp()))).toBe(
      'BAD_USER_INPUT: mobile: is required',
    );
  });
});

describe('Registering with SMS_REGISTRATION=on', () => {
  it('asks for the code of a number not verified in the Session, and refuses a wrong one', async () => {
    const { deps } = regDeps({ sms: true });
    const number = mobile();
    expect(await refusalOf(registerMerchant(deps, testSession(), { ...applicant(), mobile: number }, clientIp()))).toBe(
      'BAD_USER_INPUT: code is required',
    );
    // A number verified in the Session is not this one: the code is still asked for.
    const other = testSession({ smsVerifiedMobile: mobile() });
    expect(await refusalOf(registerMerchant(deps, other, { ...applicant(), mobile: number }, clientIp()))).toBe(
      'BAD_USER_INPUT: code is required',
    );
    expect(
      await refusalOf(
        registerMerchant(deps, testSession(), { ...applicant(), mobile: number, code: '000000' }, clientIp()),
      ),
    ).toMatch(/^SMS_CODE_INVALID: /);
  });

  it('accepts the code sent to the number, records the number and audits smsVerified', async () => {
    const { deps, sent } = regDeps({ sms: true });
    const { session, captcha } = await joinSession(deps);
    const number = mobile();
    await sendSmsCaptcha(deps, session, { mobile: number, captcha }, clientIp());
    const code = sent.find((s) => s.mobile === number)?.code ?? '';
    const input = applicant();
    await registerMerchant(deps, session, { ...input, mobile: number, code }, clientIp());
    const [m] = await merchantByName(input.merchantName);
    expect(m?.registeredMobile).toBe(number);
    const [row] = await base.db
      .select()
      .from(auditLog)
      .where(eq(auditLog.merchantId, m?.id ?? ''));
    expect(row?.after).toMatchObject({ smsVerified: true, adminUsername: input.username });
  });

  it('needs no code for the number verified in this Session; one number registers one merchant only', async () => {
    const { deps } = regDeps({ sms: true });
    const number = mobile();
    const input = applicant();
    await registerMerchant(deps, testSession({ smsVerifiedMobile: number }), { ...input, mobile: number }, clientIp());
    expect((await merchantByName(input.merchantName)).map((m) => m.registeredMobile)).toEqual([number]);

    const second = applicant();
    const session = testSession({ smsVerifiedMobile: number });
    expect(await refusalOf(registerMerchant(deps, session, { ...second, mobile: number }, clientIp()))).toBe(
      'MOBILE_ALREADY_REGISTERED: This mobile number has already registered a merchant: log in with that merchant’s admin account',
    );
    expect(await merchantByName(second.merchantName)).toEqual([]);
    expect(await agentsByName(second.username)).toEqual([]);
    const owners = await base.db
      .select()
      .from(merchants)
      .where(eq(merchants.registeredMobile, number))
      .orderBy(asc(merchants.id));
    expect(owners.map((m) => m.appname)).toEqual([input.merchantName]);
  });
});
