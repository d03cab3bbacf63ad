import { eq } from 'drizzle-orm';
import { expect, it } from 'vitest';
import { agents, conversations } from '../../src/db/schema.js';
import { listMessages } from '../../src/resolvers/messages/history.js';
import { type Factories, type TestDeps, useTestDeps } from '../support/deps.js';

/**
 * The chat tests' cheap set-up (`f.assignedChat`, test/support/deps.ts) claims to leave what the
 * routed one (`f.activeChat`: the agent online, the visitor's assign routed by the queue) leaves.
 * Held here, so a change to routing's writes that the fixture does not follow fails.
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

/** What a chat set-up left, without its ids and times. */
async function leftBy(chat: Awaited<ReturnType<Factories['activeChat']>>) {
  const [c] = await deps.db.select().from(conversations).where(eq(conversations.id, chat.conversationId));
  const [agent] = await deps.db.select().from(agents).where(eq(agents.id, chat.agent.agentId));
  if (!c || !agent) throw new Error('the set-up left no conversation or agent');
  const { id, merchantId, visitorId, agentId, groupId, createdAt, queuedAt, assignedAt, timestamp, items, ...rest } = c;
  expect([merchantId, visitorId, agentId]).toEqual([chat.m.merchantId, chat.visitor.visitorId, chat.agent.agentId]);
  expect(assignedAt?.getTime()).toBe(agent.lastAssignedAt?.getTime());
  const history = await listMessages(deps, chat.visitor, {});
  return {
    conversation: rest,
    grouped: groupId !== null,
    items: (items as { seq: number; type: string; content: string; sender_type: string }[]).map(
      ({ seq, type, content, sender_type }) => ({ seq, type, content, sender_type }),
    ),
    messages: history.messages.map(({ seq, type, content, senderType, meta }) => ({
      seq,
      type,
      content,
      senderType,
      meta: { ...(meta as object), agent_id: (meta as { agent_id?: string }).agent_id === agent.id },
    })),
  };
}

it('assignedChat leaves the conversation row and system message that a routed activeChat leaves', async () => {
  const names = { agentNickname: 'Alice', visitorNickname: 'Vic' };
  const routed = await leftBy(await f.activeChat(names));
  const assigned = await leftBy(await f.assignedChat(names));
  expect(routed.conversation).toMatchObject({ state: 'active', lastSeq: 1, bot: 0 });
  expect(routed.messages).toEqual([
    expect.objectContaining({ seq: 1, type: 'system', content: 'Alice joined the conversation' }),
  ]);
  expect(assigned).toEqual(routed);
});
