import { describe, expect, it } from 'vitest';
import { agentGroups } from '../../src/db/schema.js';
import { pinConversation } from '../../src/resolvers/conversations/agent-actions.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import { loadAgentProfile, loadWorkbench } from '../../src/resolvers/workbench.js';
import { type Factories, type TestDeps, useTestDeps } from '../support/deps.js';

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const ws = { wsAddress: 'wss://chat.example/graphql' };

describe('The agent workbench (loadWorkbench)', () => {
  it('answers the agent, its merchant’s groups, settings, attribute configuration and extensions', async () => {
    const m = await f.merchant({ settings: { theme: 'dark' } });
    await deps.db
      .insert(agentGroups)
      .values({ id: `g_${m.merchantId}`, merchantId: m.merchantId, name: 'Sales', position: 1 });
    const agent = await f.agent(m, { nickname: 'Alice' });
    const wb = await loadWorkbench(deps, agent, ws);
    expect(wb.agent).toEqual({
      agentId: agent.agentId,
      nickname: 'Alice',
      avatar: '',
      level: 'agent',
      state: expect.any(String),
    });
    expect(wb.agent).toEqual(await loadAgentProfile(deps, agent.agent));
    expect(wb.agentGroups).toEqual([
      { id: expect.any(String), name: 'Default', isDefault: true },
      { id: `g_${m.merchantId}`, name: 'Sales', isDefault: false },
    ]);
    expect(wb.setting).toEqual({
      bid: m.bid,
      appname: 'Test shop',
      appkey: m.appkey,
      wsAddress: ws.wsAddress,
      extra: { theme: 'dark' },
    });
    expect(wb.visitorAttributeConfig).toEqual({ attributes: [] });
    expect(wb.extensions).toEqual({
      nav: [],
      chat_actions: [],
      side_iframes: [],
      flags: {},
      account_level_options: {},
    });
    expect(wb.chatting).toEqual([]);
  });

  it('lists the agent’s active conversations only, pinned first, then the latest; with unread counts', async () => {
    const m = await f.merchant({ maxConcurrentChats: 10 });
    const agent = await f.agent(m);
    const colleague = await f.agent(m);
    const online = await f.online(agent);
    const first = await f.conversation(m, { nickname: 'First' });
    const second = await f.conversation(m, { nickname: 'Second' });
    const third = await f.conversation(m, { nickname: 'Third' });
    const closed = await f.conversation(m, { nickname: 'Closed' });
    await closeConversation(deps, agent, { visitorId: closed.visitor.visitorId });
    // Someone else's conversation is not on this workbench.
    await online.disconnect();
    await f.online(colleague);
    const theirs = await f.conversation(m);
    expect(theirs.agent?.agentId).toBe(colleague.agentId);
    // Two seconds on: activity is kept in whole seconds, and this must be the latest.
    const later = { ...deps, now: () => Date.now() + 2_000 };
    await sendMessage(later, second.visitor, { clientMsgId: 'm1', content: 'hello' });
    await sendMessage(later, second.visitor, { clientMsgId: 'm2', content: 'anyone?' });
    await pinConversation(deps, agent, { visitorId: first.visitor.visitorId });

    const wb = await loadWorkbench(deps, agent, ws);
    expect(wb.chatting.map((c) => c.id).sort()).toEqual([first, second, third].map((c) => c.visitor.visitorId).sort());
    const pinned = wb.chatting[0];
    expect(pinned).toMatchObject({
      key: `visitor${first.visitor.visitorId}`,
      id: first.visitor.visitorId,
      name: 'First',
      type: 'visitor',
      bot: 0,
      historyOnlyMine: false,
    });
    expect(pinned?.pinnedAt).toBeGreaterThan(0);
    const entry = wb.chatting.find((c) => c.id === second.visitor.visitorId);
    expect(entry).toMatchObject({ name: 'Second', unreadCount: 2, accountState: expect.any(String) });
    expect(entry?.items).toEqual([expect.objectContaining({ content: 'anyone?' })]);
    // Unpinned: the latest activity first.
    const rest = wb.chatting.slice(1);
    expect(rest.map((c) => c.timestamp)).toEqual([...rest.map((c) => c.timestamp)].sort((a, b) => b - a));
    expect(rest[0]?.id).toBe(second.visitor.visitorId);
  });

  it('history is limited to the agent’s own conversations when the merchant says so, except for admins', async () => {
    const m = await f.merchant({ settings: { history_only_mine: true } });
    const agent = await f.agent(m);
    const admin = await f.agent(m, { level: 'admin' });
    const online = await f.online(agent);
    await f.conversation(m);
    expect((await loadWorkbench(deps, agent, ws)).chatting[0]?.historyOnlyMine).toBe(true);
    await online.disconnect();
    await f.online(admin);
    expect((await f.conversation(m)).agent?.agentId).toBe(admin.agentId);
    expect((await loadWorkbench(deps, admin, ws)).chatting[0]?.historyOnlyMine).toBe(false);
    // Only `true` turns it on.
    const loose = await f.merchant({ settings: { history_only_mine: 'yes' } });
    const other = await f.agent(loose);
    await f.online(other);
    await f.conversation(loose);
    expect((await loadWorkbench(deps, other, ws)).chatting[0]?.historyOnlyMine).toBe(false);
  });

  it('the capacity is the agent’s own maximum, else the merchant’s', async () => {
    const m = await f.merchant({ maxConcurrentChats: 7 });
    expect((await loadWorkbench(deps, await f.agent(m), ws)).maxConcurrentChats).toBe(7);
    expect((await loadWorkbench(deps, await f.agent(m, { maxConcurrentChats: 2 }), ws)).maxConcurrentChats).toBe(2);
  });

  it('refuses a ticket agent, and a Session whose merchant is gone', async () => {
    const m = await f.merchant();
    await expect(loadWorkbench(deps, await f.agent(m, { level: 'ticket_agent' }), ws)).rejects.toMatchObject({
      code: 'FORBIDDEN',
    });
    const agent = await f.agent(m);
    await expect(loadWorkbench(deps, { ...agent, merchantId: 'm_nobody' }, ws)).rejects.toMatchObject({
      code: 'SESSION_MISMATCH',
      message: 'Invalid parameter: merchant not found, please log in again',
    });
  });
});
