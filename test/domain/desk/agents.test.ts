import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentGroups, agents, auditLog } from '../../../src/db/schema.js';
import { createDeskAgent, setAgentDisabled, updateDeskAgent } from '../../../src/resolvers/desk/agents.js';
import type { SessionDirectory } from '../../../src/resolvers/session.js';
import { codeOf, factories, type TestDeps, testDeps } from '../../support/deps.js';

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
const auditRows = (merchantId: string) => deps.db.select().from(auditLog).where(eq(auditLog.merchantId, merchantId));

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
