import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import { RedisStore } from 'connect-redis';
import { sign, unsign } from 'cookie-signature';
import express, { type Request, type RequestHandler, type Response } from 'express';
import session, { MemoryStore, type SessionData, type Store } from 'express-session';
import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { badInput } from '../errors.js';
import { CAPTCHA_TTL_SECONDS } from '../resolvers/captcha.js';
import type { SessionDirectory, SessionPort, SessionState } from '../resolvers/session.js';
import { bearerToken, clientIp, queryOf, singleHeader } from './request.js';

declare module 'express-session' {
  interface SessionData extends SessionState {}
}

const NO_SUCH_SESSION = '-';

/**
 * Lifetime (idle, rolling) of a Session that holds no login yet — one made to carry a captcha
 * answer or a pending SMS code: no longer than that captcha or code lives. Fetching captchas in
 * a loop then leaves at most five minutes' worth of small keys behind, not eight hours' worth.
 */
export const PRE_LOGIN_SESSION_TTL_SECONDS = CAPTCHA_TTL_SECONDS;
const isPreLogin = (sess: SessionData | null | undefined) => Boolean(sess && !sess.agent);

/** The session cookie's name (documented in docs/auth.md). */
export const SESSION_COOKIE = 'parley.sid';

export interface SessionLayer {
  /** Turns a `token` header or query parameter into the session cookie, then runs express-session. */
  middleware: RequestHandler[];
  /** The Session ID a request carries (token header, token query, cookie — in that order). */
  sessionIdOf(req: IncomingMessage): string | undefined;
  /** A SessionPort over the stored Session `sid`, for callers outside an HTTP request (WebSocket). */
  storedPort(sid: string): Promise<SessionPort | undefined>;
  /**
   * Like `storedPort`, but the read does not extend the Session's idle lifetime: an open socket
   * does not keep its Session alive, only HTTP requests do (docs/realtime.md).
   */
  peekPort(sid: string): Promise<SessionPort | undefined>;
  store: Store;
}

export function createSessionLayer(config: Config, redis: Redis | undefined): SessionLayer {
  const store: Store = redis
    ? new RollingRedisStore(redis, config.sessionTtlSeconds)
    : new EmbeddedSessionStore(config.sessionTtlSeconds);
  const secret = config.sessionSecret;

  const sessionIdOf = (req: IncomingMessage): string | undefined => {
    const explicit = tokenOf(req);
    if (explicit !== undefined) return explicit;
    const cookie = cookieValue(req.headers.cookie, SESSION_COOKIE);
    if (!cookie?.startsWith('s:')) return undefined;
    const unsigned = unsign(cookie.slice(2), secret);
    return unsigned === false ? undefined : unsigned;
  };

  const sessionMiddleware = session({
    name: SESSION_COOKIE,
    secret,
    store,
    resave: false,
    saveUninitialized: false,
    rolling: true,
    unset: 'destroy',
    proxy: config.trustProxy,
    cookie: {
      httpOnly: true,
      sameSite: 'lax',
      secure: config.env === 'production' ? true : 'auto',
      maxAge: config.sessionTtlSeconds * 1000,
      path: '/',
    },
  });

  return {
    middleware: [tokenAsCookie(secret), sessionMiddleware],
    sessionIdOf,
    store,
    storedPort: (sid) => portOver(store, sid, promisify<string, SessionData | null | undefined>(store.get.bind(store))),
    // MemoryStore's get does not roll the lifetime; the Redis store's does (GETEX), so it peeks.
    peekPort: (sid) =>
      portOver(
        store,
        sid,
        store instanceof RollingRedisStore
          ? (id) => store.peek(id)
          : promisify<string, SessionData | null | undefined>(store.get.bind(store)),
      ),
  };
}

/** express-session only reads cookies: presents a `token` header/query as the signed session cookie. */
function tokenAsCookie(secret: string): RequestHandler {
  return (req, res, next) => {
    try {
      const token = tokenOf(req);
      if (token !== undefined) {
        const others = (req.headers.cookie ?? '')
          .split(';')
          .map((c) => c.trim())
          .filter((c) => c && !c.startsWith(`${SESSION_COOKIE}=`));
        req.headers.cookie = [...others, `${SESSION_COOKIE}=${encodeURIComponent(`s:${sign(token, secret)}`)}`].join(
          '; ',
        );
        keepTokenOutOfCookie(req, res, token);
      }
      next();
    } catch (error) {
      next(error);
    }
  };
}

/** A SessionPort over the Session `sid` as stored (read through `read`), outside an HTTP request. */
async function portOver(
  store: Store,
  sid: string,
  read: (sid: string) => Promise<SessionData | null | undefined>,
): Promise<SessionPort | undefined> {
  const data = await read(sid);
  if (!data) return undefined;
  return {
    id: sid,
    state: data,
    regenerate: async () => {
      throw new Error('a stored session cannot be regenerated outside an HTTP request');
    },
    save: () => promisify<string, SessionData, void>(store.set.bind(store))(sid, data),
    destroy: () => promisify<string, void>(store.destroy.bind(store))(sid),
  };
}

/**
 * A `token` names the Session of one request only. Answering it with the session cookie would
 * plant that Session in whatever browser sent it (say, one that followed a shared `?token=`
 * link, logging its user into someone else's account), and a logout by token would clear the
 * browser's own cookie. So the cookie is left out while the request keeps the token's ID; a new
 * ID (a login, or a token that named no Session) is still sent. Installed before
 * express-session, this runs after its header hook has set the cookie.
 */
function keepTokenOutOfCookie(req: Request, res: Response, token: string) {
  const writeHead = res.writeHead;
  res.writeHead = function (this: Response, ...args: Parameters<Response['writeHead']>) {
    if (req.sessionID === token) {
      const current = res.getHeader('set-cookie');
      const kept = (Array.isArray(current) ? current : current === undefined ? [] : [String(current)]).filter(
        (c) => !c.startsWith(`${SESSION_COOKIE}=`),
      );
      if (kept.length > 0) res.setHeader('set-cookie', kept);
      else res.removeHeader('set-cookie');
    }
    return writeHead.apply(this, args);
  } as Response['writeHead'];
}

/** The `token` header, else the `token` query parameter; a repeated or malformed one is refused. */
function tokenOf(req: IncomingMessage): string | undefined {
  const header = singleHeader(req, 'token');
  const query = queryOf(req);
  const fromQuery = query.getAll('token');
  if (fromQuery.length > 1 || query.has('token[]')) throw badInput('token must be given once, as a single value');
  const token = header ?? fromQuery[0];
  if (token === undefined || token === '') return undefined;
  // A malformed ID names no Session: look up one that cannot exist rather than fall back to the cookie.
  if (!/^[A-Za-z0-9_-]{16,128}$/.test(token)) return NO_SUCH_SESSION;
  return token;
}

/** Whether a request carries the agent Session cookie (whatever its value). */
export const hasSessionCookie = (req: IncomingMessage) => cookieValue(req.headers.cookie, SESSION_COOKIE) !== undefined;

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

type StoreCallback = (err?: unknown, data?: SessionData | null) => void;

/**
 * connect-redis, with two changes:
 * - reads use GETEX, so the read also rolls the idle lifetime: a request costs one Redis round
 *   trip instead of a GET and an EXPIRE (touch is then redundant);
 * - a destroyed Session leaves a tombstone for its lifetime, and a write never recreates a
 *   tombstoned Session: a request still in flight when the Session was ended (logout, disable,
 *   on any instance) cannot bring it back by saving it at its end.
 */
class RollingRedisStore extends RedisStore {
  constructor(
    private readonly redis: Redis,
    private readonly ttlSeconds: number,
  ) {
    super({ client: redis, prefix: 'sess:', ttl: ttlSeconds, disableTouch: true });
  }

  private ended = (sid: string) => `sess-ended:${sid}`;

  /** Reads a Session without extending its idle lifetime. */
  async peek(sid: string): Promise<SessionData | null> {
    const raw = await this.redis.get(this.prefix + sid);
    return raw ? await this.serializer.parse(raw) : null;
  }

  override async get(sid: string, cb?: StoreCallback) {
    try {
      const raw = await this.redis.getex(this.prefix + sid, 'EX', this.ttlSeconds);
      const data = raw ? await this.serializer.parse(raw) : null;
      // A pre-login Session rolls on its own short lifetime (a second round trip, pre-login only).
      if (isPreLogin(data)) await this.redis.expire(this.prefix + sid, PRE_LOGIN_SESSION_TTL_SECONDS);
      cb?.(null, data);
      return data;
    } catch (error) {
      cb?.(error, null);
      return null;
    }
  }

  override async set(sid: string, sess: SessionData, cb?: StoreCallback) {
    try {
      await this.redis.eval(
        "if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) return 1",
        2,
        this.prefix + sid,
        this.ended(sid),
        this.serializer.stringify(sess),
        String(isPreLogin(sess) ? PRE_LOGIN_SESSION_TTL_SECONDS : this.ttlSeconds),
      );
      cb?.(null);
    } catch (error) {
      cb?.(error);
    }
  }

  override async destroy(sid: string, cb?: StoreCallback) {
    try {
      await this.redis
        .multi()
        .del(this.prefix + sid)
        .set(this.ended(sid), '1', 'EX', this.ttlSeconds)
        .exec();
      cb?.(null);
    } catch (error) {
      cb?.(error);
    }
  }
}

/**
 * The in-process store, with the same tombstones as the Redis one (see RollingRedisStore) and
 * the same short lifetime for pre-login Sessions; expired Sessions are swept every minute.
 */
class EmbeddedSessionStore extends MemoryStore {
  private readonly endedUntil = new Map<string, number>();

  constructor(private readonly ttlSeconds: number) {
    super();
    // MemoryStore drops an expired Session only when it is read: sweep, so unread ones go too.
    setInterval(() => this.all(() => {}), 60_000).unref();
  }

  override set(sid: string, sess: SessionData, cb?: (err?: unknown) => void) {
    const until = this.endedUntil.get(sid);
    if (until !== undefined && until > Date.now()) return cb?.();
    this.endedUntil.delete(sid);
    super.set(sid, shortenPreLogin(sess), cb);
  }

  override touch(sid: string, sess: SessionData, cb?: () => void) {
    super.touch(sid, shortenPreLogin(sess), cb);
  }

  override destroy(sid: string, cb?: (err?: unknown) => void) {
    const now = Date.now();
    for (const [id, until] of this.endedUntil) if (until <= now) this.endedUntil.delete(id);
    this.endedUntil.set(sid, now + this.ttlSeconds * 1000);
    super.destroy(sid, cb);
  }
}

/** A pre-login Session stored with an expiry no later than PRE_LOGIN_SESSION_TTL_SECONDS from now (MemoryStore reads `cookie.expires`). */
function shortenPreLogin(sess: SessionData): SessionData {
  if (!isPreLogin(sess)) return sess;
  const limit = Date.now() + PRE_LOGIN_SESSION_TTL_SECONDS * 1000;
  const expires = sess.cookie?.expires ? new Date(sess.cookie.expires).getTime() : Number.POSITIVE_INFINITY;
  if (expires <= limit) return sess;
  const cookie = { ...JSON.parse(JSON.stringify(sess.cookie)), expires: new Date(limit).toISOString() };
  return { ...sess, cookie } as SessionData;
}

/** The domain's view of the Session of an express request. */
export function requestSessionPort(req: Request): SessionPort {
  let client: SessionPort['client'];
  return {
    get client() {
      client ??= {
        address: clientIp(req, { trustProxy: Boolean(req.app?.get('trust proxy')) }),
        device: (singleHeaderSafe(req, 'user-agent') ?? '').slice(0, 200),
      };
      return client;
    },
    get id() {
      return req.sessionID;
    },
    get state() {
      return (req.session ?? {}) as SessionState;
    },
    regenerate: () => promisify((cb: (err?: unknown) => void) => req.session.regenerate(cb))(),
    save: () => promisify((cb: (err?: unknown) => void) => req.session.save(cb))(),
    destroy: () =>
      req.session ? promisify((cb: (err?: unknown) => void) => req.session.destroy(cb))() : Promise.resolve(),
  };
}

/** The stored Sessions of `store`, read without extending their lifetime (the domain's SessionDirectory). */
export function sessionDirectory(store: Store): SessionDirectory {
  const get = promisify<string, SessionData | null | undefined>(store.get.bind(store));
  return {
    peek: async (sid) => (await (store instanceof RollingRedisStore ? store.peek(sid) : get(sid))) ?? undefined,
    destroy: (sid) => promisify<string, void>(store.destroy.bind(store))(sid),
  };
}

const singleHeaderSafe = (req: Request, name: string) => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/**
 * The agent Session layer for paths either identity may call: skipped for a request with a
 * visitor bearer (one identity per request; it also spares creating an unused Session).
 */
export function agentSessionUnlessBearer(sessions: Pick<SessionLayer, 'middleware'>): RequestHandler {
  const agentSession = express.Router().use(sessions.middleware);
  return (req, res, next) => (bearerToken(req) ? next() : agentSession(req, res, next));
}
