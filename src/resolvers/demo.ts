import { count, eq } from 'drizzle-orm';
import { agents, conversations, merchants, visitors } from '../db/schema.js';
import { demoMerchantIds, seedDemoData } from '../db/seed.js';
import type { Deps } from '../deps.js';
import { claimConversation, pinConversation } from './conversations/agent-actions.js';
import { assignAgent } from './conversations/routing.js';
import { markRead } from './messages/read.js';
import { sendMessage } from './messages/send.js';
import type { AgentViewer, VisitorViewer } from './viewer.js';

/**
 * The demo data of the README: the rows of src/db/seed.ts, then alice's two conversations made
 * the way real ones are (assign, claim, messages, read, pin): Lily (pinned, everything read) and
 * 王先生 (three unread messages).
 */
export async function loadDemoData(deps: Deps) {
  await seedDemoData(deps);
  // A write path like any other: running instances drop their cached configuration of both merchants.
  for (const id of demoMerchantIds) await deps.configCache.announceChanged(id);
  await seedDemoChat(deps);
}

/** `npm start` on an empty database loads the demo data once; later starts leave data alone. */
export async function loadDemoDataIfEmpty(deps: Deps) {
  const [row] = await deps.db.select({ n: count() }).from(merchants);
  if ((row?.n ?? 0) > 0) return;
  await loadDemoData(deps);
  deps.log.info('demo data loaded (merchants demo and acme; see README)');
}

/** Alice's demo conversations; a visitor that already has a conversation is left alone. */
export async function seedDemoChat(deps: Deps) {
  const [alice] = await deps.db.select().from(agents).where(eq(agents.id, 'a_alice'));
  if (!alice) return;
  // The demo acts as alice would through her Session; no Session is involved.
  const aliceViewer: AgentViewer = {
    kind: 'agent',
    agentId: alice.id,
    merchantId: alice.merchantId,
    bid: 'demo',
    level: alice.level,
    agent: alice,
    session: {
      id: 'demo-seed',
      state: {},
      regenerate: async () => {},
      save: async () => {},
      destroy: async () => {},
    },
    clientAddress: null,
  };
  const script: {
    visitorId: string;
    lines: [from: 'visitor' | 'agent', text: string][];
    read: boolean;
    pin: boolean;
  }[] = [
    {
      visitorId: 'v_demo_lily',
      lines: [
        ['visitor', 'Hi! Is the blue summer dress still available in size M?'],
        ['agent', 'Hello Lily, yes it is, and it ships today.'],
        ['visitor', 'Thanks, that helps!'],
      ],
      read: true,
      pin: true,
    },
    {
      visitorId: 'v_demo_wang',
      lines: [
        ['visitor', '你好'],
        ['visitor', '我上周下的订单还没有收到。'],
        ['visitor', 'Is my order shipped yet?'],
      ],
      read: false,
      pin: false,
    },
  ];
  for (const chat of script) {
    const [visitor] = await deps.db.select().from(visitors).where(eq(visitors.id, chat.visitorId));
    if (!visitor) continue;
    const [existing] = await deps.db
      .select({ id: conversations.id })
      .from(conversations)
      .where(eq(conversations.visitorId, visitor.id))
      .limit(1);
    if (existing) continue;
    const visitorViewer: VisitorViewer = {
      kind: 'visitor',
      visitorId: visitor.id,
      merchantId: visitor.merchantId,
      bid: 'demo',
      channel: visitor.channel,
    };
    const assigned = await assignAgent(deps, visitorViewer, { agentId: alice.id });
    if (assigned.state === 'queued') await claimConversation(deps, aliceViewer, { visitorId: visitor.id });
    let n = 0;
    for (const [from, text] of chat.lines) {
      n++;
      const key = `demo-${n}`;
      if (from === 'visitor') await sendMessage(deps, visitorViewer, { clientMsgId: key, content: text });
      else await sendMessage(deps, aliceViewer, { visitorId: visitor.id, clientMsgId: key, content: text });
    }
    if (chat.read) {
      await markRead(deps, aliceViewer, { visitorId: visitor.id, seq: 1_000 });
      await markRead(deps, visitorViewer, { seq: 1_000 });
    }
    if (chat.pin) await pinConversation(deps, aliceViewer, { visitorId: visitor.id });
  }
}
