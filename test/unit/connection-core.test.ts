import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DomainError, serviceUnavailable } from '../../src/errors.js';
import type { SessionPort } from '../../src/resolvers/session.js';
import { hashToken } from '../../src/resolvers/viewer.js';
import { issueVisitorToken, revokeVisitorToken } from '../../src/resolvers/visitor.js';
import { identityRefusal } from '../../src/subscriptions/connection/identity.js';
import {
  type Connection,
  type ConnectionCore,
  ConnectionRefused,
  createConnectionCore,
  SESSION_REVALIDATE_MS,
  type SocketIdentity,
  SUBSCRIBE_RATE,
} from '../../src/subscriptions/connection.js';
import { eventually, type Factories, type TestDeps, type TestMerchant, useTestDeps } from '../support/deps.js';

/**
 * The connection core (src/subscriptions/connection.ts) under both transports, on the real deps
 * with small caps: what each cap counts, which refusal each answers with, and that closing a socket
 * gives back every slot it held. The transport is a recorder of the ends the core asks for.
 * The API tests (realtime-limits, transport-edges) check the same caps end to end, one code each.
 */
let deps: TestDeps;
let make: Factories;
useTestDeps((made) => ({ deps, f: make } = made));

const LIMITS = {
  socketsPerIdentity: 2,
  socketsPerAddress: 3,
  subscriptionsPerIdentity: 4,
  subscriptionsPerAddress: 5,
  maxSockets: 4,
  maxSubscriptions: 6,
};

function core(): ConnectionCore {
  const limited = { ...deps, config: { ...deps.config, realtimeLimits: LIMITS, trustProxy: false } };
  return createConnectionCore(limited, { peekPort: async () => undefined });
}

/** A transport socket that records the ends the core asks for. */
function recorder() {
  const ends: { why: string; reason: string }[] = [];
  return {
    ends,
    end: (why: string, reason: string) => void ends.push({ why, reason }),
    activeSubscriptions: () => 0,
    sessionEnded: () => {},
    levelChanged: () => {},
  };
}

const address = () => `10.${randomBytes(3).join('.')}`;
const request = (from: string) => ({ socket: { remoteAddress: from }, headers: {} }) as unknown as IncomingMessage;

/** A visitor identity as a socket presents it (the token's hash), with its token. */
async function visitorIdentity(m: TestMerchant): Promise<{ identity: SocketIdentity; token: string }> {
  const { token } = await issueVisitorToken(deps, { appkey: m.appkey }, address());
  return { identity: { kind: 'visitor', tokenHash: hashToken(token) }, token };
}

const refusalOf = (work: () => unknown): string => {
  try {
    work();
  } catch (error) {
    if (error instanceof ConnectionRefused) return error.end;
    if (error instanceof DomainError) return error.code;
    throw error;
  }
  return 'none';
};
const asyncRefusalOf = async (work: Promise<unknown>) =>
  work.then(
    () => 'none',
    (error) => (error instanceof ConnectionRefused ? error.end : String(error)),
  );

describe('the connection core', () => {
  const open: Connection[] = [];
  afterEach(async () => {
    vi.useRealTimers();
    await Promise.all(open.splice(0).map((c) => c.closed()));
  });
  const opened = (c: ConnectionCore, from = address()) => {
    const transport = recorder();
    const connection = c.open(transport, request(from));
    open.push(connection);
    return { connection, transport };
  };

  it('sockets: the per-address cap answers too_many_connections, the instance ceiling try_later; a close frees its slot', () => {
    const c = core();
    const from = address();
    const sockets = [opened(c, from), opened(c, from), opened(c, from)];
    // One address holds them: one entry.
    expect(c.counts()).toEqual({ sockets: 3, subscriptions: 0, tracked: 1 });
    expect(refusalOf(() => c.open(recorder(), request(from)))).toBe('too_many_connections');
    expect(() => c.open(recorder(), request(from))).toThrow('Too many connections from this address');
    // Another address still gets the instance's last socket, then the ceiling refuses everyone.
    opened(c);
    expect(refusalOf(() => c.open(recorder(), request(address())))).toBe('try_later');
    expect(() => c.open(recorder(), request(address()))).toThrow('Server at capacity: retry later');
    expect(c.counts().sockets).toBe(4);

    void sockets[0]?.connection.closed();
    expect(c.counts().sockets).toBe(3);
    expect(refusalOf(() => opened(c, from))).toBe('none');
  });

  it('a visitor identity holds at most socketsPerIdentity sockets; a refused one keeps no identity; closing one frees it', async () => {
    const c = core();
    const m = await make.merchant();
    const { identity } = await visitorIdentity(m);
    const first = opened(c).connection;
    const viewer = await first.authenticate(identity, m.appkey);
    expect(viewer).toMatchObject({ kind: 'visitor', merchantId: m.merchantId });
    expect(first.identity).toEqual(identity);
    expect(first.viewer).toMatchObject({ kind: 'visitor', merchantId: m.merchantId });
    await opened(c).connection.authenticate(identity, undefined);

    const third = opened(c).connection;
    expect(await asyncRefusalOf(third.authenticate(identity, undefined))).toBe('too_many_connections');
    expect(third.identity).toBeUndefined();
    expect(third.viewer).toBeUndefined();

    await first.closed();
    expect(await asyncRefusalOf(third.authenticate(identity, undefined))).toBe('none');
  });

  it('the identity of a connection is fixed; a bad token, a foreign appkey are refused as forbidden', async () => {
    const c = core();
    const m = await make.merchant();
    const other = await make.merchant();
    const { identity } = await visitorIdentity(m);
    const connection = opened(c).connection;
    await connection.authenticate(identity, undefined);
    const { identity: second } = await visitorIdentity(m);
    const again = connection.authenticate(second, undefined);
    await expect(again).rejects.toThrow('The identity of a connection is fixed');
    expect(connection.identity).toEqual(identity);

    const bad = opened(c).connection;
    await expect(
      bad.authenticate({ kind: 'visitor', tokenHash: hashToken('no such token') }, undefined),
    ).rejects.toThrow('Visitor token not valid or expired: get a new visitor token');
    expect(bad.identity).toBeUndefined();
    const foreign = opened(c).connection;
    const refusal = foreign.authenticate(identity, other.appkey);
    await expect(refusal).rejects.toThrow("appkey is not the merchant's of this identity");
    expect(await asyncRefusalOf(refusal)).toBe('forbidden');
    expect(foreign.viewer).toBeUndefined();
  });

  it('an agent Session that is not there is refused as forbidden, with a message saying where a visitor token goes', async () => {
    const c = core();
    const connection = opened(c).connection;
    const refused = connection.authenticate({ kind: 'agent', sessionId: 'no-such-session' }, undefined);
    await expect(refused).rejects.toThrow(
      'Agent Session not valid or expired: log in again (a visitor token goes in authorization)',
    );
    expect(connection.identity).toBeUndefined();
  });

  it('subscriptions: at most 20 on one socket, the identity, address and instance caps each refuse RATE_LIMITED; releases give slots back once', async () => {
    const c = core();
    const m = await make.merchant();
    const { identity } = await visitorIdentity(m);
    const from = address();
    const a = opened(c, from).connection;
    await a.authenticate(identity, undefined);
    const b = opened(c, from).connection;
    await b.authenticate(identity, undefined);

    // The identity's 4 over its two sockets.
    const releases = [a.admitSubscription(), a.admitSubscription(), b.admitSubscription(), b.admitSubscription()];
    expect(c.counts().subscriptions).toBe(4);
    expect(() => a.admitSubscription()).toThrow('At most 4 subscriptions at once for one identity');
    // A release is idempotent: twice frees one slot.
    releases[0]?.();
    releases[0]?.();
    expect(c.counts().subscriptions).toBe(3);
    releases[0] = b.admitSubscription();
    expect(refusalOf(() => b.admitSubscription())).toBe('RATE_LIMITED');

    // The address's 5: a socket from the same address without an identity of its own.
    const anonymous = opened(c, from).connection;
    anonymous.admitSubscription();
    expect(c.counts().subscriptions).toBe(5);
    expect(() => anonymous.admitSubscription()).toThrow('At most 5 subscriptions at once from one address');

    // The instance's 6: another address takes the last one.
    const elsewhere = opened(c).connection;
    elsewhere.admitSubscription();
    expect(() => elsewhere.admitSubscription()).toThrow('Server at capacity: retry later');

    // Closing a socket gives back its subscriptions and its identity's share; a release after it does nothing.
    await a.closed();
    releases[1]?.();
    // Entries: the address, the identity (still on b), the other address.
    expect(c.counts()).toEqual({ sockets: 3, subscriptions: 5, tracked: 3 });
    expect(refusalOf(() => b.admitSubscription())).toBe('none');
    // Every socket closed: no count and no entry is left of any address or identity.
    await Promise.all([b, anonymous, elsewhere].map((connection) => connection.closed()));
    expect(c.counts()).toEqual({ sockets: 0, subscriptions: 0, tracked: 0 });
  });

  it('one socket runs at most 20 operations at once, whatever the identity caps', () => {
    const c = createConnectionCore(
      {
        ...deps,
        config: { ...deps.config, realtimeLimits: { ...LIMITS, subscriptionsPerAddress: 100, maxSubscriptions: 100 } },
      },
      { peekPort: async () => undefined },
    );
    const connection = opened(c).connection;
    for (let i = 0; i < 20; i++) connection.admitSubscription();
    expect(() => connection.admitSubscription()).toThrow('At most 20 operations at once on one socket');
    expect(c.counts().subscriptions).toBe(20);
  });

  it('subscriptions admitted before the identity count against it once it is known', async () => {
    const c = core();
    const m = await make.merchant();
    const { identity } = await visitorIdentity(m);
    const early = opened(c).connection;
    early.admitSubscription();
    early.admitSubscription();
    early.admitSubscription();
    await early.authenticate(identity, undefined);
    const later = opened(c).connection;
    await later.authenticate(identity, undefined);
    later.admitSubscription();
    expect(() => later.admitSubscription()).toThrow('At most 4 subscriptions at once for one identity');
  });

  it(`more than ${SUBSCRIBE_RATE.max} subscribe requests in ${SUBSCRIBE_RATE.windowMs / 1000} s end the socket (subscribe_rate); the next window starts afresh`, () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const c = createConnectionCore(
      {
        ...deps,
        config: { ...deps.config, realtimeLimits: { ...LIMITS, subscriptionsPerAddress: 100, maxSubscriptions: 100 } },
      },
      { peekPort: async () => undefined },
    );
    const { connection, transport } = opened(c);
    for (let i = 0; i < SUBSCRIBE_RATE.max; i++) connection.admitSubscription()();
    vi.advanceTimersByTime(SUBSCRIBE_RATE.windowMs);
    // A new window: another full window's worth passes.
    for (let i = 0; i < SUBSCRIBE_RATE.max; i++) connection.admitSubscription()();
    expect(transport.ends).toEqual([]);
    expect(refusalOf(() => connection.admitSubscription())).toBe('RATE_LIMITED');
    expect(transport.ends).toEqual([{ why: 'subscribe_rate', reason: 'Too many subscribe requests' }]);
    expect(connection.ending).toBe(true);
    // An ending connection admits nothing more, whatever the window.
    vi.advanceTimersByTime(SUBSCRIBE_RATE.windowMs);
    expect(() => connection.admitSubscription()).toThrow('The Session of this socket ended: log in again');
  });

  it('end asks the transport once per connection, and not after the socket closed', async () => {
    const c = core();
    const { connection, transport } = opened(c);
    expect(connection.ending).toBe(false);
    connection.end('slow_consumer', 'too slow');
    expect(connection.ending).toBe(true);
    await connection.closed();
    connection.end('going_away', 'shutting down');
    expect(transport.ends).toEqual([{ why: 'slow_consumer', reason: 'too slow' }]);
    expect(connection.signal.aborted).toBe(true);
    // A second close changes no count.
    await connection.closed();
    expect(c.counts()).toEqual({ sockets: 0, subscriptions: 0, tracked: 0 });
  });

  it('a capability counts the socket against its holder’s socket cap, once per holder, until the socket closes', async () => {
    const c = core();
    const m = await make.merchant();
    const { identity } = await visitorIdentity(m);
    const owner = opened(c).connection;
    const holder = await owner.authenticate(identity, undefined);
    // The holder's own socket does not count twice.
    owner.holdCapability(holder);
    const follower = opened(c).connection;
    follower.holdCapability(holder);
    follower.holdCapability(holder);
    // The holder's two slots are taken: its own socket and the follower.
    expect(() => opened(c).connection.holdCapability(holder)).toThrow('Too many connections on this visitor channel');
    expect(await asyncRefusalOf(opened(c).connection.authenticate(identity, undefined))).toBe('too_many_connections');

    await follower.closed();
    const next = opened(c).connection;
    expect(refusalOf(() => next.holdCapability(holder))).toBe('none');
  });

  it('a revoked capability ends the connection at the next re-check as forbidden; a failing check is not a revocation', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const c = core();
    const { connection, transport } = opened(c);
    let valid = true;
    connection.followCapability(async () => valid, 'The capability was revoked');
    connection.followCapability(async () => {
      throw new Error('store down');
    }, 'never');
    await vi.advanceTimersByTimeAsync(SESSION_REVALIDATE_MS);
    expect(transport.ends).toEqual([]);
    valid = false;
    await vi.advanceTimersByTimeAsync(SESSION_REVALIDATE_MS);
    expect(transport.ends).toEqual([{ why: 'forbidden', reason: 'The capability was revoked' }]);
    // An ending connection is not re-checked (nor ended) again.
    await vi.advanceTimersByTimeAsync(SESSION_REVALIDATE_MS);
    expect(transport.ends).toHaveLength(1);
  });

  it('a visitor token revoked while its socket is open ends the socket at the next re-check', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const c = core();
    const m = await make.merchant();
    const { identity, token } = await visitorIdentity(m);
    const { connection, transport } = opened(c);
    await connection.authenticate(identity, undefined);
    expect(await revokeVisitorToken(deps, token)).toBe(true);
    await vi.advanceTimersByTimeAsync(SESSION_REVALIDATE_MS);
    await eventually(() => transport.ends.length > 0, 'the re-check to end the socket');
    expect(transport.ends).toEqual([{ why: 'forbidden', reason: 'Visitor token no longer valid' }]);
  });

  it('a socket closed while its identity is being checked is refused (going_away) and holds no slot of it', async () => {
    const c = core();
    const m = await make.merchant();
    const { identity } = await visitorIdentity(m);
    const closing = opened(c).connection;
    const refused = closing.authenticate(identity, undefined);
    await closing.closed();
    await expect(refused).rejects.toThrow('Closed while connecting');
    expect(await asyncRefusalOf(refused)).toBe('going_away');
    await opened(c).connection.authenticate(identity, undefined);
    await opened(c).connection.authenticate(identity, undefined);
  });

  describe('an agent', () => {
    /** A core whose Session layer knows the agents' Sessions by ID. */
    const agentCore = () => {
      const sessions = new Map<string, SessionPort>();
      const realtimeLimits = { ...LIMITS, maxSockets: 10 };
      const limited = { ...deps, config: { ...deps.config, realtimeLimits, trustProxy: false } };
      return { c: createConnectionCore(limited, { peekPort: async (id) => sessions.get(id) }), sessions };
    };

    it('is counted by its own identity: each agent holds socketsPerIdentity sockets', async () => {
      const { c, sessions } = agentCore();
      const m = await make.merchant();
      for (const agent of [await make.agent(m), await make.agent(m)]) {
        sessions.set(agent.session.id, agent.session);
        const identity: SocketIdentity = { kind: 'agent', sessionId: agent.session.id };
        for (let i = 0; i < LIMITS.socketsPerIdentity; i++) {
          const connection = opened(c).connection;
          expect(await connection.authenticate(identity, m.appkey)).toMatchObject({ agentId: agent.agentId });
          expect(connection.viewer).toMatchObject({ kind: 'agent', agentId: agent.agentId });
          expect((await connection.sessionPort())?.id).toBe(agent.session.id);
        }
        const over = opened(c).connection;
        expect(await asyncRefusalOf(over.authenticate(identity, undefined))).toBe('too_many_connections');
      }
    });

    it('whose Session ends is closed at the next re-check as session_ended', async () => {
      vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
      const { c, sessions } = agentCore();
      const m = await make.merchant();
      const agent = await make.agent(m);
      sessions.set(agent.session.id, agent.session);
      const { connection, transport } = opened(c);
      await connection.authenticate({ kind: 'agent', sessionId: agent.session.id }, undefined);
      await vi.advanceTimersByTimeAsync(SESSION_REVALIDATE_MS);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(transport.ends).toEqual([]);
      sessions.delete(agent.session.id);
      await vi.advanceTimersByTimeAsync(SESSION_REVALIDATE_MS);
      await eventually(() => transport.ends.length > 0, 'the re-check to end the socket');
      expect(transport.ends).toEqual([{ why: 'session_ended', reason: 'Session ended: log in again' }]);
      expect(connection.ending).toBe(true);
    });
  });
});

describe('identityRefusal: how a socket whose identity did not resolve is ended', () => {
  it('an outage is retried later, FORBIDDEN and RATE_LIMITED keep their reason, anything else names the credential', () => {
    const outage = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    for (const kind of ['visitor', 'agent'] as const) {
      expect(identityRefusal(serviceUnavailable('Redis'), kind)).toEqual({
        end: 'try_later',
        message: 'Service unavailable: retry later',
      });
      expect(identityRefusal(outage, kind)).toEqual({ end: 'try_later', message: 'Service unavailable: retry later' });
      expect(identityRefusal(new DomainError('FORBIDDEN', 'not this merchant'), kind)).toEqual({
        end: 'forbidden',
        message: 'not this merchant',
      });
      expect(identityRefusal(new DomainError('RATE_LIMITED', 'too many tokens from here', 30), kind)).toEqual({
        end: 'rate_limited',
        message: 'too many tokens from here',
      });
    }
    for (const error of [new DomainError('UNAUTHENTICATED', 'no such token'), new Error('anything')]) {
      expect(identityRefusal(error, 'visitor')).toEqual({
        end: 'forbidden',
        message: 'Visitor token not valid or expired: get a new visitor token',
      });
      expect(identityRefusal(error, 'agent')).toEqual({
        end: 'forbidden',
        message: 'Agent Session not valid or expired: log in again (a visitor token goes in authorization)',
      });
    }
  });
});
