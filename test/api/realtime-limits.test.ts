import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { seedDemoData } from '../../src/db/seed.js';
import { SESSION_REVALIDATE_MS } from '../../src/subscriptions/connection.js';
import { agentSession, HttpClient, visitorChannel, visitorToken } from '../support/clients.js';
import { rawPusher } from '../support/pusher.js';
import { INTERNAL_TOKEN, startTestApp, type TestApp, withClockAhead } from '../support/test-app.js';
import { closeAllSockets, connectSocket, eventually, type TestSocket } from '../support/ws.js';

/**
 * Issue 18 rows 1, 3, 9, 10 and issue 14's WebSocket identity mistakes: caps on sockets and
 * subscriptions (per identity, per address, per instance), no subscriptions over HTTP event
 * streams, sockets do not extend a Session, introspection refused over sockets in production.
 */

const CAPS = {
  WS_MAX_SOCKETS_PER_IDENTITY: '3',
  WS_MAX_SOCKETS_PER_ADDRESS: '4',
  WS_MAX_SUBSCRIPTIONS_PER_IDENTITY: '4',
  WS_MAX_SUBSCRIPTIONS_PER_ADDRESS: '6',
  WS_MAX_SOCKETS: '8',
};

let t: TestApp;
beforeAll(async () => {
  // TRUST_PROXY: the tests play several client addresses through X-Forwarded-For.
  t = await startTestApp({ env: { ...CAPS, TRUST_PROXY: 'on' } });
});
afterEach(() => closeAllSockets());
afterAll(() => t?.stop());

const visitorFrom = async (address: string) => {
  const { token } = await visitorToken(t.url);
  const channel = await visitorChannel(t.url, token);
  const socket = () =>
    connectSocket(
      t.wsUrl,
      { appkey: 'demo-appkey', authorization: `Bearer ${token}` },
      { headers: { 'x-forwarded-for': address } },
    );
  return { token, channel, socket };
};

/** A raw Pusher-protocol socket from `address`. */
const pusherSocket = (address: string) =>
  rawPusher(`${t.url.replace('http', 'ws')}/app/demo-appkey?protocol=7`, { 'x-forwarded-for': address });

const healthz = async () => (await fetch(`${t.url}/healthz`)).status;

/** Opens sockets with `open` until one is refused (at most `max`); returns the open ones and the refusal. */
async function openUntilRefused(open: () => TestSocket, max = 50) {
  const accepted: TestSocket[] = [];
  for (let i = 0; i < max; i++) {
    const socket = open();
    const outcome = await socket.acked.then(
      () => undefined,
      () => socket.closed,
    );
    if (outcome) return { accepted, refusal: outcome };
    accepted.push(socket);
  }
  throw new Error(`no refusal after ${max} sockets`);
}

describe('caps on sockets and subscriptions (issue 18 row 1)', () => {
  it('the instance ceiling refuses sockets past WS_MAX_SOCKETS with 1013 (retry later) while /healthz answers', async () => {
    const opened: TestSocket[] = [];
    for (const address of ['10.1.0.1', '10.1.0.2', '10.1.0.3', '10.1.0.4']) {
      for (let i = 0; i < 2; i++) {
        const socket = (await visitorFrom(address)).socket();
        await socket.acked;
        opened.push(socket);
      }
    }
    const refused = (await visitorFrom('10.1.0.5')).socket();
    await expect(refused.acked).rejects.toThrow();
    expect(await refused.closed).toEqual({ code: 1013, reason: 'Server at capacity: retry later' });
    // The Pusher transport shares the ceiling: 4100, which pusher-js retries after backing off.
    expect((await pusherSocket('10.1.0.5').closed).code).toBe(4100);
    expect(await healthz()).toBe(200);
    // A socket that closes frees its place.
    await opened[0]?.dispose();
    const later = (await visitorFrom('10.1.0.5')).socket;
    await eventually(async () => {
      const socket = later();
      return socket.acked.then(
        () => true,
        () => false,
      );
    }, 'a socket accepted again once one closed');
  });

  it('one identity opens sockets until refused: 4429 past WS_MAX_SOCKETS_PER_IDENTITY, the server stays healthy', async () => {
    const me = await visitorFrom('10.2.0.1');
    const heapBefore = process.memoryUsage().heapUsed;
    const { accepted, refusal } = await openUntilRefused(me.socket);
    expect(accepted).toHaveLength(3);
    expect(refusal).toEqual({ code: 4429, reason: 'Too many connections for this identity' });
    expect(await healthz()).toBe(200);
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(64 * 1024 * 1024);
    // The accepted sockets keep working.
    const sub = accepted[0]?.channel(me.channel);
    await eventually(() => sub?.cursor, 'the subscribed position');
  });

  it('one address opens sockets until refused: 4429 past WS_MAX_SOCKETS_PER_ADDRESS, whatever the identities', async () => {
    const visitors = await Promise.all(Array.from({ length: 5 }, () => visitorFrom('10.3.0.1')));
    let next = 0;
    const { accepted, refusal } = await openUntilRefused(
      () => (visitors[next++] ?? visitors[0])?.socket() as TestSocket,
    );
    expect(accepted).toHaveLength(4);
    expect(refusal).toEqual({ code: 4429, reason: 'Too many connections from this address' });
    // Pusher sockets count against the same caps: 4004 (over quota, pusher-js does not retry).
    expect((await pusherSocket('10.3.0.1').closed).code).toBe(4004);
    expect(await healthz()).toBe(200);
    // Another address is not affected.
    await (await visitorFrom('10.3.0.2')).socket().acked;
  });

  it('subscriptions are capped per identity over all its sockets, and per address (RATE_LIMITED on that subscription only)', async () => {
    const me = await visitorFrom('10.4.0.1');
    const [first, second] = [me.socket(), me.socket()];
    await Promise.all([first.acked, second.acked]);
    const subs = [first, first, first, second].map((s) => s.channel(me.channel));
    for (const sub of subs) await eventually(() => sub.cursor, 'a subscribed position');
    const over = second.channel(me.channel);
    expect(await over.ended).toBe('error');
    expect(over.errors?.[0]).toMatchObject({
      message: 'At most 4 subscriptions at once for one identity',
      extensions: { code: 'RATE_LIMITED' },
    });
    // Ending one frees its place (the `complete` and the next `subscribe` travel in order on one socket).
    subs[0]?.unsubscribe();
    const again = first.channel(me.channel);
    await eventually(() => again.cursor, 'a subscription admitted again');

    // Per address: another identity from the same address may add two more (4 + 2 = 6), not three.
    const neighbour = await visitorFrom('10.4.0.1');
    const socket = neighbour.socket();
    await socket.acked;
    for (const sub of [socket.channel(neighbour.channel), socket.channel(neighbour.channel)]) {
      await eventually(() => sub.cursor, 'a subscribed position');
    }
    const third = socket.channel(neighbour.channel);
    expect(await third.ended).toBe('error');
    expect(third.errors?.[0]?.message).toBe('At most 6 subscriptions at once from one address');
  });
});

describe('WebSocket identity mistakes are named in the close reason (issue 14)', () => {
  it.each([
    ['no appkey', () => ({ token: 'x'.repeat(32) }), /^appkey missing/],
    [
      'authorization without Bearer',
      (v: string) => ({ appkey: 'demo-appkey', authorization: v }),
      /Bearer <visitor token>/,
    ],
    [
      'a visitor token under token',
      (v: string) => ({ appkey: 'demo-appkey', token: v }),
      /^Agent Session not valid.*authorization/,
    ],
    [
      'an unknown visitor token',
      () => ({ appkey: 'demo-appkey', authorization: `Bearer ${'u'.repeat(43)}` }),
      /^Visitor token not valid or expired/,
    ],
    [
      "another merchant's appkey",
      (v: string) => ({ appkey: 'acme-appkey', authorization: `Bearer ${v}` }),
      /^appkey is not the merchant's/,
    ],
    ['nothing at all', () => ({ appkey: 'demo-appkey' }), /^No identity/],
  ])('%s: 4403 with a reason saying so', async (_name, params, reason) => {
    const { token } = await visitorToken(t.url);
    const socket = connectSocket(t.wsUrl, params(token), { headers: { 'x-forwarded-for': '10.5.0.1' } });
    const closed = await socket.closed;
    expect(closed.code).toBe(4403);
    expect(closed.reason).toMatch(reason);
  });

  it('`Authorization` capitalised, as HTTP headers are written, is accepted', async () => {
    const { token } = await visitorToken(t.url);
    const socket = connectSocket(
      t.wsUrl,
      { appkey: 'demo-appkey', Authorization: `Bearer ${token}` },
      { headers: { 'x-forwarded-for': '10.5.0.2' } },
    );
    await socket.acked;
  });
});

describe('subscriptions over HTTP event streams are not offered (issue 18 row 3)', () => {
  it('a subscription over POST /graphql with Accept: text/event-stream is refused; queries still run', async () => {
    const { token } = await visitorToken(t.url);
    const channel = await visitorChannel(t.url, token);
    const res = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${token}` },
      body: JSON.stringify({
        query: 'subscription($n: String!) { channel(name: $n) { id event } }',
        variables: { n: channel },
      }),
    });
    const text = await res.text(); // the answer ends: no stream is left open
    expect(text).toContain('SUBSCRIPTION_OVER_HTTP');
    expect(text).not.toContain('"event"');

    const query = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: '{ visitorBootstrap { visitor { uid } } }' }),
    });
    expect(((await query.json()) as { errors?: unknown }).errors).toBeUndefined();
  });
});

describe('an open socket does not extend its Session (issue 18 row 9)', () => {
  /** When the stored Session expires for being idle (ms since the epoch, approximately). */
  async function idleDeadline(token: string): Promise<number> {
    if (t.app.deps.redis) {
      const redis = new Redis(process.env.REDIS_URL as string);
      try {
        return Date.now() + (await redis.pttl(`${t.config.redisPrefix}sess:${token}`));
      } finally {
        redis.disconnect();
      }
    }
    const sessions = (t.app.sessions.store as unknown as { sessions: Record<string, string> }).sessions;
    return new Date(JSON.parse(sessions[token] as string).cookie.expires).getTime();
  }
  /** Moves the Session's idle expiry `ms` earlier, as if it had been idle that long. */
  async function ageSession(token: string, ms: number) {
    if (t.app.deps.redis) {
      const redis = new Redis(process.env.REDIS_URL as string);
      const key = `${t.config.redisPrefix}sess:${token}`;
      await redis.pexpire(key, (await redis.pttl(key)) - ms);
      redis.disconnect();
      return;
    }
    const sessions = (t.app.sessions.store as unknown as { sessions: Record<string, string> }).sessions;
    const data = JSON.parse(sessions[token] as string);
    data.cookie.expires = new Date(new Date(data.cookie.expires).getTime() - ms).toISOString();
    sessions[token] = JSON.stringify(data);
  }

  it('subscribing and the periodic re-check leave the idle expiry where it was; an HTTP request moves it', async () => {
    const { client, token } = await agentSession(t.url, 'alice');
    await ageSession(token, 60_000);
    const before = await idleDeadline(token);
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const socket = connectSocket(
        t.wsUrl,
        { appkey: 'demo-appkey', token },
        { headers: { 'x-forwarded-for': '10.6.0.1' } },
      );
      await socket.acked;
      const sub = socket.channel('global-demo');
      await eventually(() => sub.cursor, 'the subscribed position');
      vi.advanceTimersByTime(SESSION_REVALIDATE_MS);
      await new HttpClient(t.url).json('/internal/events', {
        method: 'POST',
        headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
        json: { channel: 'global-demo', event: 'probe', data: {} },
      });
      await sub.waitFor('probe');
    } finally {
      vi.useRealTimers();
    }
    expect(await idleDeadline(token)).toBeLessThanOrEqual(before + 1000);
    await client.json('/agent/data/get', { headers: { accept: 'application/json' } });
    expect(await idleDeadline(token)).toBeGreaterThan(before + 30_000);
  });

  it('the absolute lifetime ends an open socket: session.ended (expired), then 4401', async () => {
    const { token } = await agentSession(t.url, 'alice');
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const socket = connectSocket(
        t.wsUrl,
        { appkey: 'demo-appkey', token },
        { headers: { 'x-forwarded-for': '10.6.0.2' } },
      );
      await socket.acked;
      const sub = socket.channel('global-demo');
      await eventually(() => sub.cursor, 'the subscribed position');
      await withClockAhead(t, (t.config.sessionAbsoluteTtlSeconds + 60) * 1000, async () => {
        vi.advanceTimersByTime(SESSION_REVALIDATE_MS);
        expect(await sub.ended).toBe('complete');
      });
      expect(sub.events.at(-1)).toMatchObject({ event: 'session.ended', data: { reason: 'expired' } });
      expect((await socket.closed).code).toBe(4401);
    } finally {
      vi.useRealTimers();
    }
  });
});

const realServices = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);

describe.skipIf(!realServices)('production: introspection is refused on sockets too (issue 18 row 10)', () => {
  let prod: TestApp;
  beforeAll(async () => {
    prod = await startTestApp({
      env: {
        NODE_ENV: 'production',
        SESSION_SECRET: 'production-test-secret-0123456789abcdef',
        DEMO_SEED: '',
        CAPTCHA_TEST_ANSWER: '',
      },
    });
    // The demo data (refused by a production gateway) is loaded beside it, for a merchant to connect to.
    const { deps } = prod.app;
    await seedDemoData({ db: deps.db, now: deps.now, config: { ...deps.config, env: 'test' } });
  });
  afterAll(() => prod?.stop());

  it('an introspection query over graphql-ws fails validation', async () => {
    const { token } = await visitorToken(prod.url);
    const socket = connectSocket(prod.wsUrl, { appkey: 'demo-appkey', authorization: `Bearer ${token}` });
    await socket.acked;
    const result = await new Promise<{ errors?: { message: string }[]; data?: unknown }>((resolve) => {
      socket.client.subscribe(
        { query: '{ __schema { types { name } } }' },
        {
          next: (value) => resolve(value as never),
          error: (errors) => resolve({ errors: errors as { message: string }[] }),
          complete: () => {},
        },
      );
    });
    expect(result.data ?? undefined).toBeUndefined();
    expect(result.errors?.[0]?.message).toMatch(/introspection/i);
  });
});
