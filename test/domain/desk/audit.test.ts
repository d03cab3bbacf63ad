import { asc, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { agentGroups, agents, auditLog } from '../../../src/db/schema.js';
import { restErrorTable } from '../../../src/errors.js';
import { auditedAgent, OPERATOR_ACTOR, recordAudit } from '../../../src/resolvers/desk/audit.js';
import { requireAdmin, requireAgent } from '../../../src/resolvers/viewer.js';
import { clientIp, codeOf, type Factories, type TestDeps, testSession, useTestDeps } from '../../support/deps.js';

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const rowsOf = (merchantId: string) =>
  deps.db.select().from(auditLog).where(eq(auditLog.merchantId, merchantId)).orderBy(asc(auditLog.id));

describe('Admins (requireAdmin)', () => {
  it('lets an admin through, as it is', async () => {
    const admin = await f.agent(await f.merchant(), { level: 'admin' });
    expect(requireAdmin(admin)).toBe(admin);
  });

  it('refuses an agent and a ticket agent with FORBIDDEN, the documented 1403 / HTTP 403', async () => {
    const m = await f.merchant();
    for (const level of ['agent', 'ticket_agent'] as const) {
      const viewer = await f.agent(m, { level });
      expect(await codeOf(Promise.resolve().then(() => requireAdmin(viewer)))).toBe('FORBIDDEN');
    }
    expect(restErrorTable.FORBIDDEN).toEqual({ code: 1403, status: 403 });
  });

  it('reads the level from the database on each request: a demoted admin is refused at once', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const session = testSession({
      createdAt: deps.now(),
      agent: { agentId: admin.agentId, merchantId: m.merchantId, bid: m.bid, level: 'admin' },
    });
    expect(requireAdmin(await requireAgent(deps, session)).agentId).toBe(admin.agentId);
    await deps.db.update(agents).set({ level: 'agent' }).where(eq(agents.id, admin.agentId));
    expect(await codeOf(requireAgent(deps, session).then(requireAdmin))).toBe('FORBIDDEN');
  });
});

describe('The client address of a request reaches the domain', () => {
  it('requireAgent keeps the address the adapter gives it, null when none', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    const session = testSession({
      createdAt: deps.now(),
      agent: { agentId: agent.agentId, merchantId: m.merchantId, bid: m.bid, level: agent.level },
    });
    const address = clientIp();
    expect((await requireAgent(deps, session, address)).clientAddress).toBe(address);
    expect((await requireAgent(deps, session)).clientAddress).toBeNull();
  });
});

describe('The audit log (recordAudit)', () => {
  it('appends who, what, which target, before → after and the address', async () => {
    const m = await f.merchant();
    const admin = { ...(await f.agent(m, { level: 'admin', nickname: 'Ada Admin' })), clientAddress: '10.9.8.7' };
    await recordAudit(deps.db, {
      ...auditedAgent(admin),
      action: 'agent_group.updated',
      target: { type: 'agent_group', id: 'g_1' },
      before: { name: 'Sales' },
      after: { name: 'Sales EU' },
    });
    const [row, ...rest] = await rowsOf(m.merchantId);
    expect(rest).toEqual([]);
    expect(row).toMatchObject({
      merchantId: m.merchantId,
      actorKind: 'agent',
      actorId: admin.agentId,
      actorName: 'Ada Admin',
      action: 'agent_group.updated',
      targetType: 'agent_group',
      targetId: 'g_1',
      before: { name: 'Sales' },
      after: { name: 'Sales EU' },
      clientAddress: '10.9.8.7',
    });
    expect(Math.abs((row?.createdAt.getTime() ?? 0) - Date.now())).toBeLessThan(60_000);
  });

  it('commits with the change it records, and a change rolled back leaves no record', async () => {
    const m = await f.merchant();
    const entry = (id: string) => ({
      merchantId: m.merchantId,
      actor: OPERATOR_ACTOR,
      clientAddress: null,
      action: 'agent_group.created',
      target: { type: 'agent_group', id },
      after: { name: id },
    });
    await deps.db.transaction(async (tx) => {
      await tx.insert(agentGroups).values({ id: `g_kept_${m.bid}`, merchantId: m.merchantId, name: 'Kept' });
      await recordAudit(tx, entry(`g_kept_${m.bid}`));
    });
    await deps.db
      .transaction(async (tx) => {
        await tx.insert(agentGroups).values({ id: `g_lost_${m.bid}`, merchantId: m.merchantId, name: 'Lost' });
        await recordAudit(tx, entry(`g_lost_${m.bid}`));
        throw new Error('the change fails after its record');
      })
      .catch(() => {});
    expect((await rowsOf(m.merchantId)).map((r) => [r.targetId, r.actorKind, r.before, r.clientAddress])).toEqual([
      [`g_kept_${m.bid}`, 'operator', null, null],
    ]);
    const groups = await deps.db.select().from(agentGroups).where(eq(agentGroups.merchantId, m.merchantId));
    expect(groups.map((g) => g.name).sort()).toEqual(['Default', 'Kept']);
  });

  it('takes actions in dot.case only', async () => {
    const m = await f.merchant();
    for (const action of ['agentCreated', 'agent', 'Agent.created', 'agent..created', 'agent.created.']) {
      await expect(
        recordAudit(deps.db, {
          merchantId: m.merchantId,
          actor: OPERATOR_ACTOR,
          clientAddress: null,
          action,
          target: { type: 'agent', id: 'x' },
        }),
      ).rejects.toThrow(/dot\.case/);
    }
    expect(await rowsOf(m.merchantId)).toEqual([]);
  });
});
