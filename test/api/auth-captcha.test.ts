import type { IncomingMessage } from 'node:http';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPTCHA_TTL_SECONDS, type CaptchaPurpose, peekCaptchaAnswer } from '../../src/resolvers/captcha.js';
import { HttpClient } from '../support/clients.js';
import { startTestApp, type TestApp, withClockAhead } from '../support/test-app.js';

// Real, random captchas here (no CAPTCHA_TEST_ANSWER): a test reads the answer the server keeps
// for a Session, the way a person reads the image.
let t: TestApp;
/** Every answer drawn in this file, to look for in the log at the end. */
const answers: string[] = [];

beforeAll(async () => {
  t = await startTestApp({ env: { CAPTCHA_TEST_ANSWER: '' } });
});
afterAll(() => t?.stop());

const cookieHeader = (client: HttpClient) => [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');

/** The Session ID behind a client's cookie. */
function sessionIdOf(client: HttpClient): string {
  const sid = t.app.sessions.sessionIdOf({ headers: { cookie: cookieHeader(client) }, url: '/' } as IncomingMessage);
  if (!sid) throw new Error('the client has no Session cookie');
  return sid;
}

/** Fetches a captcha and returns what a person would read off the image. */
async function fetchCaptcha(client: HttpClient, purpose: CaptchaPurpose = 'login') {
  const { res } = await client.captcha(purpose);
  expect(res.status).toBe(200);
  const answer = await peekCaptchaAnswer(t.app.deps, sessionIdOf(client), purpose);
  if (!answer) throw new Error('no captcha answer stored');
  answers.push(answer);
  return answer;
}

const login = (client: HttpClient, captcha: string, username = 'alice', password = `${username}-password`) =>
  client.json<{ token: string; redirect: string }>('/agent/login/check', {
    method: 'POST',
    form: { username, password, captcha },
  });

/** Runs `fn` with the domain clock moved `ms` forward. */
const later = <T>(ms: number, fn: () => Promise<T>) => withClockAhead(t, ms, fn);

describe('Captcha endpoints — GET /agent/login/logincaptcha and /agent/login/joincaptcha', () => {
  it.each(['logincaptcha', 'joincaptcha'])('%s answers a real JPEG, not cached, readable by a person', async (path) => {
    const res = await fetch(`${t.url}/agent/login/${path}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/jpeg');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const jpeg = Buffer.from(await res.arrayBuffer());
    expect(jpeg.subarray(0, 3)).toEqual(Buffer.from([0xff, 0xd8, 0xff]));
    const meta = await sharp(jpeg).metadata();
    expect(meta.format).toBe('jpeg');
    expect(meta.width).toBeGreaterThanOrEqual(100);
    expect(meta.height).toBeGreaterThanOrEqual(40);
    // The Session it is tied to travels in an HttpOnly cookie.
    expect(res.headers.getSetCookie().join('\n')).toMatch(/^parley\.sid=.*HttpOnly/im);
  });

  it('any query parameter (e.g. rand) is ignored', async () => {
    const client = new HttpClient(t.url);
    const res = await client.request(`/agent/login/logincaptcha?rand=${Math.random()}&foo=bar&x[]=1&_=${Date.now()}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/jpeg');
    await res.arrayBuffer();
    const answer = await peekCaptchaAnswer(t.app.deps, sessionIdOf(client), 'login');
    expect(answer).toBeTruthy();
    expect((await login(client, answer as string)).body.code).toBe(0);
  });

  it('the image changes on every fetch', async () => {
    const client = new HttpClient(t.url);
    const first = await client.captcha('login');
    const second = await client.captcha('login');
    expect(first.jpeg.equals(second.jpeg)).toBe(false);
  });

  it('the answer never appears in a response', async () => {
    const client = new HttpClient(t.url);
    const res = await client.request('/agent/login/logincaptcha');
    const body = Buffer.from(await res.arrayBuffer());
    const answer = (await peekCaptchaAnswer(t.app.deps, sessionIdOf(client), 'login')) as string;
    answers.push(answer);
    const headers = JSON.stringify([...res.headers]);
    for (const form of [answer, answer.toLowerCase(), answer.toUpperCase()]) {
      expect(body.includes(Buffer.from(form))).toBe(false);
      expect(headers).not.toContain(form);
    }
    const failed = await login(client, 'wrong');
    expect(JSON.stringify(failed.body).toLowerCase()).not.toContain(answer.toLowerCase());
  });
});

describe('Captcha rules', () => {
  it('a correct captcha of the same Session lets the login through', async () => {
    const client = new HttpClient(t.url);
    const answer = await fetchCaptcha(client);
    const { body } = await login(client, answer);
    expect(body).toMatchObject({ code: 0, msg: 'ok' });
  });

  it('comparison is case-insensitive', async () => {
    const client = new HttpClient(t.url);
    const answer = await fetchCaptcha(client);
    const swapped = [...answer].map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())).join('');
    expect((await login(client, swapped)).body.code).toBe(0);
  });

  it('captcha from another Session fails', async () => {
    const owner = new HttpClient(t.url);
    const other = new HttpClient(t.url);
    const answer = await fetchCaptcha(owner);
    await fetchCaptcha(other); // the other Session has a captcha of its own, with another answer
    const stolen = await login(other, answer);
    expect(stolen.body.code).toBe(1001);
    // A Session with no captcha at all fails as well.
    expect((await login(new HttpClient(t.url), answer)).body.code).toBe(1001);
    // The owner's captcha was not touched by the other Session's attempts.
    expect((await login(owner, answer)).body.code).toBe(0);
  });

  it('a new fetch replaces the previous answer at once (regeneration invalidates the old answer)', async () => {
    const client = new HttpClient(t.url);
    const old = await fetchCaptcha(client);
    let current = await fetchCaptcha(client);
    while (current.toLowerCase() === old.toLowerCase()) current = await fetchCaptcha(client);
    const { body } = await login(client, old);
    expect(body.code).toBe(1001);
    expect(body.msg).toMatch(/captcha/i);

    const fresh = new HttpClient(t.url);
    await fetchCaptcha(fresh);
    const latest = await fetchCaptcha(fresh);
    expect((await login(fresh, latest)).body.code).toBe(0);
  });

  it('captcha is single-use: a right answer cannot be used twice', async () => {
    const client = new HttpClient(t.url);
    const answer = await fetchCaptcha(client);
    const first = await login(client, answer, 'alice', 'not-the-password');
    expect(first.body.code).toBe(1002); // past the captcha, stopped by the password
    const second = await login(client, answer);
    expect(second.body.code).toBe(1001);
  });

  it('captcha is single-use: a wrong answer uses it up too', async () => {
    const client = new HttpClient(t.url);
    const answer = await fetchCaptcha(client);
    expect((await login(client, `${answer}x`)).body.code).toBe(1001);
    expect((await login(client, answer)).body.code).toBe(1001);
  });

  it('the login captcha and the registration captcha never mix', async () => {
    const client = new HttpClient(t.url);
    const join = await fetchCaptcha(client, 'join');
    expect((await login(client, join)).body.code).toBe(1001);

    // Fetching a registration captcha does not replace the login captcha.
    const both = new HttpClient(t.url);
    const loginAnswer = await fetchCaptcha(both, 'login');
    await fetchCaptcha(both, 'join');
    expect((await login(both, loginAnswer)).body.code).toBe(0);
  });

  it(`the answer expires after ${CAPTCHA_TTL_SECONDS / 60} minutes even if never used`, async () => {
    const client = new HttpClient(t.url);
    const answer = await fetchCaptcha(client);
    const { body } = await later(CAPTCHA_TTL_SECONDS * 1000 + 1000, () => login(client, answer));
    expect(body.code).toBe(1001);

    const inTime = new HttpClient(t.url);
    const answer2 = await fetchCaptcha(inTime);
    expect((await later(CAPTCHA_TTL_SECONDS * 1000 - 5000, () => login(inTime, answer2))).body.code).toBe(0);
  });

  it('of ten parallel logins carrying one captcha, at most one gets past the captcha check', async () => {
    const client = new HttpClient(t.url);
    const answer = await fetchCaptcha(client);
    const cookie = cookieHeader(client);
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        new HttpClient(t.url).json('/agent/login/check', {
          method: 'POST',
          headers: { cookie },
          form: { username: 'alice', password: 'alice-password', captcha: answer },
        }),
      ),
    );
    const codes = results.map((r) => r.body.code).sort((a, b) => a - b);
    expect(codes).toEqual([0, ...Array(9).fill(1001)]);
  });

  it('the same holds when the parallel requests carry the Session as a token header: exactly one logs in', async () => {
    const client = new HttpClient(t.url);
    const answer = await fetchCaptcha(client);
    const token = sessionIdOf(client);
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        new HttpClient(t.url).json('/agent/login/check', {
          method: 'POST',
          headers: { token },
          form: { username: 'alice', password: 'alice-password', captcha: answer },
        }),
      ),
    );
    const codes = results.map((r) => r.body.code).sort((a, b) => a - b);
    // One request consumes the captcha and logs in; the nine others find it used (1001). All
    // ten failing would mean the token header did not carry the Session at all.
    expect(codes).toEqual([0, ...Array(9).fill(1001)]);
  });

  it('no captcha answer appears in the server log', () => {
    // Request IDs are UUIDs: a four-character hex group of one (say `4cc9`) can spell an answer
    // drawn from the same characters by chance, and is not a leak.
    const raw = t.rawLogs().replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '<uuid>');
    expect(answers.length).toBeGreaterThan(10);
    for (const answer of answers.filter((a) => /[a-z]/i.test(a))) {
      expect(raw).not.toMatch(new RegExp(`(?<![A-Za-z0-9])${answer}(?![A-Za-z0-9])`, 'i'));
    }
  });
});
