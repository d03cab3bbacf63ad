import { createHash, createHmac } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DomainError, LOGIN_REQUIRED_MSG } from '../../src/errors.js';
import { grantKey } from '../../src/resolvers/channel-auth.js';
import { formBool, formInt, formList, legacyInput } from '../../src/rest/legacy-input.js';
import { bodyError } from '../../src/rest/route.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { INTERNAL_TOKEN, sharedTestApp, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The edges of the REST adapter (src/rest/route.ts, legacy-input.ts, health.ts, pusher.ts), each
 * request made inside its test: the legacy form coercions, body-parser refusals, the internal
 * token, 405 with Allow, trailing slashes, readiness, and the Pusher authorization endpoint.
 */

const apps: TestApp[] = [];
const app = sharedTestApp(apps);
afterAll(async () => {
  for (const a of apps) await a.stop();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('legacy form coercions', () => {
  it('formInt takes a decimal integer string as a number and leaves anything else as it came', () => {
    expect(formInt('12')).toBe(12);
    expect(formInt('-3')).toBe(-3);
    expect(formInt('0')).toBe(0);
    expect(formInt('1.5')).toBe('1.5');
    expect(formInt('12abc')).toBe('12abc');
    expect(formInt('abc12')).toBe('abc12');
    expect(formInt('abc')).toBe('abc');
    expect(formInt('')).toBe('');
    expect(formInt(7)).toBe(7);
    expect(formInt(undefined)).toBeUndefined();
  });

  it('formBool takes true/1 and false/0, and leaves anything else as it came', () => {
    expect(formBool('true')).toBe(true);
    expect(formBool('1')).toBe(true);
    expect(formBool('false')).toBe(false);
    expect(formBool('0')).toBe(false);
    expect(formBool('')).toBe('');
    expect(formBool('yes')).toBe('yes');
    expect(formBool(true)).toBe(true);
    expect(formBool(false)).toBe(false);
    expect(formBool(undefined)).toBeUndefined();
  });

  it('formList splits a comma list, trims each item and drops empty ones', () => {
    expect(formList(' a, b ,,c ')).toEqual(['a', 'b', 'c']);
    expect(formList('')).toEqual([]);
    expect(formList(['x'])).toEqual(['x']);
  });

  it('legacyInput refuses a schema that is not an object, and a key the domain lacks', () => {
    expect(() => legacyInput(z.string() as never, {})).toThrow(new Error('a domain input must be a zod object'));
    expect(() => legacyInput(z.object({ a: z.string() }), { x: 'b' as never })).toThrow(
      new Error('the domain input has no field b'),
    );
  });

  it('a form integer the domain cannot read ("1.5", "12abc", "abc12") is refused; "2" is read', async () => {
    const t = await app();
    const v = await visitorToken(t.url);
    const client = new HttpClient(t.url);
    for (const limit of ['1.5', '12abc', 'abc12']) {
      const { status, body } = await client.json(`/visitor/message/list?limit=${limit}`, { headers: bearer(v.token) });
      expect({ limit, status, code: body.code }).toEqual({ limit, status: 400, code: 1000 });
      expect(body.msg).toMatch(/limit/);
    }
    const ok = await client.json('/visitor/message/list?limit=2', { headers: bearer(v.token) });
    expect({ status: ok.status, code: ok.body.code }).toEqual({ status: 200, code: 0 });
  });
});

describe('body-parser refusals', () => {
  it('bodyError names each body-parser error as a domain error, and passes any other through', () => {
    const as = (type: string) => {
      const e = bodyError({ type });
      expect(e).toBeInstanceOf(DomainError);
      return { code: (e as DomainError).code, msg: (e as DomainError).message };
    };
    expect(as('entity.too.large')).toEqual({ code: 'PAYLOAD_TOO_LARGE', msg: 'Request body larger than 64kb' });
    for (const type of ['entity.parse.failed', 'encoding.unsupported', 'charset.unsupported'])
      expect(as(type)).toEqual({ code: 'BAD_USER_INPUT', msg: 'Malformed request body' });
    expect(as('parameters.too.many')).toEqual({ code: 'BAD_USER_INPUT', msg: 'Too many parameters' });
    const other = { type: 'stream.aborted' };
    expect(bodyError(other)).toBe(other);
  });

  const post = async (t: TestApp, body: string, headers: Record<string, string>) => {
    const res = await fetch(`${t.url}/visitor/token`, { method: 'POST', headers, body });
    return { status: res.status, body: await res.json() };
  };

  it('a body over 64 kB answers 413 PAYLOAD_TOO_LARGE', async () => {
    const t = await app();
    const answer = await post(t, `appkey=${'a'.repeat(65 * 1024)}`, {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(answer).toEqual({ status: 413, body: { code: 1413, msg: 'Request body larger than 64kb', data: [] } });
  });

  it('malformed JSON, an unsupported charset or encoding answer 400 "Malformed request body"', async () => {
    const t = await app();
    const malformed = { status: 400, body: { code: 1000, msg: 'Malformed request body', data: [] } };
    expect(await post(t, '{"appkey":', { 'content-type': 'application/json' })).toEqual(malformed);
    expect(await post(t, '{"appkey":"demo-appkey"}', { 'content-type': 'application/json; charset=klingon' })).toEqual(
      malformed,
    );
    expect(
      await post(t, '{"appkey":"demo-appkey"}', {
        'content-type': 'application/json',
        'content-encoding': 'x-unknown',
      }),
    ).toEqual(malformed);
  });

  it('a form of more than 1000 parameters answers 400 "Too many parameters"', async () => {
    const t = await app();
    const form = Array.from({ length: 1001 }, (_, i) => `p${i}=1`).join('&');
    expect(await post(t, form, { 'content-type': 'application/x-www-form-urlencoded' })).toEqual({
      status: 400,
      body: { code: 1000, msg: 'Too many parameters', data: [] },
    });
  });
});

describe('the internal API token', () => {
  const publish = async (t: TestApp, headers: Record<string, string>) => {
    const res = await fetch(`${t.url}/internal/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ channel: 'global-demo', event: 'order.shipped', data: { order_id: 'o_1' } }),
    });
    return { status: res.status, body: await res.json() };
  };
  const refused = { status: 403, body: { code: 1403, msg: 'A valid internal API token is required', data: [] } };

  it('is refused when missing, wrong, shorter or longer, and accepted when exact', async () => {
    const t = await app();
    const sameLength = `${INTERNAL_TOKEN.slice(0, -1)}${INTERNAL_TOKEN.endsWith('x') ? 'y' : 'x'}`;
    expect(await publish(t, {})).toEqual(refused);
    expect(await publish(t, bearer(sameLength))).toEqual(refused);
    expect(await publish(t, bearer(INTERNAL_TOKEN.slice(0, -1)))).toEqual(refused);
    expect(await publish(t, bearer(`${INTERNAL_TOKEN}0`))).toEqual(refused);
    const ok = await publish(t, bearer(INTERNAL_TOKEN));
    expect(ok.status).toBe(202);
    expect(ok.body).toMatchObject({ code: 0, msg: 'ok', data: { id: expect.any(String) } });
  });
});

describe('paths and methods', () => {
  it('another method on a declared path answers 405 with Allow, as an envelope', async () => {
    const t = await app();
    const get = await fetch(`${t.url}/visitor/token`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(await get.json()).toEqual({ code: 1405, msg: 'Method not allowed; use POST', data: [] });
    const post = await fetch(`${t.url}/readyz`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect(await post.json()).toEqual({ code: 1405, msg: 'Method not allowed; use GET, HEAD', data: [] });
  });

  it('a path with a trailing slash or in other case is the declared path', async () => {
    const t = await app();
    for (const path of ['/visitor/token/', '/Visitor/Token']) {
      const { status, body } = await new HttpClient(t.url).json(path, {
        method: 'POST',
        json: { appkey: 'demo-appkey' },
      });
      expect({ path, status, code: body.code }).toEqual({ path, status: 200, code: 0 });
      expect(body.data.token).toEqual(expect.any(String));
    }
  });
});

describe('body encodings by route', () => {
  // Which parsers a route gets is decided while the routes are mounted: the gateway starts in
  // this test, so a mutation run counts the mounting as this test's.
  it('a GET endpoint reads no body; a JSON-only endpoint (/internal/events) does not read a form', async () => {
    const t = await startTestApp();
    try {
      const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = httpRequest(
          `${t.url}/readyz`,
          { method: 'GET', headers: { 'content-type': 'application/json', 'content-length': '1' } },
          (res) => {
            let text = '';
            res.on('data', (c) => {
              text += c;
            });
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          },
        );
        req.on('error', reject);
        req.end('{');
      });
      expect({ status, ready: JSON.parse(text).status }).toEqual({ status: 200, ready: 'ready' });
      const form = await fetch(`${t.url}/internal/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...bearer(INTERNAL_TOKEN) },
        body: 'channel=global-demo&event=order.shipped&data=x',
      });
      expect(form.status).toBe(400);
      expect((await form.json()).code).toBe(1000);
      // A route declaring no encodings reads both.
      const token = await new HttpClient(t.url).json('/visitor/token', {
        method: 'POST',
        form: { appkey: 'demo-appkey' },
      });
      expect({ status: token.status, code: token.body.code }).toEqual({ status: 200, code: 0 });
    } finally {
      await t.stop();
    }
  });
});

describe('liveness, readiness and metrics', () => {
  const ready = async (t: TestApp) => {
    const res = await fetch(`${t.url}/readyz`);
    return { status: res.status, body: await res.json() };
  };
  const redisWhenUp = (t: TestApp) => (t.app.deps.redis ? 'ok' : 'not configured');

  it('GET /healthz answered by express is {status: "ok"}', async () => {
    const t = await app();
    const res = await fetch(`${t.url}/healthz?via=express`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('ready with the database up; 503 "unavailable" with the database down', async () => {
    const t = await app();
    expect(await ready(t)).toEqual({ status: 200, body: { status: 'ready', database: 'ok', redis: redisWhenUp(t) } });
    const { database } = t.app.deps;
    const ping = database.ping;
    database.ping = async () => {
      throw new Error('database down');
    };
    try {
      expect(await ready(t)).toEqual({
        status: 503,
        body: { status: 'unavailable', database: 'unavailable', redis: redisWhenUp(t) },
      });
    } finally {
      database.ping = ping;
    }
  });

  it('503 with Redis configured and not answering, the database up', async () => {
    const t = await app();
    // On the embedded stores there is no Redis client: a configured one that does not answer stands in.
    const deps = t.app.deps as { redis?: { ping(): Promise<unknown> } };
    const redis = deps.redis;
    deps.redis = { ping: async () => Promise.reject(new Error('redis down')) };
    try {
      expect(await ready(t)).toEqual({
        status: 503,
        body: { status: 'unavailable', database: 'ok', redis: 'unavailable' },
      });
    } finally {
      deps.redis = redis;
    }
  });

  it('/metrics is not cached', async () => {
    const t = await app();
    const res = await fetch(`${t.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(await res.text()).toMatch(/^# HELP /m);
  });
});

describe('POST /pusher/auth', () => {
  const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
  /**
   * Pusher's `auth`: `<app key>:<hex HMAC-SHA256 of "socket_id:channel_name">` under the merchant's
   * app secret, which the gateway derives from SESSION_SECRET (src/resolvers/channel-auth.ts).
   */
  const pusherAuth = (t: TestApp, socketId: string, channel: string) => {
    const secret = createHmac('sha256', t.config.sessionSecret).update('pusher-app-secret:m_demo').digest();
    return `demo-appkey:${createHmac('sha256', secret).update(`${socketId}:${channel}`).digest('hex')}`;
  };
  const authorize = async (t: TestApp, form: Record<string, string>, headers: Record<string, string> = {}) => {
    const res = await fetch(`${t.url}/pusher/auth`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: new URLSearchParams(form).toString(),
    });
    return {
      status: res.status,
      cacheControl: res.headers.get('cache-control'),
      retryAfter: res.headers.get('retry-after'),
      body: await res.json(),
    };
  };

  it('nobody, or a stale bearer, is 401 UNAUTHENTICATED (no Retry-After)', async () => {
    const t = await app();
    const form = { socket_id: '1.2', channel_name: 'private-agent-a_alice' };
    const unauthenticated = {
      status: 401,
      cacheControl: 'no-store',
      retryAfter: null,
      body: { error: LOGIN_REQUIRED_MSG, code: 'UNAUTHENTICATED' },
    };
    expect(await authorize(t, form)).toEqual(unauthenticated);
    expect(await authorize(t, form, bearer('not-a-visitor-token'))).toEqual(unauthenticated);
  });

  it('a visitor is signed its own channel, the grant kept as its token’s hash; another channel is 403', async () => {
    const t = await app();
    const v = await visitorToken(t.url);
    const boot = await new HttpClient(t.url).json('/visitor/data/get', { headers: bearer(v.token) });
    const channel = `private-${boot.body.data.visitor.channel}`;
    const mine = await authorize(t, { socket_id: '11.22', channel_name: channel }, bearer(v.token));
    expect(mine).toEqual({
      status: 200,
      cacheControl: 'no-store',
      retryAfter: null,
      body: { auth: pusherAuth(t, '11.22', channel) },
    });
    expect(JSON.parse((await t.app.deps.kv.get(grantKey('11.22', channel))) as string)).toEqual({
      kind: 'visitor',
      tokenHash: sha256(v.token),
    });
    const other = await authorize(t, { socket_id: '11.23', channel_name: 'private-agent-a_alice' }, bearer(v.token));
    expect(other).toMatchObject({
      status: 403,
      cacheControl: 'no-store',
      retryAfter: null,
      body: { code: 'FORBIDDEN' },
    });
  });

  it('an agent is signed its own channel, the grant kept as its Session', async () => {
    const t = await app();
    const { client, token } = await agentSession(t.url);
    const res = await client.request('/pusher/auth', {
      method: 'POST',
      form: { socket_id: '33.44', channel_name: 'private-agent-a_alice' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(await res.json()).toEqual({ auth: pusherAuth(t, '33.44', 'private-agent-a_alice') });
    const grant = await t.app.deps.kv.get(grantKey('33.44', 'private-agent-a_alice'));
    expect(JSON.parse(grant as string)).toEqual({ kind: 'agent', sessionId: token });
  });
});
