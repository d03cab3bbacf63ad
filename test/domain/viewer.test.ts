import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { agents, visitorTokens } from '../../src/db/schema.js';
import { agentChannel, sessionFingerprint } from '../../src/resolvers/events.js';
import { createMerchantConfigCache } from '../../src/resolvers/merchant-config.js';
import { agentSessionsKey } from '../../src/resolvers/session.js';
import {
  endSession,
  hashToken,
  requireAgent,
  requireOnlineReception,
  requireVisitor,
  TICKET_AGENT,
} from '../../src/resolvers/viewer.js';
import { issueVisitorToken, revokeVisitorToken } from '../../src/resolvers/visitor.js';
import {
  clientIp,
  codeOf,
  type Factories,
  recordEvents,
  type TestDeps,
  testSession,
  useTestDeps,
} from '../support/deps.js';

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

/** An agent and a logged-in Session of it (as login leaves it: indexed under the agent). */
async function loggedIn(opts: { level?: 'agent' | 'admin' | 'ticket_agent'; createdAt?: number } = {}) {
  const m = await f.merchant();
  const agent = await f.agent(m, opts.level ? { level: opts.level } : {});
  const session = testSession({
    createdAt: opts.createdAt ?? deps.now(),
    agent: { agentId: agent.agentId, merchantId: m.merchantId, bid: m.bid, level: agent.level },
  });
  await deps.kv.addToSet(agentSessionsKey(agent.agentId), session.id, 3600);
  const feed = recordEvents(deps, [agentChannel(agent.agentId)]);
  await feed.ready;
  return { m, agent, session, feed };
}

/** The Session was destroyed, dropped from the agent's index and announced with `reason`. */
async function expectEnded(s: Awaited<ReturnType<typeof loggedIn>>, reason: string) {
  expect(s.session.destroyed).toBe(true);
  expect(await deps.kv.members(agentSessionsKey(s.agent.agentId))).toEqual([]);
  const ended = await s.feed.first('session.ended');
  expect(ended?.data).toEqual({ reason, sessions: [sessionFingerprint(s.session.id)] });
  s.feed.stop();
}

describe('The agent of a Session (requireAgent)', () => {
  it('is the agent as stored now: its level from the database, the bid from the Session', async () => {
    const s = await loggedIn();
    await deps.db.update(agents).set({ level: 'admin' }).where(eq(agents.id, s.agent.agentId));
    const viewer = await requireAgent(deps, s.session);
    expect(viewer).toMatchObject({
      kind: 'agent',
      agentId: s.agent.agentId,
      merchantId: s.m.merchantId,
      bid: s.m.bid,
      level: 'admin',
      session: s.session,
    });
    expect(viewer.agent.id).toBe(s.agent.agentId);
    expect(s.session.destroyed).toBe(false);
    s.feed.stop();
  });

  it('without a Session, or a Session without an agent, asks to log in', async () => {
    await expect(requireAgent(deps, undefined)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    const anonymous = testSession({ createdAt: deps.now() });
    await expect(requireAgent(deps, anonymous)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    expect(anonymous.destroyed).toBe(false);
  });

  it('ends a Session past its absolute lifetime (and not a moment before)', async () => {
    const ttl = deps.config.sessionAbsoluteTtlSeconds * 1000;
    const t0 = Date.now();
    const atLimit = await loggedIn({ createdAt: t0 - ttl });
    await requireAgent({ ...deps, now: () => t0 }, atLimit.session);
    expect(atLimit.session.destroyed).toBe(false);
    atLimit.feed.stop();

    const past = await loggedIn({ createdAt: t0 - ttl - 1 });
    await expect(requireAgent({ ...deps, now: () => t0 }, past.session)).rejects.toMatchObject({
      code: 'UNAUTHENTICATED',
    });
    await expectEnded(past, 'expired');
  });

  it('a Session without its creation time counts as expired', async () => {
    const s = await loggedIn();
    s.session.state.createdAt = undefined;
    expect(await codeOf(requireAgent(deps, s.session))).toBe('UNAUTHENTICATED');
    await expectEnded(s, 'expired');
  });

  it('ends the Session of an agent that is gone or belongs to another merchant now', async () => {
    const moved = await loggedIn();
    const other = await f.merchant();
    await deps.db.update(agents).set({ merchantId: other.merchantId }).where(eq(agents.id, moved.agent.agentId));
    await expect(requireAgent(deps, moved.session)).rejects.toMatchObject({
      code: 'SESSION_MISMATCH',
      message: 'Invalid parameter: this session no longer matches an agent, please log in again',
    });
    await expectEnded(moved, 'mismatch');

    const gone = await loggedIn();
    gone.session.state.agent = {
      ...(gone.session.state.agent as NonNullable<typeof gone.session.state.agent>),
      agentId: 'a_nobody',
    };
    await deps.kv.addToSet(agentSessionsKey('a_nobody'), gone.session.id, 3600);
    expect(await codeOf(requireAgent(deps, gone.session))).toBe('SESSION_MISMATCH');
    expect(gone.session.destroyed).toBe(true);
    expect(await deps.kv.members(agentSessionsKey('a_nobody'))).toEqual([]);
    gone.feed.stop();
  });

  it('ends the Session of a disabled agent', async () => {
    const s = await loggedIn();
    await deps.db.update(agents).set({ disabled: true }).where(eq(agents.id, s.agent.agentId));
    await expect(requireAgent(deps, s.session)).rejects.toMatchObject({
      code: 'ACCOUNT_DISABLED',
      message: 'This agent account is disabled',
    });
    await expectEnded(s, 'disabled');
  });

  it('ending a Session still destroys and announces it when the index cannot be written', async () => {
    const s = await loggedIn();
    const failingKv = { ...deps.kv, removeFromSet: () => Promise.reject(new Error('store down')) };
    await endSession({ ...deps, kv: failingKv }, s.session, s.agent.agentId, 'logout');
    expect(s.session.destroyed).toBe(true);
    await s.feed.first('session.ended');
    s.feed.stop();
  });
});

describe('Online reception (requireOnlineReception)', () => {
  it('refuses a ticket agent with FORBIDDEN, lets agents and admins through', async () => {
    const m = await f.merchant();
    const ticket = await f.agent(m, { level: 'ticket_agent' });
    expect(TICKET_AGENT).toBe('ticket_agent');
    expect(() => requireOnlineReception(ticket)).toThrow(
      expect.objectContaining({
        code: 'FORBIDDEN',
        message: 'Online reception is not available to ticket agents; use the ticket entry',
      }),
    );
    for (const level of ['agent', 'admin'] as const) {
      const viewer = await f.agent(m, { level });
      expect(requireOnlineReception(viewer)).toBe(viewer);
    }
  });
});

describe('The visitor of a bearer token (requireVisitor)', () => {
  const refused = {
    code: 'VISITOR_UNAUTHENTICATED',
    message: 'Visitor token missing, invalid or expired: get a new visitor token',
  };

  it('is the token’s visitor with its merchant and channel', async () => {
    const m = await f.merchant();
    const issued = await issueVisitorToken(deps, { appkey: m.appkey }, clientIp());
    const viewer = await requireVisitor(deps, issued.token);
    expect(viewer).toEqual({
      kind: 'visitor',
      visitorId: issued.uid,
      merchantId: m.merchantId,
      bid: m.bid,
      channel: expect.stringMatching(/^visitor-/),
    });
  });

  it('refuses a missing, unknown, revoked or expired token', async () => {
    await expect(requireVisitor(deps, undefined)).rejects.toMatchObject(refused);
    await expect(requireVisitor(deps, '')).rejects.toMatchObject(refused);
    await expect(requireVisitor(deps, 'no-such-token')).rejects.toMatchObject(refused);
    const m = await f.merchant();
    const revoked = await issueVisitorToken(deps, { appkey: m.appkey }, clientIp());
    await revokeVisitorToken(deps, revoked.token);
    await expect(requireVisitor(deps, revoked.token)).rejects.toMatchObject(refused);

    const expiring = await issueVisitorToken(deps, { appkey: m.appkey }, clientIp());
    const expiresAt = Date.now() + deps.config.visitorTokenTtlSeconds * 1000;
    await deps.db
      .update(visitorTokens)
      .set({ expiresAt: new Date(expiresAt) })
      .where(eq(visitorTokens.tokenHash, hashToken(expiring.token)));
    await requireVisitor({ ...deps, now: () => expiresAt - 1 }, expiring.token);
    await expect(requireVisitor({ ...deps, now: () => expiresAt }, expiring.token)).rejects.toMatchObject(refused);
  });

  it('a check is reused from the started configuration cache (the token row is not read again)', async () => {
    const m = await f.merchant();
    const issued = await issueVisitorToken(deps, { appkey: m.appkey }, clientIp());
    const cache = createMerchantConfigCache(deps);
    await cache.start();
    const cached = { ...deps, configCache: cache };
    const first = await requireVisitor(cached, issued.token);
    await deps.db.delete(visitorTokens).where(eq(visitorTokens.tokenHash, hashToken(issued.token)));
    expect(await requireVisitor(cached, issued.token)).toEqual(first);
    // Without the cache the token is gone.
    expect(await codeOf(requireVisitor(deps, issued.token))).toBe('VISITOR_UNAUTHENTICATED');
    await cache.stop();
  });

  it('refuses a token whose row points at a visitor of another merchant', async () => {
    const a = await f.merchant();
    const b = await f.merchant();
    const issued = await issueVisitorToken(deps, { appkey: a.appkey }, clientIp());
    await deps.db
      .update(visitorTokens)
      .set({ merchantId: b.merchantId })
      .where(eq(visitorTokens.tokenHash, hashToken(issued.token)));
    await expect(requireVisitor(deps, issued.token)).rejects.toMatchObject(refused);
  });

  it('hashes tokens with SHA-256 (hex): the database never holds the token itself', () => {
    expect(hashToken('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
