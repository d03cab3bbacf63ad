import { and, asc, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { agentGroups, agents, auditLog } from '../../../src/db/schema.js';
import { createAgentGroup, listAgentGroups, updateAgentGroup } from '../../../src/resolvers/desk/groups.js';
import type { AgentViewer } from '../../../src/resolvers/viewer.js';
import { type Factories, refusalOf, type TestDeps, type TestMerchant, useTestDeps } from '../../support/deps.js';

/**
 * The agent groups of the admin surface (src/resolvers/desk/groups.ts) at the domain level, by
 * value: the list's order and members, what a create and an update write, each refusal's words,
 * the single default group, the complete member list, the routing cursor, the audit rows, one
 * merchant never reaching another's groups or agents. test/api/desk-admin.test.ts reads the same
 * through REST and GraphQL.
 */
let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

/** A merchant, its admin and the id of its default group (createMerchant makes it). */
async function desk(): Promise<{ m: TestMerchant; admin: AgentViewer; defaultId: string }> {
  const m = await f.merchant();
  const admin = await f.agent(m, { level: 'admin' });
  const [group] = await deps.db
    .select({ id: agentGroups.id })
    .from(agentGroups)
    .where(and(eq(agentGroups.merchantId, m.merchantId), eq(agentGroups.isDefault, true)));
  return { m, admin, defaultId: group?.id ?? '' };
}

const auditOf = async (merchantId: string) =>
  (await deps.db.select().from(auditLog).where(eq(auditLog.merchantId, merchantId)).orderBy(asc(auditLog.id))).map(
    (a) => [a.action, `${a.targetType}:${a.targetId}`, a.before, a.after],
  );

const groupIdOf = async (agentId: string) =>
  (await deps.db.select({ groupId: agents.groupId }).from(agents).where(eq(agents.id, agentId)))[0]?.groupId;

describe('listAgentGroups', () => {
  it('the default first, then by position and name, each with its members by id; admins only', async () => {
    const { m, admin, defaultId } = await desk();
    const b = await createAgentGroup(deps, admin, { name: 'Billing' });
    const a = await createAgentGroup(deps, admin, { name: 'Accounts' });
    await updateAgentGroup(deps, admin, { id: a.id, position: b.position });
    const agent = await f.agent(m, { group: 'Billing' });
    const list = await listAgentGroups(deps, admin);
    expect(list).toEqual([
      {
        id: defaultId,
        name: 'Default',
        isDefault: true,
        position: 0,
        memberIds: [admin.agentId],
        routing: 'LEAST_BUSY',
        requiredSkills: [],
      },
      { ...a, position: b.position },
      { ...b, memberIds: [agent.agentId] },
    ]);
    expect(await refusalOf(listAgentGroups(deps, agent))).toBe('FORBIDDEN: Only an admin of the merchant may do this');
  });
});

describe('createAgentGroup', () => {
  it('at the next position, with its members moved in, audited; the default stays the default', async () => {
    const { m, admin, defaultId } = await desk();
    const [x, y] = [await f.agent(m), await f.agent(m)];
    const created = await createAgentGroup(deps, admin, {
      name: 'Sales',
      memberIds: [y.agentId, x.agentId, x.agentId],
    });
    expect(created).toEqual({
      id: expect.stringMatching(/^g/),
      name: 'Sales',
      isDefault: false,
      position: 1,
      memberIds: [x.agentId, y.agentId].sort(),
      routing: 'LEAST_BUSY',
      requiredSkills: [],
    });
    expect((await createAgentGroup(deps, admin, { name: 'Support' })).position).toBe(2);
    expect(await groupIdOf(admin.agentId)).toBe(defaultId);
    const { id, ...after } = created;
    expect((await auditOf(m.merchantId)).slice(0, 1)).toEqual([
      ['agent_group.created', `agent_group:${id}`, null, after],
    ]);
    expect((await listAgentGroups(deps, admin))[0]?.id).toBe(defaultId);
  });

  it('as the default: the previous default stops being it', async () => {
    const { admin, defaultId } = await desk();
    const created = await createAgentGroup(deps, admin, { name: 'Front desk', isDefault: true });
    expect(created.isDefault).toBe(true);
    const list = await listAgentGroups(deps, admin);
    expect(list.map((g) => [g.id, g.isDefault])).toEqual([
      [created.id, true],
      [defaultId, false],
    ]);
  });

  it('refusals by their words, and nothing created by a refused one', async () => {
    const { m, admin } = await desk();
    const other = await desk();
    const stranger = await f.agent(other.m);
    await createAgentGroup(deps, admin, { name: 'Sales' });
    expect(await refusalOf(createAgentGroup(deps, admin, { name: 'Sales' }))).toBe(
      'BAD_USER_INPUT: name is already taken by another group',
    );
    expect(await refusalOf(createAgentGroup(deps, admin, { name: '   ' }))).toBe('BAD_USER_INPUT: name is required');
    expect(await refusalOf(createAgentGroup(deps, admin, { name: 'Nope', memberIds: [stranger.agentId] }))).toBe(
      'NOT_FOUND: No such agent',
    );
    expect(await refusalOf(createAgentGroup(deps, admin, { name: 'Nope', memberIds: ['a_missing'] }))).toBe(
      'NOT_FOUND: No such agent',
    );
    const agent = await f.agent(m);
    expect(await refusalOf(createAgentGroup(deps, agent, { name: 'Mine' }))).toBe(
      'FORBIDDEN: Only an admin of the merchant may do this',
    );
    expect((await listAgentGroups(deps, admin)).map((g) => g.name)).toEqual(['Default', 'Sales']);
    expect(await groupIdOf(stranger.agentId)).toBe(other.defaultId);
  });
});

describe('updateAgentGroup', () => {
  it('each field as given, the others as they were; audited before and after', async () => {
    const { m, admin } = await desk();
    const group = await createAgentGroup(deps, admin, { name: 'Sales' });
    const renamed = await updateAgentGroup(deps, admin, { id: group.id, name: 'Sales EU' });
    expect(renamed).toEqual({ ...group, name: 'Sales EU' });
    const moved = await updateAgentGroup(deps, admin, { id: group.id, position: 7, requiredSkills: ['fr', 'de'] });
    expect(moved).toEqual({ ...renamed, position: 7, requiredSkills: ['fr', 'de'] });
    // Nothing to write: the group as it is, still audited as an update.
    expect(await updateAgentGroup(deps, admin, { id: group.id })).toEqual(moved);
    const { id: _g, ...before } = group;
    const { id: _r, ...afterRename } = renamed;
    const { id: _m, ...afterMove } = moved;
    expect((await auditOf(m.merchantId)).slice(1)).toEqual([
      ['agent_group.updated', `agent_group:${group.id}`, before, afterRename],
      ['agent_group.updated', `agent_group:${group.id}`, afterRename, afterMove],
      ['agent_group.updated', `agent_group:${group.id}`, afterMove, afterMove],
    ]);
  });

  it('a new routing policy starts its cursor afresh; the same one, or another field, keeps it', async () => {
    const { admin } = await desk();
    const group = await createAgentGroup(deps, admin, { name: 'Sales' });
    const cursorOf = async () =>
      (await deps.db.select({ c: agentGroups.routingCursor }).from(agentGroups).where(eq(agentGroups.id, group.id)))[0]
        ?.c;
    await updateAgentGroup(deps, admin, { id: group.id, routing: 'ROUND_ROBIN' });
    await deps.db.update(agentGroups).set({ routingCursor: 'a_last' }).where(eq(agentGroups.id, group.id));
    expect((await updateAgentGroup(deps, admin, { id: group.id, routing: 'ROUND_ROBIN' })).routing).toBe('ROUND_ROBIN');
    expect(await cursorOf()).toBe('a_last');
    await updateAgentGroup(deps, admin, { id: group.id, name: 'Sales EU' });
    expect(await cursorOf()).toBe('a_last');
    expect((await updateAgentGroup(deps, admin, { id: group.id, routing: 'SKILLS' })).routing).toBe('SKILLS');
    expect(await cursorOf()).toBeNull();
  });

  it('the member list is complete: those named move in, the others leave to no group; an empty list empties it', async () => {
    const { m, admin, defaultId } = await desk();
    const [x, y, z] = [await f.agent(m), await f.agent(m), await f.agent(m)];
    const group = await createAgentGroup(deps, admin, { name: 'Sales', memberIds: [x.agentId, y.agentId] });
    const updated = await updateAgentGroup(deps, admin, { id: group.id, memberIds: [y.agentId, z.agentId] });
    expect(updated.memberIds).toEqual([y.agentId, z.agentId].sort());
    expect([await groupIdOf(x.agentId), await groupIdOf(admin.agentId)]).toEqual([null, defaultId]);
    expect((await updateAgentGroup(deps, admin, { id: group.id, memberIds: [] })).memberIds).toEqual([]);
    expect([await groupIdOf(y.agentId), await groupIdOf(z.agentId), await groupIdOf(admin.agentId)]).toEqual([
      null,
      null,
      defaultId,
    ]);
  });

  it('making a group the default takes it from the previous one; unsetting the default is refused', async () => {
    const { admin, defaultId } = await desk();
    const group = await createAgentGroup(deps, admin, { name: 'Sales' });
    expect(await refusalOf(updateAgentGroup(deps, admin, { id: defaultId, isDefault: false }))).toBe(
      'BAD_USER_INPUT: isDefault: make another group the default instead',
    );
    // false on a group that is not the default changes nothing.
    expect((await updateAgentGroup(deps, admin, { id: group.id, isDefault: false })).isDefault).toBe(false);
    expect((await updateAgentGroup(deps, admin, { id: group.id, isDefault: true })).isDefault).toBe(true);
    // true on the default keeps it the default.
    expect((await updateAgentGroup(deps, admin, { id: group.id, isDefault: true })).isDefault).toBe(true);
    expect((await listAgentGroups(deps, admin)).map((g) => [g.id, g.isDefault])).toEqual([
      [group.id, true],
      [defaultId, false],
    ]);
  });

  it('refusals by their words, each leaving the group as it was', async () => {
    const { m, admin } = await desk();
    const other = await desk();
    const sales = await createAgentGroup(deps, admin, { name: 'Sales' });
    const support = await createAgentGroup(deps, admin, { name: 'Support' });
    expect(await refusalOf(updateAgentGroup(deps, admin, { id: support.id, name: 'Sales', position: 9 }))).toBe(
      'BAD_USER_INPUT: name is already taken by another group',
    );
    expect(await refusalOf(updateAgentGroup(deps, admin, { id: other.defaultId, name: 'Mine' }))).toBe(
      'NOT_FOUND: No such agent group',
    );
    expect(await refusalOf(updateAgentGroup(deps, admin, { id: 'g_missing', name: 'Mine' }))).toBe(
      'NOT_FOUND: No such agent group',
    );
    const stranger = await f.agent(other.m);
    expect(await refusalOf(updateAgentGroup(deps, admin, { id: sales.id, memberIds: [stranger.agentId] }))).toBe(
      'NOT_FOUND: No such agent',
    );
    const agent = await f.agent(m);
    expect(await refusalOf(updateAgentGroup(deps, agent, { id: sales.id, name: 'Mine' }))).toBe(
      'FORBIDDEN: Only an admin of the merchant may do this',
    );
    expect((await listAgentGroups(deps, admin)).slice(1)).toEqual([sales, support]);
    expect((await listAgentGroups(deps, other.admin))[0]?.name).toBe('Default');
  });
});
