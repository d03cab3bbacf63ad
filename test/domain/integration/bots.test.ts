import { randomBytes } from 'node:crypto';
import { and, asc, eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { conversations, messages } from '../../../src/db/schema.js';
import type { Deps } from '../../../src/deps.js';
import { DomainError } from '../../../src/errors.js';
import { assignAgent } from '../../../src/resolvers/conversations/routing.js';
import { createAgentGroup } from '../../../src/resolvers/desk/groups.js';
import { globalChannel } from '../../../src/resolvers/events.js';
import { authenticateApiKey } from '../../../src/resolvers/integration/api-keys/authenticate.js';
import { revokeApiKey } from '../../../src/resolvers/integration/api-keys/keys.js';
import { createBot, listBots, setBotDisabled } from '../../../src/resolvers/integration/bots/bots.js';
import { botHandoff, handOffOverdueBots, requestHuman } from '../../../src/resolvers/integration/bots/handoff.js';
import { type BotViewer, requireBot } from '../../../src/resolvers/integration/bots/viewer.js';
import { listMessages } from '../../../src/resolvers/messages/history.js';
import { sendMessage } from '../../../src/resolvers/messages/send.js';
import type { AgentViewer } from '../../../src/resolvers/viewer.js';
import { loadWorkbench } from '../../../src/resolvers/workbench.js';
import {
  codeOf,
  type Factories,
  recordEvents,
  secondInstance,
  type TestDeps,
  type TestMerchant,
  useTestDeps,
} from '../../support/deps.js';
import { itWhen, realServices } from '../../support/required.js';

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

/** A merchant with an admin and a bot (its key's identity as the API-key layer hands it over). */
async function withBot(opts: { groupId?: string; name?: string } = {}) {
  const m = await f.merchant();
  const admin = await f.agent(m, { level: 'admin', nickname: 'Ada' });
  const bot = await makeBot(m, admin, opts);
  return { m, admin, ...bot };
}

async function makeBot(_m: TestMerchant, admin: AgentViewer, opts: { groupId?: string; name?: string } = {}) {
  const created = await createBot(deps, admin, { name: opts.name ?? 'Robo', groupId: opts.groupId });
  const identity = await authenticateApiKey(deps, created.key);
  const viewer: BotViewer = await requireBot(deps, identity);
  return { created, identity, bot: viewer };
}

const conversationOf = async (visitorId: string) => {
  const [c] = await deps.db
    .select()
    .from(conversations)
    .where(eq(conversations.visitorId, visitorId))
    .orderBy(sql`${conversations.createdAt} desc`)
    .limit(1);
  if (!c) throw new Error('no conversation');
  return c;
};

let n = 0;
const msgId = () => `m-${++n}-${randomBytes(3).toString('hex')}`;

describe('Routing to a bot (first responder)', () => {
  it('a new conversation goes to the merchant’s bot instead of the queue, even with an agent online', async () => {
    const { m, bot } = await withBot({ name: 'Robo' });
    const alice = await f.agent(m);
    await f.online(alice);
    const v = await f.visitor(m);
    const assigned = await assignAgent(deps, v);
    expect(assigned).toMatchObject({ state: 'active', agent: null, queuePosition: null });
    const c = await conversationOf(v.visitorId);
    expect(c).toMatchObject({ state: 'active', agentId: null, botId: bot.botId, bot: 1 });
    const history = await listMessages(deps, v);
    expect(history.messages.map((x) => x.meta)).toEqual([
      { event: 'bot_assigned', bot_id: bot.botId, bot_name: 'Robo' },
    ]);
  });

  it('a group’s bot answers that group only; a disabled bot is skipped', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const other = await createAgentGroup(deps, admin, { name: 'Sales' });
    const { bot } = await makeBot(m, admin, { groupId: other.id });
    const inDefault = await f.visitor(m);
    await assignAgent(deps, inDefault);
    expect((await conversationOf(inDefault.visitorId)).botId).toBeNull();
    const inSales = await f.visitor(m);
    await assignAgent(deps, inSales, { groupId: other.id });
    expect((await conversationOf(inSales.visitorId)).botId).toBe(bot.botId);
    await setBotDisabled(deps, admin, { botId: bot.botId, disabled: true });
    const later = await f.visitor(m);
    await assignAgent(deps, later, { groupId: other.id });
    expect((await conversationOf(later.visitorId)).botId).toBeNull();
  });
});

describe('A bot’s messages (the exactly-once path)', () => {
  it('are stored with the next seq, as the bot, once per client_msg_id', async () => {
    const { m, bot } = await withBot({ name: 'Robo' });
    const v = await f.visitor(m);
    await sendMessage(deps, v, { clientMsgId: msgId(), content: 'hello?' });
    const key = msgId();
    const first = await sendMessage(deps, bot, { visitorId: v.visitorId, clientMsgId: key, content: 'Hi, I am Robo' });
    const again = await sendMessage(deps, bot, { visitorId: v.visitorId, clientMsgId: key, content: 'Hi, I am Robo' });
    expect(first.duplicate).toBe(false);
    expect(again).toMatchObject({ duplicate: true, message: { id: first.message.id, seq: first.message.seq } });
    expect(first.message).toMatchObject({
      senderType: 'bot',
      senderId: bot.botId,
      content: 'Hi, I am Robo',
      meta: { bot_name: 'Robo' },
    });
    const history = await listMessages(deps, v);
    expect(history.messages.map((x) => [x.seq, x.senderType])).toEqual([
      [1, 'system'],
      [2, 'visitor'],
      [3, 'bot'],
    ]);
  });

  it('message.created says which bot holds the conversation', async () => {
    const { m, bot } = await withBot();
    const v = await f.visitor(m);
    await assignAgent(deps, v);
    const rec = recordEvents(deps, [v.channel]);
    await rec.ready;
    await sendMessage(deps, v, { clientMsgId: msgId(), content: 'hi' });
    const event = await rec.first('message.created', v.channel);
    expect(event.data).toMatchObject({ bot_id: bot.botId, message: { sender_type: 'visitor' } });
    rec.stop();
  });

  it('only text, only to a visitor of its merchant, only from a key with messages:write of an enabled bot', async () => {
    const { m, bot, identity, admin } = await withBot();
    const v = await f.visitor(m);
    await assignAgent(deps, v);
    expect(await codeOf(sendMessage(deps, bot, { visitorId: v.visitorId, clientMsgId: msgId(), type: 'image' }))).toBe(
      'BAD_USER_INPUT',
    );
    const stranger = await f.visitor(await f.merchant());
    expect(
      await codeOf(sendMessage(deps, bot, { visitorId: stranger.visitorId, clientMsgId: msgId(), content: 'x' })),
    ).toBe('NOT_FOUND');
    expect(identity.scopes).toEqual(['conversations:read', 'messages:write']);
    expect(await codeOf(requireBot(deps, { ...identity, scopes: ['conversations:read'] }))).toBe('INSUFFICIENT_SCOPE');
    expect(await codeOf(requireBot(deps, { ...identity, merchantId: stranger.merchantId }))).toBe('FORBIDDEN');
    await setBotDisabled(deps, admin, { botId: bot.botId, disabled: true });
    expect(await codeOf(requireBot(deps, identity))).toBe('FORBIDDEN');
    expect((await listBots(deps, admin)).map((b) => b.disabled)).toEqual([true]);
  });

  it('createBot: admins only; the bot and its key in one go, the key shown once and refused once revoked', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const agent = await f.agent(m);
    expect(await codeOf(createBot(deps, agent, { name: 'Nope' }))).toBe('FORBIDDEN');
    expect(await codeOf(createBot(deps, admin, { name: '' }))).toBe('BAD_USER_INPUT');
    expect(await codeOf(createBot(deps, admin, { name: 'x', groupId: 'g_nope' }))).toBe('NOT_FOUND');
    const { bot, key } = await createBot(deps, admin, { name: 'Robo' });
    expect(key).toMatch(/^prly_/);
    expect(bot).toMatchObject({ name: 'Robo', groupId: null, disabled: false });
    expect(await listBots(deps, admin)).toEqual([bot]);
    const identity = await authenticateApiKey(deps, key);
    expect(identity).toMatchObject({ keyId: bot.apiKeyId, merchantId: m.merchantId });
    await revokeApiKey(deps, admin, { id: bot.apiKeyId });
    expect(await codeOf(authenticateApiKey(deps, key))).toBe('API_KEY_INVALID');
  });

  it('a bot cannot write into a conversation it does not hold', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const v = await f.visitor(m);
    await assignAgent(deps, v); // before the bot existed: queued for the agents
    const { bot } = await makeBot(m, admin);
    expect(await codeOf(sendMessage(deps, bot, { visitorId: v.visitorId, clientMsgId: msgId(), content: 'x' }))).toBe(
      'HANDED_OFF',
    );
    expect(await codeOf(botHandoff(deps, bot, { visitorId: v.visitorId }))).toBe('HANDED_OFF');
  });
});

describe('Hand-off to humans', () => {
  it('by the bot: one transition to the queue, routed to an online agent, agents notified, the bot refused after', async () => {
    const { m, bot } = await withBot({ name: 'Robo' });
    const v = await f.visitor(m);
    await assignAgent(deps, v);
    const alice = await f.agent(m, { nickname: 'Alice' });
    await f.online(alice);
    const rec = recordEvents(deps, [globalChannel(m.bid), v.channel]);
    await rec.ready;
    const first = await botHandoff(deps, bot, { visitorId: v.visitorId });
    expect(first).toMatchObject({ handedOff: true, state: 'active' });
    const c = await conversationOf(v.visitorId);
    expect(c).toMatchObject({ state: 'active', agentId: alice.agentId, botId: null, bot: 2 });
    const again = await botHandoff(deps, bot, { visitorId: v.visitorId });
    expect(again.handedOff).toBe(false);
    const event = await rec.first('conversation.handed_off', globalChannel(m.bid));
    expect(event.data).toEqual({
      conversation_id: c.id,
      visitor_id: v.visitorId,
      state: 'queued',
      bot_id: bot.botId,
      group_id: c.groupId,
      reason: 'bot',
    });
    await rec.first('conversation.assigned', globalChannel(m.bid));
    expect(rec.of('conversation.handed_off', globalChannel(m.bid))).toHaveLength(1);
    const error = await sendMessage(deps, bot, { visitorId: v.visitorId, clientMsgId: msgId(), content: 'x' }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DomainError);
    expect((error as DomainError).code).toBe('HANDED_OFF');
    // The agent's workbench shows it, `bot` 2: a bot handed it over.
    const wb = await loadWorkbench(deps, alice, { wsAddress: '' });
    expect(wb.chatting.find((e) => e.id === v.visitorId)?.bot).toBe(2);
    const history = await listMessages(deps, v);
    expect(history.messages.map((x) => x.meta?.event ?? x.senderType)).toEqual(['bot_assigned', 'handoff', 'assigned']);
    rec.stop();
  });

  it('by the visitor asking for a human; without a bot nothing changes', async () => {
    const { m, bot } = await withBot();
    const v = await f.visitor(m);
    await assignAgent(deps, v);
    const result = await requestHuman(deps, v);
    expect(result).toMatchObject({ handedOff: true, state: 'queued' });
    const history = await listMessages(deps, v);
    expect(history.messages.at(-1)?.meta).toMatchObject({ event: 'handoff', reason: 'visitor', bot_id: bot.botId });
    expect((await requestHuman(deps, v)).handedOff).toBe(false);
    const plain = await f.visitor(await f.merchant());
    await assignAgent(deps, plain);
    expect(await requestHuman(deps, plain)).toMatchObject({ handedOff: false, state: 'queued' });
  });

  it('by timeout: a visitor message starts the bot’s deadline, its answer ends it, the sweep hands off past it', async () => {
    const { m, bot } = await withBot();
    const v = await f.visitor(m);
    await sendMessage(deps, v, { clientMsgId: msgId(), content: 'anyone?' });
    const due = (await conversationOf(v.visitorId)).botDueAt;
    expect(due?.getTime()).toBeGreaterThan(Date.now());
    expect(due?.getTime()).toBeLessThanOrEqual(Date.now() + deps.config.bots.handoffTimeoutSeconds * 1000);
    // A second visitor message keeps the first deadline (the oldest unanswered message counts).
    await sendMessage(deps, v, { clientMsgId: msgId(), content: 'hello??' });
    expect((await conversationOf(v.visitorId)).botDueAt?.getTime()).toBe(due?.getTime());
    await sendMessage(deps, bot, { visitorId: v.visitorId, clientMsgId: msgId(), content: 'Here!' });
    expect((await conversationOf(v.visitorId)).botDueAt).toBeNull();
    await sendMessage(deps, v, { clientMsgId: msgId(), content: 'and now?' });
    const c = await conversationOf(v.visitorId);
    // Not yet due: the sweep leaves it.
    await handOffOverdueBots(deps);
    expect((await conversationOf(v.visitorId)).botId).toBe(bot.botId);
    // Past due (as if the time had passed): handed off once, by any sweep.
    await deps.db
      .update(conversations)
      .set({ botDueAt: new Date(Date.now() - 1000) })
      .where(eq(conversations.id, c.id));
    const swept = await Promise.all([handOffOverdueBots(deps), handOffOverdueBots(deps)]);
    expect(swept.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
    const after = await conversationOf(v.visitorId);
    expect(after).toMatchObject({ state: 'queued', botId: null, bot: 2, botDueAt: null });
    const handoffs = (await listMessages(deps, v)).messages.filter((x) => x.meta?.event === 'handoff');
    expect(handoffs.map((x) => x.meta?.reason)).toEqual(['timeout']);
  });

  it('disabling a bot hands off the conversations it holds', async () => {
    const { m, admin, bot } = await withBot();
    const v = await f.visitor(m);
    await assignAgent(deps, v);
    await setBotDisabled(deps, admin, { botId: bot.botId, disabled: true });
    expect(await conversationOf(v.visitorId)).toMatchObject({ state: 'queued', botId: null, bot: 2 });
    const history = await listMessages(deps, v);
    expect(history.messages.at(-1)?.meta).toMatchObject({ event: 'handoff', reason: 'disabled' });
  });
});

/** N racing bot sends and hand-offs on one conversation (half on a second instance when there is one). */
async function race(total: number, handoffs: number, instances: Deps[]) {
  const { m, bot } = await withBot();
  const v = await f.visitor(m);
  await assignAgent(deps, v);
  const every = Math.floor(total / handoffs);
  const calls = Array.from({ length: total }, (_, i) => {
    const on = instances[i % instances.length] as Deps;
    if (i % every === 0)
      return botHandoff(on, bot, { visitorId: v.visitorId }).then((r) => ({
        kind: 'handoff' as const,
        ok: r.handedOff,
      }));
    return sendMessage(on, bot, { visitorId: v.visitorId, clientMsgId: `race-${i}`, content: `n${i}` }).then(
      (r) => ({ kind: 'send' as const, ok: true, seq: r.message.seq }),
      (e: unknown) => {
        if (e instanceof DomainError && e.code === 'HANDED_OFF') return { kind: 'send' as const, ok: false };
        throw e;
      },
    );
  });
  const results = await Promise.all(calls);
  const c = await conversationOf(v.visitorId);
  const rows = await deps.db
    .select({ seq: messages.seq, senderType: messages.senderType, meta: messages.meta })
    .from(messages)
    .where(and(eq(messages.conversationId, c.id)))
    .orderBy(asc(messages.seq));
  const handoffRows = rows.filter((r) => r.meta?.event === 'handoff');
  const accepted = results.filter((r) => r.kind === 'send' && r.ok);
  const refused = results.filter((r) => r.kind === 'send' && !r.ok);
  // Exactly one transition: one call said so, one system message, one event.
  expect(results.filter((r) => r.kind === 'handoff' && r.ok)).toHaveLength(1);
  expect(handoffRows).toHaveLength(1);
  // Every accepted bot message is before the hand-off; none after it.
  const cut = handoffRows[0]?.seq ?? 0;
  const botSeqs = rows.filter((r) => r.senderType === 'bot').map((r) => r.seq);
  expect(botSeqs.length).toBe(accepted.length);
  expect(botSeqs.every((s) => s < cut)).toBe(true);
  expect(rows.filter((r) => r.seq > cut).every((r) => r.senderType !== 'bot')).toBe(true);
  // Seqs have no holes.
  expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i + 1));
  expect(accepted.length + refused.length).toBe(total - handoffs);
  expect(refused.length).toBeGreaterThan(0);
  return { accepted: accepted.length, refused: refused.length };
}

describe('Hand-off races (compare-and-set)', () => {
  it('100 racing sends and hand-offs: one transition, no bot message after it', async () => {
    await race(100, 10, [deps]);
  }, 60_000);

  itWhen(
    realServices.postgres,
    'REQUIRE_SERVICES',
    '1,000 racing sends and hand-offs on PostgreSQL, on two instances: one transition, no bot message after it',
    'DATABASE_URL is not set',
    async () => {
      const other = await secondInstance();
      try {
        const { accepted, refused } = await race(1000, 20, other ? [deps, other] : [deps]);
        expect(accepted + refused).toBe(980);
      } finally {
        await other?.close();
      }
    },
    180_000,
  );
});
