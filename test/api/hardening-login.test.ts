import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPTCHA_ALPHABET, drawCaptchaText } from '../../src/auth/captcha-image.js';
import { PRE_LOGIN_SESSION_TTL_SECONDS } from '../../src/http/session.js';
import { HttpClient } from '../support/clients.js';
import { CAPTCHA, startTestApp, type TestApp } from '../support/test-app.js';

// Issue 18 rows 6, 7, 8, 12, 13: captcha draw and failures, the address limit taken before the
// password is compared, short-lived pre-login Sessions, a lock that cannot deny service, and the
// SMS caller's own limits first. TRUST_PROXY: each test comes from addresses of its own.
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ env: { TRUST_PROXY: 'on', SMS_REGISTRATION: 'on' } });
});
afterAll(() => t?.stop());

let lastIp = 0;
const newAddress = () => `10.18.${Math.floor(++lastIp / 250)}.${(lastIp % 250) + 1}`;

/** A browser-like client whose requests come from `ip`. */
function clientFrom(ip: string) {
  const client = new HttpClient(t.url);
  const request = client.request.bind(client);
  client.request = (path, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set('x-forwarded-for', ip);
    return request(path, { ...init, headers });
  };
  return client;
}

async function login(ip: string, username: string, password: string, captcha = CAPTCHA) {
  const client = clientFrom(ip);
  await client.captcha('login');
  const { body } = await client.json('/agent/login/check', { method: 'POST', form: { username, password, captcha } });
  return body.code as number;
}

const sessionIdOf = (client: HttpClient) =>
  t.app.sessions.sessionIdOf({
    headers: { cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ') },
    url: '/',
  } as IncomingMessage) as string;

async function metric(name: string, labels: string) {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe('captcha text (row 6)', () => {
  it('is drawn uniformly from an alphabet without confusable characters', () => {
    expect(CAPTCHA_ALPHABET).not.toMatch(/[0O1IL]/i);
    const counts = new Map<string, number>();
    const draws = 20_000;
    for (let i = 0; i < draws; i++) {
      const text = drawCaptchaText();
      expect(text).toHaveLength(4);
      for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1);
    }
    expect([...counts.keys()].sort().join('')).toBe([...CAPTCHA_ALPHABET].sort().join(''));
    // Pearson's chi-square against the uniform distribution: 30 degrees of freedom; 80 is far
    // beyond the 1-in-a-million quantile of a fair draw (the old `x` substitution scores thousands).
    const expected = (draws * 4) / CAPTCHA_ALPHABET.length;
    const chi2 = [...counts.values()].reduce((sum, n) => sum + (n - expected) ** 2 / expected, 0);
    expect(chi2).toBeLessThan(80);
    const top = Math.max(...counts.values()) / (draws * 4);
    expect(top).toBeLessThan(0.045); // no character anywhere near the old 14.7 %
  });

  it('wrong answers count toward a per-address limit: past 30 even the right one is refused (1429)', async () => {
    const ip = newAddress();
    for (let i = 0; i < 30; i++) expect(await login(ip, 'alice', 'alice-password', 'wrong')).toBe(1001);
    const client = clientFrom(ip);
    await client.captcha('login');
    const { status, headers, body } = await client.json('/agent/login/check', {
      method: 'POST',
      form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA },
    });
    expect(status).toBe(429);
    expect(body.code).toBe(1429);
    expect(Number(headers.get('retry-after'))).toBeGreaterThan(0);
    // Another address is not affected.
    expect(await login(newAddress(), 'alice', 'alice-password')).toBe(0);
  });

  it('right answers do not count toward it', async () => {
    const ip = newAddress();
    for (let i = 0; i < 35; i++) expect(await login(ip, 'alice', 'alice-password')).toBe(0);
  });
});

describe('the per-address failure limit is taken before the password is compared (row 7)', () => {
  it('of 45 parallel failures from one address, at most 30 passwords are compared', async () => {
    const ip = newAddress();
    const before = await metric('parley_login_failures_total', 'reason="credentials"');
    const codes = await Promise.all(
      Array.from({ length: 45 }, (_, i) => login(ip, `nobody-${i}-${ip}`, 'wrong-password')),
    );
    expect(codes.every((c) => c === 1002)).toBe(true);
    const compared = (await metric('parley_login_failures_total', 'reason="credentials"')) - before;
    expect(compared).toBeLessThanOrEqual(30);
    expect(compared).toBeGreaterThan(0);
  });
});

describe('pre-login Sessions are short-lived (row 8)', () => {
  it('a captcha fetch stores its Session for at most PRE_LOGIN_SESSION_TTL_SECONDS; a login gets the full lifetime', async () => {
    const client = clientFrom(newAddress());
    await client.captcha('login');
    const sid = sessionIdOf(client);
    expect(await storedLifetimeSeconds(sid)).toBeLessThanOrEqual(PRE_LOGIN_SESSION_TTL_SECONDS);
    // Using it again (another captcha, a "not logged in" read) does not lengthen it past that.
    await client.captcha('login');
    await client.json('/agent/data/get');
    expect(await storedLifetimeSeconds(sid)).toBeLessThanOrEqual(PRE_LOGIN_SESSION_TTL_SECONDS);

    const { body } = await client.json('/agent/login/check', {
      method: 'POST',
      form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA },
    });
    expect(body.code).toBe(0);
    expect(await storedLifetimeSeconds(body.data.token)).toBeGreaterThan(t.config.sessionTtlSeconds - 60);
  });
});

describe('the account lock cannot deny service (row 12)', () => {
  it('after 5 wrong passwords from elsewhere, the right password from an address that logged in before still gets in', async () => {
    const office = newAddress();
    const attacker = newAddress();
    expect(await login(office, 'tom', 'tom-password')).toBe(0);
    for (let i = 0; i < 5; i++) expect(await login(attacker, 'tom', `guess-${i}`)).toBe(1002);
    // Locked for everyone else, the right password included.
    expect(await login(attacker, 'tom', 'tom-password')).toBe(1002);
    expect(await login(newAddress(), 'tom', 'tom-password')).toBe(1002);
    // The office still gets in.
    expect(await login(office, 'tom', 'tom-password')).toBe(0);
  });

  it('a known address keeps a limit of its own while the account is locked', async () => {
    const office = newAddress();
    expect(await login(office, 'bob', 'bob-password')).toBe(0);
    for (let i = 0; i < 5; i++) expect(await login(newAddress(), 'bob', `guess-${i}`)).toBe(1002);
    for (let i = 0; i < 5; i++) expect(await login(office, 'bob', `office-guess-${i}`)).toBe(1002);
    expect(await login(office, 'bob', 'bob-password')).toBe(1002);
  });
});

describe('SMS: the caller’s own limits are checked first (row 13)', () => {
  async function requestSms(ip: string, mobile: string) {
    const client = clientFrom(ip);
    await client.captcha('join');
    const { body } = await client.json('/agent/login/smscaptcha', {
      method: 'POST',
      form: { mobile, captcha: CAPTCHA },
    });
    return body.code as number;
  }

  it('an address over its quota does not burn the quota of a victim’s number', async () => {
    const pumper = newAddress();
    for (let i = 0; i < 10; i++) expect(await requestSms(pumper, `1391800${String(i).padStart(4, '0')}`)).toBe(0);
    const victim = '13918009999';
    expect(await requestSms(pumper, victim)).toBe(1429);
    // The victim's own request, from its own address, still gets a code.
    expect(await requestSms(newAddress(), victim)).toBe(0);
  });
});

/** Seconds until the stored Session `sid` expires (Redis TTL, or the in-process store's expiry). */
async function storedLifetimeSeconds(sid: string): Promise<number> {
  const redis = t.app.deps.redis;
  if (redis) return redis.ttl(`sess:${sid}`);
  const data = await new Promise<{ cookie?: { expires?: string | Date } } | null | undefined>((resolve, reject) =>
    t.app.sessions.store.get(sid, (err, sess) => (err ? reject(err) : resolve(sess as never))),
  );
  expect(data?.cookie?.expires).toBeDefined();
  return Math.round((new Date(data?.cookie?.expires as string).getTime() - Date.now()) / 1000);
}
