import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { agentGroups, conversations, visitorAttributes } from '../../src/db/schema.js';
import { evaluateRules, getRoutingRules, updateRoutingRules } from '../../src/resolvers/availability/routing/rules.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { updateDeskAgent } from '../../src/resolvers/desk/agents.js';
import { readAuditLog } from '../../src/resolvers/desk/audit.js';
import { updateAgentGroup } from '../../src/resolvers/desk/groups.js';
import type { SessionDirectory } from '../../src/resolvers/session.js';
import { codeOf, type Factories, type TestDeps, useTestDeps } from '../support/deps.js';

/** SKILLS routing and priority rules (docs/availability.md "Skills and priority"). */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const noSessions: SessionDirectory = { peek: async () => undefined, destroy: async () => {} };

describe('skills and priority', () => {
  it('rules give required skills (entry page, attribute) and a priority; evaluation is pure', () => {
    const rules = [
      { pageContains: '/checkout', skill: 'billing' },
      { attribute: 'plan', equals: 'vip', priority: 10 },
      { attribute: 'plan', equals: 'vip', priority: 5, skill: 'vip' },
      { attribute: 'lang', equals: 'de', skill: 'german' },
    ];
    expect(evaluateRules(rules, new Map([['plan', 'vip']]), 'https://shop/checkout/pay', ['chat'])).toEqual({
      requiredSkills: ['billing', 'chat', 'vip'],
      priority: 10,
    });
    expect(evaluateRules(rules, new Map([['lang', 'en']]), null)).toEqual({ requiredSkills: [], priority: 0 });
    expect(evaluateRules([{ attribute: 'orders', equals: '3', priority: -1 }], new Map([['orders', 3]]), null)).toEqual(
      {
        requiredSkills: [],
        priority: -1,
      },
    );
  });

  it('admins set agents’ skills, a group’s required skills and the rules (audited); bad rules are refused', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const agent = await f.agent(m);
    const updated = await updateDeskAgent(
      deps,
      admin,
      { agentId: agent.agentId, skills: ['billing', 'billing'] },
      noSessions,
    );
    expect(updated.account.skills).toEqual(['billing']);
    expect(await codeOf(updateDeskAgent(deps, agent, { agentId: agent.agentId, skills: ['x'] }, noSessions))).toBe(
      'FORBIDDEN',
    );
    expect(await codeOf(updateRoutingRules(deps, admin, { rules: [{ skill: 'x' }] }))).toBe('BAD_USER_INPUT');
    expect(await codeOf(updateRoutingRules(deps, admin, { rules: [{ attribute: 'plan', skill: 'x' }] }))).toBe(
      'BAD_USER_INPUT',
    );
    expect(await codeOf(updateRoutingRules(deps, admin, { rules: [{ pageContains: '/a', priority: 1000 }] }))).toBe(
      'BAD_USER_INPUT',
    );
    expect(await codeOf(updateRoutingRules(deps, agent, { rules: [] }))).toBe('FORBIDDEN');
    const rules = [{ pageContains: '/checkout', skill: 'billing' }];
    expect(await updateRoutingRules(deps, admin, { rules })).toEqual(rules);
    expect(await getRoutingRules(deps, admin)).toEqual(rules);
    const audit = await readAuditLog(deps, admin, { action: 'routing_rules.updated' });
    expect(audit.entries[0]?.after).toEqual({ rules });
  });

  it('SKILLS routes to agents holding every required skill, or waits; priority orders the queue before FIFO', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const [a, b, c] = [await f.agent(m), await f.agent(m), await f.agent(m, { maxConcurrentChats: 1 })];
    await updateDeskAgent(deps, admin, { agentId: a.agentId, skills: ['chat', 'billing'] }, noSessions);
    await updateDeskAgent(deps, admin, { agentId: b.agentId, skills: ['chat'] }, noSessions);
    const sk = `g_sk_${m.merchantId}`;
    const prio = `g_prio_${m.merchantId}`;
    await deps.db.insert(agentGroups).values([
      { id: sk, merchantId: m.merchantId, name: 'skills' },
      { id: prio, merchantId: m.merchantId, name: 'prio' },
    ]);
    await updateAgentGroup(deps, admin, {
      id: sk,
      routing: 'SKILLS',
      requiredSkills: ['chat'],
      memberIds: [a.agentId, b.agentId],
    });
    await updateAgentGroup(deps, admin, { id: prio, memberIds: [c.agentId] });
    await updateRoutingRules(deps, admin, {
      rules: [
        { pageContains: '/checkout', skill: 'billing' },
        { attribute: 'plan', equals: 'vip', priority: 10 },
        { pageContains: '/legal', skill: 'law' },
      ],
    });
    for (const x of [a, b, c]) await f.online(x);

    // Skills: the checkout page requires billing (only a); the group requires chat (both).
    const v1 = await f.visitor(m);
    const r1 = await assignAgent(deps, v1, { groupId: sk, entryPage: 'https://shop.example/checkout/pay' });
    expect(r1.agent?.agentId).toBe(a.agentId);
    const [row] = await deps.db.select().from(conversations).where(eq(conversations.id, r1.conversationId));
    expect([row?.requiredSkills, row?.entryPage]).toEqual([['billing', 'chat'], 'https://shop.example/checkout/pay']);
    const v2 = await f.visitor(m);
    expect((await assignAgent(deps, v2, { groupId: sk })).agent?.agentId).toBe(b.agentId);
    // Nobody holds "law": it waits rather than go to an agent without the skill.
    const v3 = await f.visitor(m);
    const r3 = await assignAgent(deps, v3, { groupId: sk, entryPage: '/legal/terms' });
    expect([r3.state, r3.queuePosition]).toEqual(['queued', 1]);
    // Once an agent has the skill, the next drain serves it.
    await updateDeskAgent(deps, admin, { agentId: b.agentId, skills: ['chat', 'law'] }, noSessions);
    await closeConversation(deps, v2);
    const [served] = await deps.db.select().from(conversations).where(eq(conversations.id, r3.conversationId));
    expect([served?.state, served?.agentId]).toEqual(['active', b.agentId]);

    // Priority: c is full; a plain visitor then a VIP wait; the VIP is first in line and served first.
    const busy = await f.visitor(m);
    expect((await assignAgent(deps, busy, { groupId: prio })).agent?.agentId).toBe(c.agentId);
    const plain = await f.visitor(m);
    const vip = await f.visitor(m);
    await deps.db.insert(visitorAttributes).values({ visitorId: vip.visitorId, key: 'plan', value: 'vip' });
    expect((await assignAgent(deps, plain, { groupId: prio })).queuePosition).toBe(1);
    const vipAssigned = await assignAgent(deps, vip, { groupId: prio });
    expect(vipAssigned.queuePosition).toBe(1);
    const plainAfter = await assignAgent(deps, plain, { groupId: prio });
    expect(plainAfter.queuePosition).toBe(2);
    await closeConversation(deps, busy);
    expect((await assignAgent(deps, vip, { groupId: prio })).agent?.agentId).toBe(c.agentId);
    expect((await assignAgent(deps, plain, { groupId: prio })).state).toBe('queued');
  });
});
