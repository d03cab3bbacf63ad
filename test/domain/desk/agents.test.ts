import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentGroups, agents, auditLog } from '../../../src/db/schema.js';
import { createDeskAgent, listAgents, setAgentDisabled, updateDeskAgent } from '../../../src/resolvers/desk/agents.js';
import { agentChannel, sessionFingerprint } from '../../../src/resolvers/events.js';
import type { SessionDirectory } from '../../../src/resolvers/session.js';
import { agentSessionsKey } from '../../../src/resolvers/session.js';
import { codeOf, factories, recordEvents, refusalOf, type TestDeps, testDeps } from '../../support/deps.js';

let deps: TestDeps;
let f: ReturnType<typeof factories>;
beforeAll(async () => {
  deps = await testDeps();
  f = factories(deps);
});
afterAll(async () => {
  await f.cleanup();
});

/** No stored Sessions: the agents of these tests never logged in. */
const noSessions: SessionDirectory = { peek: async () => undefined, destroy: async () => {} };
const auditRows = (merchantId: string) =>
  deps.db.select().from(auditLog).where(eq(auditLog.merchantId, merchantId)).orderBy(asc(auditLog.id));

describe('Agents of the admin surface', () => {
  it('two admins demoting each other at once: exactly one wins, the merchant keeps an admin', async () => {
    const m = await f.merchant();
    const [a, b] = await Promise.all([f.agent(m, { level: 'admin' }), f.agent(m, { level: 'admin' })]);
    const results = await Promise.all([
      codeOf(updateDeskAgent(deps, a, { agentId: b.agentId, level: 'agent' }, noSessions)),
      codeOf(updateDeskAgent(deps, b, { agentId: a.agentId, level: 'agent' }, noSessions)),
    ]);
    expect(results.sort()).toEqual(['LAST_ADMIN', 'no error']);
    const admins = await deps.db
      .select({ id: agents.id })
      .from(agents)
      .where(and(eq(agents.merchantId, m.merchantId), eq(agents.level, 'admin')));
    expect(admins).toHaveLength(1);
    expect((await auditRows(m.merchantId)).map((r) => r.action)).toEqual(['agent.updated']);
  });

  it('disabling the last enabled admin is refused; with another admin it is allowed and audited', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    expect(await codeOf(setAgentDisabled(deps, admin, { agentId: admin.agentId }, true, noSessions))).toBe(
      'LAST_ADMIN',
    );
    const other = await f.agent(m, { level: 'admin' });
    const disabled = await setAgentDisabled(deps, admin, { agentId: other.agentId }, true, noSessions);
    expect(disabled.account.disabled).toBe(true);
    expect((await auditRows(m.merchantId)).map((r) => [r.action, r.targetId, r.after])).toEqual([
      ['agent.disabled', other.agentId, { disabled: true }],
    ]);
  });

  it('a refused creation (taken username, foreign group, non-admin) leaves no agent and no audit row', async () => {
    const m = await f.merchant();
    const other = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const agent = await f.agent(m);
    const input = { username: admin.agent.username, nickname: 'Twin', password: 'twin-password' };
    expect(await codeOf(createDeskAgent(deps, admin, input))).toBe('BAD_USER_INPUT');
    const [foreignGroup] = await deps.db.select().from(agentGroups).where(eq(agentGroups.merchantId, other.merchantId));
    expect(foreignGroup).toBeDefined();
    expect(
      await codeOf(
        createDeskAgent(deps, admin, { ...input, username: `u-${m.bid}`, groupIds: [foreignGroup?.id ?? ''] }),
      ),
    ).toBe('NOT_FOUND');
    expect(await codeOf(createDeskAgent(deps, agent, { ...input, username: `v-${m.bid}` }))).toBe('FORBIDDEN');
    const names = (await deps.db.select().from(agents).where(eq(agents.merchantId, m.merchantId))).map(
      (a) => a.username,
    );
    expect(names.sort()).toEqual([admin.agent.username, agent.agent.username].sort());
    expect(await auditRows(m.merchantId)).toEqual([]);
  });
});

/** A Session directory that records which Session IDs were ended. */
function recordingSessions() {
  const ended: string[] = [];
  const directory: SessionDirectory = {
    peek: async () => undefined,
    destroy: async (id) => {
      ended.push(id);
    },
  };
  return { directory, ended };
}

const groupNamed = async (merchantId: string, name: string) =>
  (
    await deps.db
      .select({ id: agentGroups.id })
      .from(agentGroups)
      .where(and(eq(agentGroups.merchantId, merchantId), eq(agentGroups.name, name)))
  )[0]?.id ?? '';

describe('Agents of the admin surface, by value', () => {
  it('a created agent: its profile, account and audit row; the defaults when nothing is given', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const group = await groupNamed(m.merchantId, 'Default');
    const made = await createDeskAgent(deps, admin, {
      username: `Eve.${m.bid}`,
      nickname: 'Eve',
      password: 'eve-password',
      level: 'admin',
      capacity: 3,
      groupIds: [group],
    });
    const account = { username: `Eve.${m.bid}`, disabled: false, capacity: 3, groupIds: [group], skills: [] };
    expect(made).toEqual({
      agentId: expect.stringMatching(/^a/),
      nickname: 'Eve',
      avatar: expect.any(String),
      level: 'admin',
      state: 'offline',
      account: { ...account, createdAt: expect.any(Date) },
    });
    const plain = await createDeskAgent(deps, admin, {
      username: `plain-${m.bid}`,
      nickname: 'Plain',
      password: 'plain-password',
    });
    expect([plain.level, plain.account.capacity, plain.account.groupIds]).toEqual(['agent', null, []]);
    const rows = await auditRows(m.merchantId);
    expect(rows.map((r) => [r.action, r.targetType, r.targetId, r.before, r.after])).toContainEqual([
      'agent.created',
      'agent',
      made.agentId,
      null,
      { ...account, nickname: 'Eve', level: 'admin' },
    ]);
    expect(
      await refusalOf(
        createDeskAgent(deps, admin, { username: `eve.${m.bid}`, nickname: 'E', password: 'eve-password' }),
      ),
    ).toBe('BAD_USER_INPUT: username is already taken');
    expect(
      await refusalOf(
        createDeskAgent(deps, admin, { username: `blank-${m.bid}`, nickname: '  ', password: 'eve-password' }),
      ),
    ).toBe('BAD_USER_INPUT: nickname is required');
  });

  it('the list: the merchant’s agents by username, case aside; admins only', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    for (const username of [`b-${m.bid}`, `C-${m.bid}`, `A-${m.bid}`])
      await createDeskAgent(deps, admin, { username, nickname: username, password: 'some-password' });
    await f.agent(await f.merchant());
    const names = (await listAgents(deps, admin)).map((a) => a.account.username);
    expect(names).toEqual(
      [`A-${m.bid}`, admin.agent.username, `b-${m.bid}`, `C-${m.bid}`].sort((x, y) =>
        x.toLowerCase().localeCompare(y.toLowerCase()),
      ),
    );
    expect(names).toHaveLength(4);
    const agent = await f.agent(m);
    expect(await refusalOf(listAgents(deps, agent))).toBe('FORBIDDEN: Only an admin of the merchant may do this');
  });

  it('an update writes each field given, keeps the others, and audits both sides; a new password ends the Sessions', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const agent = await f.agent(m, { maxConcurrentChats: 4 });
    const group = await groupNamed(m.merchantId, 'Default');
    await deps.kv.addToSet(agentSessionsKey(agent.agentId), 'sess-1', 60);
    const { directory, ended } = recordingSessions();
    const events = recordEvents(deps, [agentChannel(agent.agentId)]);
    await events.ready;
    const nicknamed = await updateDeskAgent(deps, admin, { agentId: agent.agentId, nickname: 'Nick' }, directory);
    expect([nicknamed.nickname, nicknamed.level, nicknamed.account.capacity, nicknamed.account.groupIds]).toEqual([
      'Nick',
      'agent',
      4,
      [group],
    ]);
    expect(ended).toEqual([]);
    const changed = await updateDeskAgent(
      deps,
      admin,
      { agentId: agent.agentId, capacity: null, groupIds: [], skills: ['fr'], password: 'a-new-password' },
      directory,
    );
    expect(changed.account).toEqual({ ...nicknamed.account, capacity: null, groupIds: [], skills: ['fr'] });
    expect(changed.nickname).toBe('Nick');
    expect(ended).toEqual(['sess-1']);
    expect((await events.first('session.ended')).data).toEqual({
      reason: 'password_reset',
      sessions: [sessionFingerprint('sess-1')],
    });
    const [hash] = await deps.db.select({ h: agents.passwordHash }).from(agents).where(eq(agents.id, agent.agentId));
    expect(hash?.h).not.toBe(agent.agent.passwordHash);
    const same = await updateDeskAgent(deps, admin, { agentId: agent.agentId }, directory);
    expect(same.account).toEqual(changed.account);
    const account = { username: agent.agent.username, disabled: false, level: 'agent' };
    expect((await auditRows(m.merchantId)).map((r) => [r.action, r.targetType, r.targetId, r.before, r.after])).toEqual(
      [
        [
          'agent.updated',
          'agent',
          agent.agentId,
          { ...account, nickname: agent.agent.nickname, capacity: 4, groupIds: [group], skills: [] },
          { ...account, nickname: 'Nick', capacity: 4, groupIds: [group], skills: [] },
        ],
        [
          'agent.updated',
          'agent',
          agent.agentId,
          { ...account, nickname: 'Nick', capacity: 4, groupIds: [group], skills: [] },
          { ...account, nickname: 'Nick', capacity: null, groupIds: [], skills: ['fr'], passwordChanged: true },
        ],
        [
          'agent.updated',
          'agent',
          agent.agentId,
          { ...account, nickname: 'Nick', capacity: null, groupIds: [], skills: ['fr'] },
          { ...account, nickname: 'Nick', capacity: null, groupIds: [], skills: ['fr'] },
        ],
      ],
    );
    // No update so far changed the level: no level event; a new level is announced.
    expect(events.of('agent.level_changed')).toEqual([]);
    await updateDeskAgent(deps, admin, { agentId: agent.agentId, level: 'ticket_agent' }, directory);
    expect((await events.first('agent.level_changed')).data).toEqual({
      agent_id: agent.agentId,
      level: 'ticket_agent',
    });
    events.stop();
  });

  it('the last enabled admin may change anything but its level; refusals by their words', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const other = await f.merchant();
    const stranger = await f.agent(other);
    const foreignGroup = await groupNamed(other.merchantId, 'Default');
    expect(
      (await updateDeskAgent(deps, admin, { agentId: admin.agentId, nickname: 'Boss', level: 'admin' }, noSessions))
        .nickname,
    ).toBe('Boss');
    expect(await refusalOf(updateDeskAgent(deps, admin, { agentId: admin.agentId, level: 'agent' }, noSessions))).toBe(
      'LAST_ADMIN: The merchant must keep at least one enabled admin: make another agent admin first',
    );
    expect(
      await refusalOf(updateDeskAgent(deps, admin, { agentId: stranger.agentId, nickname: 'X' }, noSessions)),
    ).toBe('NOT_FOUND: No such agent');
    expect(
      await refusalOf(updateDeskAgent(deps, admin, { agentId: admin.agentId, groupIds: [foreignGroup] }, noSessions)),
    ).toBe('NOT_FOUND: No such agent group');
    expect(await refusalOf(setAgentDisabled(deps, admin, { agentId: stranger.agentId }, true, noSessions))).toBe(
      'NOT_FOUND: No such agent',
    );
    // A disabled admin is no enabled admin: demoting one needs no other.
    const retired = await f.agent(m, { level: 'admin' });
    await setAgentDisabled(deps, admin, { agentId: retired.agentId }, true, noSessions);
    expect((await updateDeskAgent(deps, admin, { agentId: retired.agentId, level: 'agent' }, noSessions)).level).toBe(
      'agent',
    );
  });

  it('disabling ends the Sessions and is audited; asking for the state it is in audits nothing', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const agent = await f.agent(m);
    await deps.kv.addToSet(agentSessionsKey(agent.agentId), 'sess-2', 60);
    const { directory, ended } = recordingSessions();
    const events = recordEvents(deps, [agentChannel(agent.agentId)]);
    await events.ready;
    expect((await setAgentDisabled(deps, admin, { agentId: agent.agentId }, false, directory)).account.disabled).toBe(
      false,
    );
    expect(ended).toEqual([]);
    expect((await setAgentDisabled(deps, admin, { agentId: agent.agentId }, true, directory)).account.disabled).toBe(
      true,
    );
    expect(ended).toEqual(['sess-2']);
    expect((await events.first('session.ended')).data).toEqual({
      reason: 'disabled',
      sessions: [sessionFingerprint('sess-2')],
    });
    events.stop();
    // The only enabled admin enabling itself is no change, and no refusal.
    expect((await setAgentDisabled(deps, admin, { agentId: admin.agentId }, false, directory)).account.disabled).toBe(
      false,
    );
    expect((await setAgentDisabled(deps, admin, { agentId: agent.agentId }, true, directory)).account.disabled).toBe(
      true,
    );
    expect((await setAgentDisabled(deps, admin, { agentId: agent.agentId }, false, directory)).account.disabled).toBe(
      false,
    );
    expect((await auditRows(m.merchantId)).map((r) => [r.action, r.targetType, r.targetId, r.before, r.after])).toEqual(
      [
        ['agent.disabled', 'agent', agent.agentId, { disabled: false }, { disabled: true }],
        ['agent.enabled', 'agent', agent.agentId, { disabled: true }, { disabled: false }],
      ],
    );
  });
});
