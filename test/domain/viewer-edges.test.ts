import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { visitorTokens } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { createMerchantConfigCache } from '../../src/resolvers/merchant-config.js';
import {
  hashToken,
  heldViewer,
  requireAgent,
  requireVisitor,
  requireVisitorByHash,
  type VisitorViewer,
} from '../../src/resolvers/viewer.js';
import { issueVisitorToken, revokeVisitorToken } from '../../src/resolvers/visitor.js';
import { clientIp, type Factories, refusalOf, type TestDeps, testSession, useTestDeps } from '../support/deps.js';

/**
 * The edges of the visitor token check (src/resolvers/viewer.ts), by value: concurrent checks of
 * one token share one query, but never across a revocation; the in-flight entry is cleaned when
 * its check settles; failed lookups are charged to the client address (and only they); and the
 * small viewer a connection keeps.
 */
let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const REFUSED = 'VISITOR_UNAUTHENTICATED: Visitor token missing, invalid or expired: get a new visitor token';

/** A visitor token of a fresh merchant and the viewer it stands for. */
async function issued() {
  const m = await f.merchant();
  const { token, uid } = await issueVisitorToken(deps, { appkey: m.appkey }, clientIp());
  const viewer = await requireVisitor(deps, token);
  expect(viewer).toEqual({
    kind: 'visitor',
    visitorId: uid,
    merchantId: m.merchantId,
    bid: m.bid,
    channel: expect.stringMatching(/^visitor-/),
  });
  return { token, hash: hashToken(token), viewer };
}

interface HeldQuery {
  /** The query's own result (it runs at once). */
  ran: Promise<unknown>;
  /** Lets the check see that result. */
  release(): void;
}

/**
 * Deps whose token lookups are held: each query runs at once, but the check sees its result
 * only when the test releases it. A handle of its own, so its checks in flight are its own
 * (they are kept per database handle); `queries` counts the lookups made.
 */
function heldTokenLookups(base: Deps = deps) {
  const queries: HeldQuery[] = [];
  const call = (target: object, method: (...args: unknown[]) => unknown, args: unknown[]) => method.apply(target, args);
  const builder = (target: object): object =>
    new Proxy(target, {
      get(obj, prop) {
        const value = Reflect.get(obj, prop, obj);
        if (typeof value !== 'function') return value;
        if (prop === 'prepare')
          return (...args: unknown[]) => {
            const prepared = call(obj, value, args) as { execute(params: unknown): Promise<unknown> };
            return {
              execute(params: unknown) {
                const ran = prepared.execute(params);
                return new Promise((resolve) => queries.push({ ran, release: () => resolve(ran) }));
              },
            };
          };
        return (...args: unknown[]) => {
          const result = call(obj, value, args);
          return typeof result === 'object' && result !== null ? builder(result) : result;
        };
      },
    });
  const db = new Proxy(base.db, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (prop === 'select') return (...args: unknown[]) => builder(call(target, value, args) as object);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const releaseAll = () => {
    for (const q of queries) q.release();
  };
  return { deps: { ...base, db: db as Deps['db'] }, queries, releaseAll };
}

describe('checks of one token in flight (lookUpToken)', () => {
  it('two concurrent checks share one query and both get the visitor; one after they settled queries again', async () => {
    const t = await issued();
    const held = heldTokenLookups();
    const first = requireVisitor(held.deps, t.token);
    const second = requireVisitor(held.deps, t.token);
    expect(held.queries.length).toBe(1);
    held.releaseAll();
    expect(await Promise.all([first, second])).toEqual([t.viewer, t.viewer]);
    const third = requireVisitor(held.deps, t.token);
    expect(held.queries.length).toBe(2);
    held.releaseAll();
    expect(await third).toEqual(t.viewer);
  });

  it('a settled check is not reused: a token revoked since (even unannounced) is refused', async () => {
    const t = await issued();
    const held = heldTokenLookups();
    const first = requireVisitor(held.deps, t.token);
    held.releaseAll();
    expect(await first).toEqual(t.viewer);
    // Revoked behind the gateway's back: no announcement, so only a new query can see it.
    await deps.db.update(visitorTokens).set({ revokedAt: new Date() }).where(eq(visitorTokens.tokenHash, t.hash));
    const after = requireVisitor(held.deps, t.token);
    held.releaseAll();
    expect(await refusalOf(after)).toBe(REFUSED);
  });

  it('a failed check is not reused either: the token valid again is accepted', async () => {
    const t = await issued();
    const held = heldTokenLookups();
    await deps.db
      .update(visitorTokens)
      .set({ expiresAt: new Date(0) })
      .where(eq(visitorTokens.tokenHash, t.hash));
    const expired = requireVisitor(held.deps, t.token);
    held.releaseAll();
    expect(await refusalOf(expired)).toBe(REFUSED);
    await deps.db
      .update(visitorTokens)
      .set({ expiresAt: new Date(Date.now() + 3_600_000) })
      .where(eq(visitorTokens.tokenHash, t.hash));
    const again = requireVisitor(held.deps, t.token);
    held.releaseAll();
    expect(await again).toEqual(t.viewer);
  });

  it('a check started before a revocation is not shared with one started after it', async () => {
    const t = await issued();
    const held = heldTokenLookups();
    const before = requireVisitor(held.deps, t.token);
    // Its query has read the token unrevoked; its result is held.
    await held.queries[0]?.ran;
    expect(await revokeVisitorToken(deps, t.token)).toBe(true);
    const after = requireVisitor(held.deps, t.token);
    expect(held.queries.length).toBe(2);
    held.releaseAll();
    expect(await before).toEqual(t.viewer);
    expect(await refusalOf(after)).toBe(REFUSED);
  });

  it('an older check settling does not drop the newer one in flight: a third check still shares it', async () => {
    const t = await issued();
    const held = heldTokenLookups();
    const older = requireVisitor(held.deps, t.token);
    deps.configCache.forgetToken(t.hash);
    const newer = requireVisitor(held.deps, t.token);
    expect(held.queries.length).toBe(2);
    held.queries[0]?.release();
    expect(await older).toEqual(t.viewer);
    const third = requireVisitorByHash(held.deps, t.hash);
    expect(held.queries.length).toBe(2);
    held.releaseAll();
    expect(await Promise.all([newer, third])).toEqual([t.viewer, t.viewer]);
  });
});

describe('failed lookups charged to the client address (VISITOR_TOKEN_FAILURES_PER_MINUTE)', () => {
  const BUDGET = 2;
  const limited = () => {
    const hardening = { ...deps.config.hardening, visitorTokenFailuresPerMinute: BUDGET };
    return { ...deps, config: { ...deps.config, hardening } };
  };
  const RATE_LIMITED = /^RATE_LIMITED: Too many invalid visitor tokens from this address: retry in \d+ s$/;

  it('past the budget an address is refused before the lookup, even with a valid token; valid tokens cost nothing', async () => {
    const t = await issued();
    const d = limited();
    const spent = clientIp();
    for (let i = 0; i < BUDGET; i++) expect(await refusalOf(requireVisitor(d, `made-up-${i}`, spent))).toBe(REFUSED);
    expect(await refusalOf(requireVisitor(d, t.token, spent))).toMatch(RATE_LIMITED);
    expect(await refusalOf(requireVisitor(d, 'made-up-again', spent))).toMatch(RATE_LIMITED);
    const fine = clientIp();
    for (let i = 0; i <= BUDGET; i++) expect(await requireVisitor(d, t.token, fine)).toEqual(t.viewer);
    expect(await refusalOf(requireVisitor(d, 'made-up', fine))).toBe(REFUSED);
  });

  it('without an address (a socket’s own re-checks) nothing is counted', async () => {
    const d = limited();
    for (let i = 0; i <= BUDGET + 1; i++)
      expect(await refusalOf(requireVisitorByHash(d, hashToken(`made-up-${i}`)))).toBe(REFUSED);
  });

  it('a database failure is not the visitor’s: it is not charged', async () => {
    const t = await issued();
    // Building the token query on this handle fails, as a lost connection would.
    const down = new Proxy(deps.db, {
      get: (target, key) =>
        key === 'select'
          ? () => {
              throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
            }
          : Reflect.get(target, key),
    });
    const d = limited();
    const broken = { ...d, db: down as Deps['db'] };
    const address = clientIp();
    for (let i = 0; i <= BUDGET; i++)
      await expect(requireVisitor(broken, t.token, address)).rejects.toThrow('connect ECONNREFUSED 127.0.0.1:5432');
    expect(await requireVisitor(d, t.token, address)).toEqual(t.viewer);
  });

  it('a check the started cache holds is served to a spent address', async () => {
    const t = await issued();
    const cache = createMerchantConfigCache(deps);
    await cache.start();
    try {
      const d = { ...limited(), configCache: cache };
      const spent = clientIp();
      expect(await requireVisitor(d, t.token, clientIp())).toEqual(t.viewer);
      for (let i = 0; i < BUDGET; i++) await refusalOf(requireVisitor(d, `made-up-${i}`, spent));
      expect(await refusalOf(requireVisitor(d, 'made-up-again', spent))).toMatch(RATE_LIMITED);
      expect(await requireVisitor(d, t.token, spent)).toEqual(t.viewer);
    } finally {
      await cache.stop();
    }
  });
});

describe('what a connection keeps of a viewer (heldViewer), and the agent’s address', () => {
  it('an agent: its ids, bid, level and the Session’s id only; a visitor: the viewer itself', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m, { level: 'admin' });
    expect(heldViewer(agent)).toEqual({
      kind: 'agent',
      agentId: agent.agentId,
      merchantId: m.merchantId,
      bid: m.bid,
      level: 'admin',
      session: { id: agent.session.id },
    });
    const visitor: VisitorViewer = { kind: 'visitor', visitorId: 'v', merchantId: 'm', bid: 'b', channel: 'visitor-v' };
    expect(heldViewer(visitor)).toBe(visitor);
  });

  it('requireAgent keeps the request’s address for the audit log, null without one', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    const session = testSession({
      createdAt: deps.now(),
      agent: { agentId: agent.agentId, merchantId: m.merchantId, bid: m.bid, level: agent.level },
    });
    expect((await requireAgent(deps, session, '10.9.8.7')).clientAddress).toBe('10.9.8.7');
    expect((await requireAgent(deps, session)).clientAddress).toBeNull();
  });
});
