import { asc, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { auditLog } from '../../../src/db/schema.js';
import { endAgentSession, endAllSessions, listSessions } from '../../../src/resolvers/desk/sessions.js';
import { agentChannel, publishSessionEnded, sessionFingerprint } from '../../../src/resolvers/events.js';
import { agentSessionsKey, type SessionDirectory, type SessionState } from '../../../src/resolvers/session.js';
import type { AgentViewer } from '../../../src/resolvers/viewer.js';
import { type Factories, recordEvents, refusalOf, type TestDeps, useTestDeps } from '../../support/deps.js';

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

/** A Session store in memory (the adapters' is express-session's): what peek reads, what destroy removed. */
function directory() {
  const states = new Map<string, SessionState>();
  const destroyed: string[] = [];
  const dir: SessionDirectory = {
    peek: async (sid) => states.get(sid),
    destroy: async (sid) => {
      destroyed.push(sid);
      states.delete(sid);
    },
  };
  return { dir, states, destroyed };
}

let n = 0;
/** Stores a Session of `agent` in `store` and indexes it under `indexAs` (the agent by default). */
async function storeSession(
  store: ReturnType<typeof directory>,
  agent: AgentViewer,
  state: Partial<SessionState> = {},
  sid = `sid-${agent.agentId}-${n++}`,
) {
  store.states.set(sid, {
    agent: { agentId: agent.agentId, merchantId: agent.merchantId, bid: agent.bid, level: agent.level },
    ...state,
  });
  await deps.kv.addToSet(agentSessionsKey(agent.agentId), sid, 3600);
  return sid;
}
const indexOf = async (agentId: string) => (await deps.kv.members(agentSessionsKey(agentId))).sort();
const publicId = (agentId: string, sid: string) => `${agentId}:${sessionFingerprint(sid)}`;
const auditRows = (merchantId: string) =>
  deps.db.select().from(auditLog).where(eq(auditLog.merchantId, merchantId)).orderBy(asc(auditLog.id));

describe('Listing Sessions (listSessions)', () => {
  it('answers the agent’s own Sessions by public id, latest use first, the current one marked', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    const store = directory();
    const old = await storeSession(store, agent, {
      createdAt: 1_000,
      seen: { address: '10.0.0.1', device: 'Old browser', at: 2_000 },
    });
    const fresh = await storeSession(store, agent, {
      createdAt: 3_000,
      seen: { address: '10.0.0.2', device: 'New browser', at: 5_000 },
    });
    // Never seen over HTTP (no `seen`, no createdAt): empty device and address, null dates, last.
    const unseen = await storeSession(store, agent);
    const current = await storeSession(
      store,
      agent,
      { seen: { address: 'a', device: 'd', at: 4_000 } },
      agent.session.id,
    );
    expect(await listSessions(deps, agent, {}, store.dir)).toEqual([
      {
        id: publicId(agent.agentId, fresh),
        agentId: agent.agentId,
        device: 'New browser',
        address: '10.0.0.2',
        createdAt: new Date(3_000),
        lastSeenAt: new Date(5_000),
        current: false,
      },
      {
        id: publicId(agent.agentId, current),
        agentId: agent.agentId,
        device: 'd',
        address: 'a',
        createdAt: null,
        lastSeenAt: new Date(4_000),
        current: true,
      },
      {
        id: publicId(agent.agentId, old),
        agentId: agent.agentId,
        device: 'Old browser',
        address: '10.0.0.1',
        createdAt: new Date(1_000),
        lastSeenAt: new Date(2_000),
        current: false,
      },
      {
        id: publicId(agent.agentId, unseen),
        agentId: agent.agentId,
        device: '',
        address: '',
        createdAt: null,
        lastSeenAt: null,
        current: false,
      },
    ]);
    // Naming itself is the same as naming nobody, for a non-admin too.
    expect((await listSessions(deps, agent, { agentId: agent.agentId }, store.dir)).map((s) => s.id)).toHaveLength(4);
  });

  it('forgets expired Sessions and ones that are no longer this agent’s from the index', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    const other = await f.agent(m);
    const store = directory();
    const live = await storeSession(store, agent);
    const expired = await storeSession(store, agent);
    store.states.delete(expired);
    const loggedOut = await storeSession(store, agent);
    store.states.set(loggedOut, { createdAt: 1 });
    const someoneElse = await storeSession(store, agent);
    store.states.set(someoneElse, {
      agent: { agentId: other.agentId, merchantId: m.merchantId, bid: m.bid, level: 'agent' },
    });
    expect((await listSessions(deps, agent, {}, store.dir)).map((s) => s.id)).toEqual([publicId(agent.agentId, live)]);
    expect(await indexOf(agent.agentId)).toEqual([live]);
  });

  it('lets an admin list another agent of its merchant; others are refused', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const agent = await f.agent(m);
    const colleague = await f.agent(m);
    const foreign = await f.agent(await f.merchant());
    const store = directory();
    const sid = await storeSession(store, agent);
    const listed = await listSessions(deps, admin, { agentId: agent.agentId }, store.dir);
    expect(listed.map((s) => [s.id, s.agentId, s.current])).toEqual([
      [publicId(agent.agentId, sid), agent.agentId, false],
    ]);
    expect(await refusalOf(listSessions(deps, colleague, { agentId: agent.agentId }, store.dir))).toBe(
      'FORBIDDEN: Only an admin of the merchant may do this',
    );
    // Another merchant's agent does not exist for the admin.
    await storeSession(store, foreign);
    expect(await refusalOf(listSessions(deps, admin, { agentId: foreign.agentId }, store.dir))).toBe(
      'NOT_FOUND: No such agent',
    );
    expect(await refusalOf(listSessions(deps, admin, { agentId: 'a_nobody' }, store.dir))).toBe(
      'NOT_FOUND: No such agent',
    );
    expect(await refusalOf(listSessions(deps, admin, { agentId: '' }, store.dir))).toBe(
      'BAD_USER_INPUT: agentId is required',
    );
    expect(await refusalOf(listSessions(deps, admin, { agentId: 'x'.repeat(65) }, store.dir))).toBe(
      'BAD_USER_INPUT: agentId must be at most 64 characters',
    );
  });
});

describe('Ending a Session (endAgentSession)', () => {
  it('ends the agent’s own: destroyed, out of the index, announced as `ended`, audited as the list showed it', async () => {
    const m = await f.merchant();
    const agent = { ...(await f.agent(m, { nickname: 'Bo' })), clientAddress: '10.9.8.7' };
    const store = directory();
    const keep = await storeSession(store, agent);
    const sid = await storeSession(store, agent, {
      createdAt: Date.UTC(2026, 0, 2),
      seen: { address: '10.0.0.5', device: 'Phone', at: Date.UTC(2026, 0, 3) },
    });
    const events = recordEvents(deps, [agentChannel(agent.agentId)]);
    await events.ready;
    const id = publicId(agent.agentId, sid);
    expect(await endAgentSession(deps, agent, { id }, store.dir)).toBe(true);
    expect(store.destroyed).toEqual([sid]);
    expect(await indexOf(agent.agentId)).toEqual([keep]);
    const ended = await events.first('session.ended');
    events.stop();
    expect(ended.data).toEqual({ reason: 'ended', sessions: [sessionFingerprint(sid)] });
    expect(
      (await auditRows(m.merchantId)).map((r) => [
        r.actorId,
        r.actorName,
        r.action,
        r.targetType,
        r.targetId,
        r.before,
        r.after,
        r.clientAddress,
      ]),
    ).toEqual([
      [
        agent.agentId,
        'Bo',
        'session.ended',
        'session',
        id,
        { agentId: agent.agentId, device: 'Phone', address: '10.0.0.5', createdAt: '2026-01-02T00:00:00.000Z' },
        null,
        '10.9.8.7',
      ],
    ]);
    // Ended once: a second end is NOT_FOUND.
    expect(await refusalOf(endAgentSession(deps, agent, { id }, store.dir))).toBe('NOT_FOUND: No such Session');
  });

  it('audits an indexed Session whose state is gone with empty device and address and no date', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    const store = directory();
    const sid = await storeSession(store, agent);
    store.states.delete(sid);
    await endAgentSession(deps, agent, { id: publicId(agent.agentId, sid) }, store.dir);
    expect((await auditRows(m.merchantId)).map((r) => r.before)).toEqual([
      { agentId: agent.agentId, device: '', address: '', createdAt: null },
    ]);
    expect(await indexOf(agent.agentId)).toEqual([]);
  });

  it('lets an admin end another agent’s Session of its merchant, announced as `ended_by_admin`', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const agent = await f.agent(m);
    const store = directory();
    const sid = await storeSession(store, agent);
    const events = recordEvents(deps, [agentChannel(agent.agentId)]);
    await events.ready;
    await endAgentSession(deps, admin, { id: publicId(agent.agentId, sid) }, store.dir);
    const ended = await events.first('session.ended');
    events.stop();
    expect(ended.data).toEqual({ reason: 'ended_by_admin', sessions: [sessionFingerprint(sid)] });
    expect(store.destroyed).toEqual([sid]);
    expect((await auditRows(m.merchantId)).map((r) => [r.actorId, r.targetId])).toEqual([
      [admin.agentId, publicId(agent.agentId, sid)],
    ]);
  });

  it('refuses a colleague’s Session to a non-admin, another merchant’s to an admin, and malformed ids', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const agent = await f.agent(m);
    const colleague = await f.agent(m);
    const foreign = await f.agent(await f.merchant());
    const store = directory();
    const sid = await storeSession(store, agent);
    const foreignSid = await storeSession(store, foreign);
    expect(await refusalOf(endAgentSession(deps, colleague, { id: publicId(agent.agentId, sid) }, store.dir))).toBe(
      'FORBIDDEN: Only an admin of the merchant may do this',
    );
    expect(
      await refusalOf(endAgentSession(deps, admin, { id: publicId(foreign.agentId, foreignSid) }, store.dir)),
    ).toBe('NOT_FOUND: No such agent');
    // No agent part (no colon, or nothing before it): no such Session, whoever asks.
    for (const id of [sessionFingerprint(sid), `:${sessionFingerprint(sid)}`]) {
      expect(await refusalOf(endAgentSession(deps, agent, { id }, store.dir))).toBe('NOT_FOUND: No such Session');
    }
    expect(await refusalOf(endAgentSession(deps, agent, { id: `${agent.agentId}:nope` }, store.dir))).toBe(
      'NOT_FOUND: No such Session',
    );
    expect(await refusalOf(endAgentSession(deps, agent, { id: '' }, store.dir))).toBe('BAD_USER_INPUT: id is required');
    expect(await refusalOf(endAgentSession(deps, agent, { id: 'x'.repeat(201) }, store.dir))).toBe(
      'BAD_USER_INPUT: id must be at most 200 characters',
    );
    // Nothing was ended or audited.
    expect(store.destroyed).toEqual([]);
    expect(await indexOf(agent.agentId)).toEqual([sid]);
    expect(await indexOf(foreign.agentId)).toEqual([foreignSid]);
    expect(await auditRows(m.merchantId)).toEqual([]);
    expect(await auditRows(foreign.merchantId)).toEqual([]);
  });
});

describe('Ending all of an agent’s Sessions (endAllSessions)', () => {
  it('destroys every indexed Session, empties the index, announces them in one event and counts them', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    const store = directory();
    const sids = [await storeSession(store, agent), await storeSession(store, agent)];
    const events = recordEvents(deps, [agentChannel(agent.agentId)]);
    await events.ready;
    expect(await endAllSessions(deps, store.dir, agent.agentId, 'disabled')).toBe(2);
    expect(store.destroyed.sort()).toEqual([...sids].sort());
    expect(await indexOf(agent.agentId)).toEqual([]);
    const ended = await events.first('session.ended');
    events.stop();
    expect((ended.data as { reason: string }).reason).toBe('disabled');
    expect(((ended.data as { sessions: string[] }).sessions ?? []).sort()).toEqual(sids.map(sessionFingerprint).sort());
  });

  it('with no Session answers 0 and announces nothing', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    const store = directory();
    const events = recordEvents(deps, [agentChannel(agent.agentId)]);
    await events.ready;
    expect(await endAllSessions(deps, store.dir, agent.agentId, 'disabled')).toBe(0);
    // A marker after it: once it arrived, anything endAllSessions published would have too.
    await publishSessionEnded(deps, agent.agentId, [], 'marker');
    await events.first('session.ended');
    events.stop();
    expect(events.of('session.ended').map((e) => (e.data as { reason: string }).reason)).toEqual(['marker']);
    expect(store.destroyed).toEqual([]);
  });
});
