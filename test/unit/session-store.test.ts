import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sign } from 'cookie-signature';
import express, { type Request, type Response } from 'express';
import type { SessionData, Store } from 'express-session';
import type { Redis } from 'ioredis';
import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Config } from '../../src/config.js';
import {
  createSessionLayer,
  hasSessionCookie,
  PRE_LOGIN_SESSION_TTL_SECONDS,
  requestSessionPort,
  SESSION_COOKIE,
  sessionDirectory,
} from '../../src/http/session.js';
import { useTestRedis } from '../support/test-redis.js';

/**
 * The agent Session layer checked value by value without a gateway: the Session ID a request
 * carries, the cookie rewrite for a `token`, both Session stores (in memory, and on a real Redis:
 * REDIS_URL, else a private redis-server) with their ended markers and pre-login lifetime, the
 * Session directory, and the client info of a request.
 */

const SECRET = 'session-store-test-secret';
const TTL = 3600;
const config = { sessionSecret: SECRET, sessionTtlSeconds: TTL, trustProxy: false, env: 'test' } as Config;

const testRedis = useTestRedis();

afterEach(() => {
  vi.useRealTimers();
});

interface FakeReq {
  url?: string;
  headers?: Record<string, string | string[] | undefined>;
  remoteAddress?: string;
  trustProxy?: boolean;
  noApp?: boolean;
}
const req = (r: FakeReq = {}) =>
  ({
    method: 'GET',
    url: r.url ?? '/',
    headers: r.headers ?? {},
    socket: { remoteAddress: r.remoteAddress ?? '10.0.0.7' },
    ...(r.noApp
      ? {}
      : { app: { get: (name: string) => (name === 'trust proxy' ? (r.trustProxy ?? false) : undefined) } }),
  }) as unknown as Request & IncomingMessage;

const sid = () => randomBytes(18).toString('base64url'); // 24 characters of [A-Za-z0-9_-]
const signed = (id: string, secret = SECRET) => `s:${sign(id, secret)}`;
const cookieOf = (id: string, secret = SECRET) => `${SESSION_COOKIE}=${encodeURIComponent(signed(id, secret))}`;
const agent = { agentId: 'a1', merchantId: 'm1', bid: 'b1', level: 'admin' };
const loggedIn = (expiresInMs = TTL * 1000) =>
  ({
    cookie: { originalMaxAge: TTL * 1000, expires: new Date(Date.now() + expiresInMs) },
    agent,
  }) as unknown as SessionData;
const preLogin = (expiresInMs = TTL * 1000) =>
  ({
    cookie: { originalMaxAge: TTL * 1000, expires: new Date(Date.now() + expiresInMs) },
    captcha: { answer: 'x' },
  }) as unknown as SessionData;

/** Calls a callback-style store method and records what its callback got and what it returned. */
async function viaCallback<T>(call: (cb: (err?: unknown, data?: unknown) => void) => T) {
  let args: unknown[] | undefined;
  const returned = await call((...a: unknown[]) => {
    args = a;
  });
  return { args, returned };
}
const getOf = (store: Store, id: string) =>
  new Promise<SessionData | null | undefined>((resolve, reject) =>
    store.get(id, (err, data) => (err ? reject(err) : resolve(data))),
  );
const setOf = (store: Store, id: string, sess: SessionData) =>
  new Promise<void>((resolve, reject) => store.set(id, sess, (err) => (err ? reject(err) : resolve())));
/** The Redis store's methods also return a promise (what a caller without a callback gets). */
const promising = (store: Store) =>
  store as unknown as {
    get(sid: string): Promise<SessionData | null>;
    set(sid: string, sess: SessionData): Promise<void>;
    destroy(sid: string): Promise<void>;
  };
const touchOf = (store: Store, id: string, sess: SessionData) =>
  new Promise<void>((resolve) => store.touch?.(id, sess, () => resolve()));
const destroyOf = (store: Store, id: string) =>
  new Promise<void>((resolve, reject) => store.destroy(id, (err) => (err ? reject(err) : resolve())));

describe('the Session ID a request carries', () => {
  const layer = createSessionLayer(config, undefined);
  const idOf = layer.sessionIdOf;

  it('an explicit token (header, else query) wins over the cookie', () => {
    const token = sid();
    const other = sid();
    expect(idOf(req({ headers: { token } }))).toBe(token);
    expect(idOf(req({ headers: { token, cookie: cookieOf(other) } }))).toBe(token);
    expect(idOf(req({ url: `/x?token=${token}`, headers: { cookie: cookieOf(other) } }))).toBe(token);
    expect(idOf(req({ url: `/x?token=${other}`, headers: { token } }))).toBe(token);
  });

  it('an empty token falls back to the cookie', () => {
    const id = sid();
    expect(idOf(req({ url: '/x?token=', headers: { cookie: cookieOf(id) } }))).toBe(id);
    expect(idOf(req({ headers: { token: '', cookie: cookieOf(id) } }))).toBe(id);
    expect(idOf(req({ url: '/x?token=' }))).toBeUndefined();
  });

  it('a malformed token names no Session (16 to 128 of [A-Za-z0-9_-], whole token)', () => {
    const cookie = cookieOf(sid());
    expect(idOf(req({ headers: { token: 'a'.repeat(16) } }))).toBe('a'.repeat(16));
    expect(idOf(req({ headers: { token: `aZ09_-${'b'.repeat(122)}` } }))).toBe(`aZ09_-${'b'.repeat(122)}`);
    expect(idOf(req({ headers: { token: 'a'.repeat(15), cookie } }))).toBe('-');
    expect(idOf(req({ headers: { token: 'a'.repeat(129), cookie } }))).toBe('-');
    expect(idOf(req({ headers: { token: `!${'a'.repeat(20)}`, cookie } }))).toBe('-');
    expect(idOf(req({ headers: { token: `${'a'.repeat(20)}!`, cookie } }))).toBe('-');
    expect(idOf(req({ headers: { token: `${'a'.repeat(10)}.${'a'.repeat(10)}`, cookie } }))).toBe('-');
  });

  it('a repeated token is refused', () => {
    expect(() => idOf(req({ url: `/x?token=${sid()}&token=${sid()}` }))).toThrow(
      'token must be given once, as a single value',
    );
  });

  it('reads the signed cookie among others; no cookie, an unsigned or ill-signed one names none', () => {
    const id = sid();
    expect(idOf(req())).toBeUndefined();
    expect(idOf(req({ headers: { cookie: 'a=1; b=2' } }))).toBeUndefined();
    expect(idOf(req({ headers: { cookie: `a=1; ${cookieOf(id)}; b=2` } }))).toBe(id);
    expect(idOf(req({ headers: { cookie: `a=1;${cookieOf(id)}` } }))).toBe(id);
    // spaces around the value are trimmed
    expect(idOf(req({ headers: { cookie: `${SESSION_COOKIE}= ${signed(id)} ; a=1` } }))).toBe(id);
    // not signed ("s:" missing), signed with another secret, tampered
    expect(idOf(req({ headers: { cookie: `${SESSION_COOKIE}=${id}` } }))).toBeUndefined();
    expect(idOf(req({ headers: { cookie: `${SESSION_COOKIE}=xx${sign(id, SECRET)}` } }))).toBeUndefined();
    expect(idOf(req({ headers: { cookie: cookieOf(id, 'another-secret') } }))).toBeUndefined();
    expect(idOf(req({ headers: { cookie: `${SESSION_COOKIE}=s:${id}.forged` } }))).toBeUndefined();
    // a cookie whose name only ends like ours is not ours
    expect(idOf(req({ headers: { cookie: `x${cookieOf(id)}` } }))).toBeUndefined();
  });

  it('a malformed percent-encoding names no Session, even with a later cookie of the same name', () => {
    const id = sid();
    expect(idOf(req({ headers: { cookie: `${SESSION_COOKIE}=%E0%A4%A; ${cookieOf(id)}` } }))).toBeUndefined();
  });

  it('hasSessionCookie: whether the Session cookie is there, whatever its value', () => {
    expect(hasSessionCookie(req())).toBe(false);
    expect(hasSessionCookie(req({ headers: { cookie: 'a=1; b=2' } }))).toBe(false);
    expect(hasSessionCookie(req({ headers: { cookie: `a=1; ${SESSION_COOKIE}=x=y` } }))).toBe(true);
    expect(hasSessionCookie(req({ headers: { cookie: `  ${SESSION_COOKIE} =anything` } }))).toBe(true);
    expect(hasSessionCookie(req({ headers: { cookie: `${SESSION_COOKIE}=` } }))).toBe(true);
    expect(hasSessionCookie(req({ headers: { cookie: `a=${SESSION_COOKIE}` } }))).toBe(false);
    expect(hasSessionCookie(req({ headers: { cookie: `${SESSION_COOKIE}=%` } }))).toBe(false);
  });
});

describe('a token presented as the Session cookie', () => {
  const layer = createSessionLayer(config, undefined);
  const tokenAsCookie = layer.middleware[0] as (req: Request, res: Response, next: (err?: unknown) => void) => void;
  const rewrite = (r: Request) => {
    let passed: unknown = 'not called';
    tokenAsCookie(r, { writeHead: () => undefined } as unknown as Response, (err) => {
      passed = err;
    });
    return { cookie: r.headers.cookie, passed };
  };

  it('replaces the Session cookie and keeps the others as they were', () => {
    const token = sid();
    const mine = `${SESSION_COOKIE}=${encodeURIComponent(signed(token))}`;
    expect(rewrite(req({ headers: { token } }))).toEqual({ cookie: mine, passed: undefined });
    expect(rewrite(req({ headers: { token, cookie: `a=1;  b=x=y ;${cookieOf(sid())}; c=3` } })).cookie).toBe(
      `a=1; b=x=y; c=3; ${mine}`,
    );
    expect(rewrite(req({ headers: { token, cookie: ` ${cookieOf(sid())}` } })).cookie).toBe(mine);
    expect(rewrite(req({ url: `/x?token=${token}`, headers: { cookie: 'a=1' } })).cookie).toBe(`a=1; ${mine}`);
    expect(layer.sessionIdOf(req({ headers: { cookie: rewrite(req({ headers: { token } })).cookie } }))).toBe(token);
  });

  it('leaves a request without a token alone, and passes a repeated token on as an error', () => {
    expect(rewrite(req({ headers: { cookie: 'a=1' } }))).toEqual({ cookie: 'a=1', passed: undefined });
    const { passed } = rewrite(req({ url: `/x?token=${sid()}&token=${sid()}` }));
    expect(passed).toBeInstanceOf(Error);
  });
});

describe('the in-memory Session store', () => {
  const fresh = () => createSessionLayer(config, undefined);
  const at = (ms: number) => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(ms);
  };

  it('a destroyed Session cannot be written back during its lifetime, then can', async () => {
    const { store } = fresh();
    const t0 = Date.UTC(2030, 0, 1);
    at(t0);
    const a = sid();
    await setOf(store, a, loggedIn());
    expect((await getOf(store, a))?.agent).toEqual(agent);
    await destroyOf(store, a);
    expect(await getOf(store, a)).toBeFalsy();
    at(t0 + 1000);
    await setOf(store, a, loggedIn());
    expect(await getOf(store, a)).toBeFalsy();
    expect(() => store.set(a, loggedIn())).not.toThrow(); // no callback
    at(t0 + TTL * 1000 - 1);
    await setOf(store, a, loggedIn());
    expect(await getOf(store, a)).toBeFalsy();
    at(t0 + TTL * 1000);
    await setOf(store, a, loggedIn());
    expect((await getOf(store, a))?.agent).toEqual(agent);
  });

  it('other Sessions are stored while one is ended, and ending one keeps the others ended', async () => {
    const { store } = fresh();
    const t0 = Date.UTC(2030, 0, 2);
    at(t0);
    const [a, b, c] = [sid(), sid(), sid()];
    await setOf(store, c, loggedIn());
    expect((await getOf(store, c))?.agent).toEqual(agent);
    await destroyOf(store, a);
    at(t0 + 10);
    await destroyOf(store, b);
    await setOf(store, a, loggedIn());
    await setOf(store, b, loggedIn());
    expect(await getOf(store, a)).toBeFalsy();
    expect(await getOf(store, b)).toBeFalsy();
  });

  it('expired ended markers are dropped when another Session ends', async () => {
    const { store } = fresh();
    const ended = Reflect.get(store, 'endedUntil') as Map<string, number>;
    const t0 = Date.UTC(2030, 0, 3);
    at(t0);
    const [a, b] = [sid(), sid()];
    await destroyOf(store, a);
    at(t0 + TTL * 1000);
    await destroyOf(store, b);
    expect([...ended.keys()]).toEqual([b]);
  });

  it('caps a pre-login Session at the pre-login lifetime, not a login one or an earlier expiry', async () => {
    const { store } = fresh();
    const t0 = Date.UTC(2030, 0, 4);
    at(t0);
    const [a, b, c] = [sid(), sid(), sid()];
    const expiresOf = async (id: string) => new Date(String((await getOf(store, id))?.cookie.expires)).getTime();
    await setOf(store, a, preLogin());
    expect(await expiresOf(a)).toBe(t0 + PRE_LOGIN_SESSION_TTL_SECONDS * 1000);
    await setOf(store, b, preLogin(60_000));
    expect(await expiresOf(b)).toBe(t0 + 60_000);
    await setOf(store, c, loggedIn());
    expect(await expiresOf(c)).toBe(t0 + TTL * 1000);
    // touch caps the same way
    at(t0 + 1000);
    await touchOf(store, a, preLogin());
    expect(await expiresOf(a)).toBe(t0 + 1000 + PRE_LOGIN_SESSION_TTL_SECONDS * 1000);
    at(t0 + PRE_LOGIN_SESSION_TTL_SECONDS * 1000 + 1000);
    expect(await getOf(store, a)).toBeFalsy();
    expect((await getOf(store, c))?.agent).toEqual(agent);
  });
});

describe.runIf(testRedis.available)('the Redis Session store', () => {
  let redis: Redis;
  let store: Store;
  beforeAll(async () => {
    redis = await testRedis.client();
  });
  // A store per test, not per file: what its construction sets (the ended marker's key, touch
  // disabled) then belongs to each test, so the mutation run runs these tests against it.
  beforeEach(() => {
    store = createSessionLayer(config, redis).store;
  });

  it('set, get and destroy through callbacks, under sess: keys with the Session lifetime', async () => {
    const a = sid();
    expect(await viaCallback((cb) => store.set(a, loggedIn(), cb))).toEqual({ args: [null], returned: undefined });
    expect(JSON.parse(String(await redis.get(`sess:${a}`))).agent).toEqual(agent);
    expect(await redis.ttl(`sess:${a}`)).toBeGreaterThan(TTL - 5);
    const got = await viaCallback((cb) => store.get(a, cb));
    expect(got.args?.[0]).toBeNull();
    expect((got.args?.[1] as SessionData | undefined)?.agent).toEqual(agent);
    expect((got.returned as unknown as SessionData | undefined)?.agent).toEqual(agent);
    // without a callback, the promise carries the Session
    expect((await promising(store).get(a))?.agent).toEqual(agent);
    expect(await viaCallback((cb) => store.get(sid(), cb))).toEqual({ args: [null, null], returned: null });
    expect(await viaCallback((cb) => store.destroy(a, cb))).toEqual({ args: [null], returned: undefined });
    expect(await redis.exists(`sess:${a}`)).toBe(0);
    expect(await getOf(store, a)).toBeNull();
  });

  it('a read rolls the idle lifetime; a pre-login Session rolls on the pre-login lifetime', async () => {
    const [a, p] = [sid(), sid()];
    await setOf(store, a, loggedIn());
    await redis.expire(`sess:${a}`, 100);
    await getOf(store, a);
    expect(await redis.ttl(`sess:${a}`)).toBeGreaterThan(TTL - 5);

    await setOf(store, p, preLogin());
    const ttl = await redis.ttl(`sess:${p}`);
    expect(ttl).toBeLessThanOrEqual(PRE_LOGIN_SESSION_TTL_SECONDS);
    expect(ttl).toBeGreaterThan(PRE_LOGIN_SESSION_TTL_SECONDS - 5);
    await redis.expire(`sess:${p}`, 100);
    await getOf(store, p);
    expect(await redis.ttl(`sess:${p}`)).toBeGreaterThan(PRE_LOGIN_SESSION_TTL_SECONDS - 5);
    expect(await redis.ttl(`sess:${p}`)).toBeLessThanOrEqual(PRE_LOGIN_SESSION_TTL_SECONDS);
    // touch is a no-op: it neither extends a pre-login Session nor needs a round trip
    await redis.expire(`sess:${p}`, 100);
    await touchOf(store, p, preLogin());
    expect(await redis.ttl(`sess:${p}`)).toBeLessThanOrEqual(100);
  });

  it('a destroyed Session leaves an ended marker for its lifetime, and cannot be written back', async () => {
    const [a, b] = [sid(), sid()];
    await setOf(store, a, loggedIn());
    await destroyOf(store, a);
    expect(await redis.get(`sess-ended:${a}`)).toBe('1');
    expect(await redis.ttl(`sess-ended:${a}`)).toBeGreaterThan(TTL - 5);
    await setOf(store, a, loggedIn());
    expect(await redis.exists(`sess:${a}`)).toBe(0);
    expect(await getOf(store, a)).toBeNull();
    // another Session is not ended by it
    await setOf(store, b, loggedIn());
    expect((await getOf(store, b))?.agent).toEqual(agent);
  });

  it('failures reach the callback, or resolve to nothing without one', async () => {
    const bad = sid();
    await redis.set(`sess:${bad}`, 'not json');
    const got = await viaCallback((cb) => store.get(bad, cb));
    expect(got.args?.[0]).toBeInstanceOf(Error);
    expect(got.args?.[1]).toBeNull();
    expect(got.returned).toBeNull();
    expect(await promising(store).get(bad)).toBeNull();

    const unserialisable = { ...loggedIn(), big: 1n } as unknown as SessionData;
    const set = await viaCallback((cb) => store.set(sid(), unserialisable, cb));
    expect(set.args?.[0]).toBeInstanceOf(Error);
    await expect(promising(store).set(sid(), unserialisable)).resolves.toBeUndefined();

    const deadStore = createSessionLayer(config, await testRedis.dead()).store;
    const destroyed = await viaCallback((cb) => deadStore.destroy(sid(), cb));
    expect(destroyed.args?.[0]).toBeInstanceOf(Error);
    await expect(promising(deadStore).destroy(sid())).resolves.toBeUndefined();
  });

  it('peekPort and the directory read without extending the lifetime; storedPort rolls it', async () => {
    const layer = createSessionLayer(config, redis);
    const a = sid();
    await setOf(layer.store, a, loggedIn());
    await redis.expire(`sess:${a}`, 100);
    expect((await layer.peekPort(a))?.state.agent).toEqual(agent);
    expect((await sessionDirectory(layer.store).peek(a))?.agent).toEqual(agent);
    expect(await redis.ttl(`sess:${a}`)).toBeLessThanOrEqual(100);
    expect(await layer.peekPort(sid())).toBeUndefined();
    expect(await sessionDirectory(layer.store).peek(sid())).toBeUndefined();
    expect((await layer.storedPort(a))?.state.agent).toEqual(agent);
    expect(await redis.ttl(`sess:${a}`)).toBeGreaterThan(TTL - 5);
  });
});

describe.each([
  ['in memory', async () => createSessionLayer(config, undefined)],
  ...(testRedis.available
    ? [['on Redis', async () => createSessionLayer(config, await testRedis.client())] as const]
    : []),
] as const)('Session ports and directory %s', (_, make) => {
  it('a stored port saves and destroys the stored Session, and cannot regenerate', async () => {
    const layer = await make();
    const a = sid();
    await setOf(layer.store, a, loggedIn());
    const port = await layer.storedPort(a);
    expect(port?.id).toBe(a);
    (port?.state as SessionData & { note?: string }).note = 'saved';
    await port?.save();
    expect(((await getOf(layer.store, a)) as SessionData & { note?: string })?.note).toBe('saved');
    await expect(port?.regenerate()).rejects.toThrow('a stored session cannot be regenerated outside an HTTP request');
    await port?.destroy();
    expect(await getOf(layer.store, a)).toBeFalsy();
    expect(await layer.storedPort(a)).toBeUndefined();
    expect(await layer.peekPort(a)).toBeUndefined();
  });

  it('the directory peeks and ends Sessions', async () => {
    const layer = await make();
    const directory = sessionDirectory(layer.store);
    const a = sid();
    await setOf(layer.store, a, loggedIn());
    expect((await directory.peek(a))?.agent).toEqual(agent);
    expect((await layer.peekPort(a))?.state.agent).toEqual(agent);
    expect(await directory.peek(sid())).toBeUndefined();
    await directory.destroy(a);
    expect(await directory.peek(a)).toBeUndefined();
    await setOf(layer.store, a, loggedIn());
    expect(await directory.peek(a)).toBeUndefined();
  });
});

describe('the client info and saving of a request Session', () => {
  it('address from the socket, or the forwarded hop behind a trusted proxy; device from user-agent', () => {
    const ua = `Mozilla/5.0 ${'x'.repeat(300)}`;
    const plain = requestSessionPort(req({ headers: { 'user-agent': 'curl/8', 'x-forwarded-for': '1.2.3.4' } }));
    expect(plain.client).toEqual({ address: '10.0.0.7', device: 'curl/8' });
    expect(plain.client).toBe(plain.client);
    expect(
      requestSessionPort(
        req({ trustProxy: true, headers: { 'user-agent': ua, 'x-forwarded-for': '1.2.3.4, 5.6.7.8' } }),
      ).client,
    ).toEqual({ address: '1.2.3.4', device: ua.slice(0, 200) });
    expect(requestSessionPort(req({ noApp: true, headers: { 'x-forwarded-for': '1.2.3.4' } })).client).toEqual({
      address: '10.0.0.7',
      device: '',
    });
    expect(requestSessionPort(req({ headers: { 'user-agent': ['first', 'second'] } })).client?.device).toBe('first');
  });

  /** The layer of `cfg` on a tiny app: GET /set writes the Session, /read reads it, /end unsets it. */
  async function sessionApp(
    cfg: Config,
    work: (url: string, layer: ReturnType<typeof createSessionLayer>) => Promise<void>,
  ) {
    const layer = createSessionLayer(cfg, undefined);
    const app = express();
    if (cfg.trustProxy) app.set('trust proxy', true);
    app.use(layer.middleware);
    app.get('/set', (rq, rs) => {
      (rq.session as SessionData & { note?: string }).note = 'set';
      rs.json({ sid: rq.sessionID });
    });
    app.get('/read', (rq, rs) => {
      rs.json({ note: (rq.session as SessionData & { note?: string }).note ?? null });
    });
    app.get('/end', (rq, rs) => {
      (rq as { session: unknown }).session = null;
      rs.json({});
    });
    const httpServer = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => httpServer.once('listening', resolve));
    try {
      await work(`http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`, layer);
    } finally {
      httpServer.closeAllConnections();
      await new Promise((resolve) => httpServer.close(resolve));
    }
  }

  it('the Session cookie: HttpOnly, SameSite=Lax, path /, the Session lifetime, renewed on every request; none until written', async () => {
    await sessionApp(config, async (url, layer) => {
      expect((await fetch(`${url}/read`)).headers.get('set-cookie')).toBeNull();
      const set = await fetch(`${url}/set`);
      const { sid } = (await set.json()) as { sid: string };
      const cookie = set.headers.get('set-cookie') ?? '';
      const [pair, ...attributes] = cookie.split('; ');
      expect(pair).toMatch(new RegExp(`^parley\\.sid=s%3A${sid}\\.`));
      expect(attributes.filter((a) => !a.startsWith('Expires='))).toEqual(['Path=/', 'HttpOnly', 'SameSite=Lax']);
      const expires = Date.parse(attributes.find((a) => a.startsWith('Expires='))!.slice('Expires='.length));
      expect(Math.abs(expires - (Date.now() + TTL * 1000))).toBeLessThan(60_000);
      // Rolling: a request that only reads the Session gets the cookie again.
      const read = await fetch(`${url}/read`, { headers: { cookie: pair! } });
      expect(await read.json()).toEqual({ note: 'set' });
      expect(read.headers.get('set-cookie')).toMatch(/^parley\.sid=/);
      // Unset: the stored Session is destroyed.
      await fetch(`${url}/end`, { headers: { cookie: pair! } });
      expect(await getOf(layer.store, sid)).toBeFalsy();
    });
  });

  it('in production the cookie is Secure: sent over HTTPS (behind a trusted proxy), never over plain HTTP', async () => {
    const production = { ...config, env: 'production', trustProxy: true } as Config;
    await sessionApp(production, async (url) => {
      expect((await fetch(`${url}/set`)).headers.get('set-cookie')).toBeNull();
      const https = await fetch(`${url}/set`, { headers: { 'x-forwarded-proto': 'https' } });
      expect(https.headers.get('set-cookie')).toMatch(/; Secure(;|$)/);
    });
    // Elsewhere the cookie follows the connection: Secure behind HTTPS, plain over HTTP.
    await sessionApp({ ...config, trustProxy: true } as Config, async (url) => {
      expect((await fetch(`${url}/set`)).headers.get('set-cookie')).not.toMatch(/Secure/);
      const https = await fetch(`${url}/set`, { headers: { 'x-forwarded-proto': 'https' } });
      expect(https.headers.get('set-cookie')).toMatch(/; Secure(;|$)/);
    });
    // Without a trusted proxy a forwarded protocol is not believed.
    await sessionApp(config, async (url) => {
      const forged = await fetch(`${url}/set`, { headers: { 'x-forwarded-proto': 'https' } });
      expect(forged.headers.get('set-cookie')).not.toMatch(/Secure/);
    });
  });

  it('save writes the request Session to the store before the response', async () => {
    const layer = createSessionLayer(config, undefined);
    const app = express();
    app.use(layer.middleware);
    app.get('/save', async (rq, rs) => {
      (rq.session as SessionData & { note?: string }).note = 'now';
      await requestSessionPort(rq).save();
      const stored = (await getOf(layer.store, rq.sessionID)) as (SessionData & { note?: string }) | undefined;
      rs.json({ stored: stored?.note ?? null });
    });
    const httpServer = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => httpServer.once('listening', resolve));
    try {
      const { port } = httpServer.address() as AddressInfo;
      const res = await fetch(`http://127.0.0.1:${port}/save`);
      expect(await res.json()).toEqual({ stored: 'now' });
    } finally {
      httpServer.closeAllConnections();
      await new Promise((resolve) => httpServer.close(resolve));
    }
  });
});
