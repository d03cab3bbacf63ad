import { request as httpRequest, type IncomingMessage } from 'node:http';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSmsDriver, maskMobile } from '../../src/auth/sms-driver.js';
import { createLogger } from '../../src/log.js';
import { SMS_CODE_TRIES, SMS_CODE_TTL_SECONDS } from '../../src/resolvers/sms.js';
import { HttpClient } from '../support/clients.js';
import { smsGateway } from '../support/sms-gateway.js';
import { CAPTCHA, startTestApp, type TestApp, withClockAhead } from '../support/test-app.js';

/** The stand-in SMS gateway: numbers ending in 0500 make it fail. */
const FAILING_MOBILE = '13900000500';
let gateway: Awaited<ReturnType<typeof smsGateway>>;

let t: TestApp;
beforeAll(async () => {
  gateway = await smsGateway({ fails: (mobile) => mobile === FAILING_MOBILE });
  t = await startTestApp({
    env: {
      SMS_REGISTRATION: 'on',
      SMS_DRIVER: 'webhook',
      SMS_WEBHOOK_URL: gateway.url,
      TRUST_PROXY: 'on', // each test comes from an address of its own (X-Forwarded-For)
    },
  });
});
afterAll(async () => {
  await t?.stop();
  await gateway?.close();
});

/** Every Session ID and SMS code seen in this file, looked for in the log at the end. */
const sessionIds = new Set<string>();
let lastIp = 0;
let lastMobile = 0;
/** A mainland number no other test used. */
const newMobile = () => `1370000${String(++lastMobile).padStart(4, '0')}`;

const cookieHeader = (client: HttpClient) => [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
const sessionIdOf = (client: HttpClient) =>
  t.app.sessions.sessionIdOf({ headers: { cookie: cookieHeader(client) }, url: '/' } as IncomingMessage);

/** A browser-like client from an address of its own that remembers every Session ID it held. */
function newClient(ip = `10.2.${Math.floor(++lastIp / 250)}.${(lastIp % 250) + 1}`) {
  const client = new HttpClient(t.url);
  const request = client.request.bind(client);
  client.request = async (path, init = {}) => {
    const headers = new Headers(init.headers);
    if (!headers.has('x-forwarded-for')) headers.set('x-forwarded-for', ip);
    const res = await request(path, { ...init, headers });
    const sid = sessionIdOf(client);
    if (sid) sessionIds.add(sid);
    return res;
  };
  return client;
}

/** Fetches the registration captcha (unless told not to) and asks for an SMS code. */
async function requestSms(
  client: HttpClient,
  mobile: string,
  opts: { captcha?: string; fetchJoin?: boolean; json?: boolean } = {},
) {
  if (opts.fetchJoin ?? true) await client.captcha('join');
  const fields = { mobile, captcha: opts.captcha ?? CAPTCHA };
  return client.json('/agent/login/smscaptcha', {
    method: 'POST',
    ...(opts.json ? { json: fields } : { form: fields }),
  });
}

const verify = (client: HttpClient, mobile: string, code: string) =>
  client.json('/agent/login/smsverify', { method: 'POST', form: { mobile, code } });

const codeSentTo = (mobile: string) => gateway.codeSentTo(mobile);

/** POSTs a form on a fresh TCP connection (no keep-alive pool) and parses the envelope. */
function postOwnConnection(path: string, cookie: string, form: Record<string, string>) {
  const body = new URLSearchParams(form).toString();
  return new Promise<{ code: number; msg: string }>((resolve, reject) => {
    const req = httpRequest(
      `${t.url}${path}`,
      {
        method: 'POST',
        agent: false,
        headers: {
          cookie,
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () => resolve(JSON.parse(text)));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Runs `fn` with the domain clock moved `ms` forward. */
const later = <T>(ms: number, fn: () => Promise<T>) => withClockAhead(t, ms, fn);

describe('SMS captcha — POST /agent/login/smscaptcha', () => {
  it('success answers {code:0, msg:"", data:[]} and hands {mobile, code, purpose} to the SMS gateway', async () => {
    const mobile = newMobile();
    const { status, body } = await requestSms(newClient(), mobile);
    expect(status).toBe(200);
    expect(body).toEqual({ code: 0, msg: '', data: [] });
    expect(gateway.sent.at(-1)).toEqual({ mobile, code: expect.stringMatching(/^\d{6}$/), purpose: 'register' });
  });

  it('accepts a JSON body as well as a form', async () => {
    const { body } = await requestSms(newClient(), newMobile(), { json: true });
    expect(body).toEqual({ code: 0, msg: '', data: [] });
  });

  it.each(['12345', '12800000000', '1380000000', '138000000001', '+8613800000000', '1380000000a', ''])(
    'validates the mobile number format (%j)',
    async (mobile) => {
      const before = gateway.sent.length;
      const { body } = await requestSms(newClient(), mobile);
      expect(body.code).toBe(1000);
      expect(body.msg).toMatch(/mobile/);
      expect(gateway.sent.length).toBe(before);
    },
  );

  it('requires the registration captcha of the same Session first', async () => {
    const before = gateway.sent.length;
    const noCaptcha = await requestSms(newClient(), newMobile(), { fetchJoin: false });
    expect(noCaptcha.body.code).toBe(1001);
    const wrong = await requestSms(newClient(), newMobile(), { captcha: 'wrong' });
    expect(wrong.body.code).toBe(1001);
    const missing = await newClient().json('/agent/login/smscaptcha', {
      method: 'POST',
      form: { mobile: newMobile() },
    });
    expect(missing.body.code).toBe(1000);
    expect(missing.body.msg).toMatch(/captcha/);
    expect(gateway.sent.length).toBe(before);
  });

  it('the login captcha does not pass for registration (and vice versa)', async () => {
    const client = newClient();
    await client.captcha('login');
    expect((await requestSms(client, newMobile(), { fetchJoin: false })).body.code).toBe(1001);

    const other = newClient();
    await other.captcha('join');
    const login = await other.json('/agent/login/check', {
      method: 'POST',
      form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA },
    });
    expect(login.body.code).toBe(1001);
  });

  it('the registration captcha is single-use', async () => {
    const client = newClient();
    expect((await requestSms(client, newMobile())).body.code).toBe(0);
    expect((await requestSms(client, newMobile(), { fetchJoin: false })).body.code).toBe(1001);
  });

  it('rate limit per Session: a second send within the minute says how long to wait', async () => {
    const client = newClient();
    expect((await requestSms(client, newMobile())).body.code).toBe(0);
    const { status, headers, body } = await requestSms(client, newMobile());
    expect(status).toBe(429);
    expect(body.code).toBe(1429);
    expect(body.msg).toMatch(/wait \d+ seconds/);
    expect(Number(headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('rate limit per mobile number, across Sessions', async () => {
    const mobile = newMobile();
    expect((await requestSms(newClient(), mobile)).body.code).toBe(0);
    const { body } = await requestSms(newClient(), mobile);
    expect(body.code).toBe(1429);
    expect(body.msg).toMatch(/wait \d+ seconds/);
  });

  it('rate limit per IP, across Sessions and numbers', async () => {
    const ip = '10.99.0.1';
    for (let i = 0; i < 10; i++) {
      expect((await requestSms(newClient(ip), newMobile())).body.code).toBe(0);
    }
    const { status, body } = await requestSms(newClient(ip), newMobile());
    expect(status).toBe(429);
    expect(body).toEqual({ code: 1429, msg: expect.stringMatching(/wait \d+ seconds/), data: [] });
    // Another address is not affected.
    expect((await requestSms(newClient(), newMobile())).body.code).toBe(0);
  });

  it('a failure of the SMS gateway is a clear error, and no code is kept', async () => {
    const client = newClient();
    const { body } = await requestSms(client, FAILING_MOBILE);
    expect(body).toEqual({ code: 1007, msg: expect.stringMatching(/could not be sent/i), data: [] });
    // The gateway did receive a code, but the server kept none: it does not verify.
    const code = codeSentTo(FAILING_MOBILE);
    expect((await verify(client, FAILING_MOBILE, code)).body.code).toBe(1006);
  });
});

describe('SMS code verification — POST /agent/login/smsverify', () => {
  it('the right code passes once', async () => {
    const client = newClient();
    const mobile = newMobile();
    await requestSms(client, mobile);
    const code = codeSentTo(mobile);
    expect((await verify(client, mobile, code)).body).toMatchObject({ code: 0, data: { mobile, verified: true } });
    expect((await verify(client, mobile, code)).body.code).toBe(1006);
  });

  it('the code is bound to the Session and to the number it was sent to', async () => {
    const client = newClient();
    const mobile = newMobile();
    await requestSms(client, mobile);
    const code = codeSentTo(mobile);
    expect((await verify(newClient(), mobile, code)).body.code).toBe(1006);
    expect((await verify(client, newMobile(), code)).body.code).toBe(1006);
    expect((await verify(client, mobile, code)).body.code).toBe(0);
  });

  it('a wrong code costs a try; the right one still passes while tries are left', async () => {
    const client = newClient();
    const mobile = newMobile();
    await requestSms(client, mobile);
    const code = codeSentTo(mobile);
    const wrong = code === '000000' ? '000001' : '000000';
    const { body } = await verify(client, mobile, wrong);
    expect(body).toEqual({ code: 1006, msg: 'Wrong SMS code', data: [] });
    expect((await verify(client, mobile, code)).body.code).toBe(0);
  });

  it(`after ${SMS_CODE_TRIES} wrong codes the code is gone`, async () => {
    const client = newClient();
    const mobile = newMobile();
    await requestSms(client, mobile);
    const code = codeSentTo(mobile);
    const wrong = code === '000000' ? '000001' : '000000';
    for (let i = 0; i < SMS_CODE_TRIES; i++) {
      expect((await verify(client, mobile, wrong)).body).toEqual({ code: 1006, msg: 'Wrong SMS code', data: [] });
    }
    const { body } = await verify(client, mobile, code);
    expect(body).toEqual({ code: 1006, msg: expect.stringMatching(/no tries left/i), data: [] });
    expect((await verify(client, mobile, code)).body.code).toBe(1006);
  });

  it('tries are counted atomically: parallel wrong guesses in one Session use them all up', async () => {
    const client = newClient();
    const mobile = newMobile();
    await requestSms(client, mobile);
    const code = codeSentTo(mobile);
    const guesses = Array.from({ length: 20 }, (_, i) => String((Number(code) + 1 + i) % 1_000_000).padStart(6, '0'));
    // Each guess on a connection of its own, so the server really handles them side by side.
    const cookie = cookieHeader(client);
    const results = await Promise.all(
      guesses.map((guess) => postOwnConnection('/agent/login/smsverify', cookie, { mobile, code: guess })),
    );
    expect(results.every((r) => r.code === 1006)).toBe(true);
    // Only SMS_CODE_TRIES guesses were compared at all; the rest found no tries left.
    expect(results.filter((r) => r.msg === 'Wrong SMS code').length).toBeLessThanOrEqual(SMS_CODE_TRIES);
    expect((await verify(client, mobile, code)).body.code).toBe(1006);
  });

  it(`the SMS code expires after ${SMS_CODE_TTL_SECONDS / 60} minutes`, async () => {
    const client = newClient();
    const mobile = newMobile();
    await requestSms(client, mobile);
    const code = codeSentTo(mobile);
    const expired = await later(SMS_CODE_TTL_SECONDS * 1000 + 1000, () => verify(client, mobile, code));
    expect(expired.body).toEqual({ code: 1006, msg: expect.stringMatching(/expired/), data: [] });
    expect((await verify(client, mobile, code)).body.code).toBe(1006);

    const inTime = newClient();
    const mobile2 = newMobile();
    await requestSms(inTime, mobile2);
    const code2 = codeSentTo(mobile2);
    expect((await later(SMS_CODE_TTL_SECONDS * 1000 - 5000, () => verify(inTime, mobile2, code2))).body.code).toBe(0);
  });
});

describe('SMS drivers', () => {
  const capture = () => {
    let raw = '';
    const sink = new Writable({
      write(chunk, _enc, done) {
        raw += chunk.toString();
        done();
      },
    });
    return { log: createLogger('info', sink), raw: () => raw };
  };
  const stdoutDuring = async (fn: () => Promise<void>) => {
    let out = '';
    const write = process.stdout.write;
    process.stdout.write = ((chunk: string | Uint8Array) => {
      out += chunk.toString();
      return true;
    }) as typeof process.stdout.write;
    try {
      await fn();
    } finally {
      process.stdout.write = write;
    }
    return out;
  };

  it('the log driver prints the masked number, and the code in development only (never in the JSON log)', async () => {
    const message = { mobile: '13812345678', code: '483920', purpose: 'register' as const };
    for (const printCode of [true, false]) {
      const { log, raw } = capture();
      const driver = createSmsDriver({ driver: 'log', log, printCode });
      const out = await stdoutDuring(() => driver(message));
      expect(raw()).toContain('138****5678');
      expect(raw()).not.toContain('13812345678');
      expect(raw()).not.toContain('483920');
      expect(out.includes('483920')).toBe(printCode);
      expect(out).not.toContain('13812345678');
    }
  });

  it('the server prints codes with the log driver only when NODE_ENV=development', async () => {
    // The real gateway, as buildApp wires the log driver for each environment; the code sent is
    // read on its way to the driver (which still runs), and looked for in what the server printed.
    // (production takes the same branch as test; its Secure cookie needs HTTPS to get this far)
    for (const env of ['development', 'test'] as const) {
      const app = await startTestApp({ env: { NODE_ENV: env, SMS_REGISTRATION: 'on', SMS_DRIVER: 'log' } });
      try {
        const codes: string[] = [];
        const driver = app.app.deps.sms;
        app.app.deps.sms = (message) => {
          codes.push(message.code);
          return driver(message);
        };
        const client = new HttpClient(app.url);
        const mobile = newMobile();
        const out = await stdoutDuring(async () => {
          expect((await requestSms(client, mobile)).body.code).toBe(0);
        });
        const [code] = codes;
        expect(code).toMatch(/^\d{6}$/);
        expect([env, out.includes(code as string)]).toEqual([env, env === 'development']);
        expect(out).not.toContain(mobile);
        expect(app.rawLogs()).not.toContain(code);
        expect(app.rawLogs()).toContain(maskMobile(mobile));
        if (env === 'development') {
          // The printed code is the real one: it verifies the number.
          expect(out).toContain(`code for ${maskMobile(mobile)}: ${code}`);
          expect((await verify(client, mobile, code as string)).body.code).toBe(0);
        }
      } finally {
        await app.stop();
      }
    }
  });
});

describe('Logs', () => {
  it('the whole server log holds no Session ID, password, captcha answer or SMS code', async () => {
    // One more round through every way a secret could travel: login with a cid, the token as
    // header, as query and as cookie, a GraphQL login, captchas, SMS codes and failures.
    const client = newClient();
    await client.captcha('login');
    const login = await client.json('/agent/login/check', {
      method: 'POST',
      form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA, cid: 'push-secret' },
    });
    expect(login.body.code).toBe(0);
    const { token } = login.body.data;
    sessionIds.add(token);
    expect((await newClient().json('/agent/data/get', { headers: { token } })).body.code).toBe(0);
    expect((await newClient().json(`/agent/data/get?token=${token}&rand=1`)).body.code).toBe(0);
    expect((await newClient().json(`/agent/data/get?TOKEN=${token}`)).body.code).toBe(-1); // not a token name
    expect((await newClient().json(`/agent/data/get?%74oken=${token}`)).body.code).toBe(0); // percent-encoded name
    await newClient().json(`/agent/data/get?token[]=${token}`);
    expect((await client.json('/agent/data/get')).body.code).toBe(0);
    expect((await newClient().json('/agent/data/get', { headers: { token: 'x'.repeat(40) } })).body.code).toBe(-1);
    await newClient().json(`/agent/data/get?token=${token}&token=${token}`);
    const gqlClient = newClient();
    await gqlClient.captcha('login');
    const gql = await gqlClient.graphql(
      'mutation($p:String!){ login(username:"alice", password:$p, captcha:"test1"){ token } }',
      { p: 'alice-password' },
    );
    sessionIds.add(gql.body.data.login.token);
    await newClient().json('/agent/login/check', {
      method: 'POST',
      form: { username: 'alice', password: 'wrong-password-secret', captcha: CAPTCHA },
    });
    const smsClient = newClient();
    const mobile = newMobile();
    await requestSms(smsClient, mobile);
    await verify(smsClient, mobile, '999999');
    await verify(smsClient, mobile, codeSentTo(mobile));
    await client.json('/agent/logout', { method: 'POST' });

    const raw = t.rawLogs();
    expect(t.logs.length).toBeGreaterThan(10);
    expect(sessionIds.size).toBeGreaterThanOrEqual(4);
    for (const sid of sessionIds) expect(raw).not.toContain(sid);
    for (const secret of ['alice-password', 'wrong-password-secret', 'tom-password', 'bob-password', 'push-secret']) {
      expect(raw).not.toContain(secret);
    }
    expect(raw).not.toMatch(new RegExp(`(?<![A-Za-z0-9])${CAPTCHA}(?![A-Za-z0-9])`, 'i'));
    for (const { code } of gateway.sent) expect(raw).not.toMatch(new RegExp(`(?<![\\d.])${code}(?!\\d)`));
  });
});
