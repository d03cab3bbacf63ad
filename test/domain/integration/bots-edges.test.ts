import { randomBytes } from 'node:crypto';
import { and, asc, eq, like, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { apiKeys, auditLog, bots, conversations, webhookDeliveries, webhookEndpoints } from '../../../src/db/schema.js';
import type { Deps } from '../../../src/deps.js';
import { publishEvent } from '../../../src/resolvers/channels.js';
import { closeConversation } from '../../../src/resolvers/conversations/closing.js';
import { assignAgent } from '../../../src/resolvers/conversations/routing.js';
import { createAgentGroup } from '../../../src/resolvers/desk/groups.js';
import { globalChannel } from '../../../src/resolvers/events.js';
import { authenticateApiKey } from '../../../src/resolvers/integration/api-keys/authenticate.js';
import {
  createApiKey,
  hashApiKey,
  listApiKeys,
  MAX_API_KEYS,
} from '../../../src/resolvers/integration/api-keys/keys.js';
import {
  BOT_SCOPES,
  createBot,
  listBots,
  MAX_BOTS,
  setBotDisabled,
} from '../../../src/resolvers/integration/bots/bots.js';
import {
  botHandoff,
  handOffAllOf,
  handOffOverdueBots,
  requestHuman,
} from '../../../src/resolvers/integration/bots/handoff.js';
import { firstResponderBot } from '../../../src/resolvers/integration/bots/routing.js';
import { requireBot } from '../../../src/resolvers/integration/bots/viewer.js';
import { listMessages } from '../../../src/resolvers/messages/history.js';
import { sendMessage } from '../../../src/resolvers/messages/send.js';
import type { AgentViewer, VisitorViewer } from '../../../src/resolvers/viewer.js';
import {
  codeOf,
  type Factories,
  meanwhileBeforeNextTransaction,
  recordEvents,
  refusalOf,
  type TestDeps,
  type TestMerchant,
  useTestDeps,
} from '../../support/deps.js';

/**
 * Bots at their edges, by value: the views and audit rows whole, each refusal's code and
 * message, the first responder's order, the hand-off's row, message, events and webhook, and the
 * answer-deadline sweep at its exact millisecond and against what happens between its read and
 * its lock (`meanwhileBeforeNextTransaction`).
 */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => {
  ({ deps, f } = made);
});

/** The run's deps on a clock standing at `now`. */
const at = (now: number): Deps => ({ ...deps, now: () => now });

/**
 * The sweep reads every merchant's overdue rows, so each sweep test runs on a clock of its own
 * far in the past: rows other tests leave due (at today's time) are not due then.
 */
const era = (year: number) => Date.UTC(year, 0, 1);

const unique = () => randomBytes(4).toString('hex');

async function merchantWithAdmin() {
  const m = await f.merchant();
  const admin = await f.agent(m, { level: 'admin', nickname: 'Ada' });
  return { m, admin };
}

/** A bot of the admin's merchant and its viewer (as the API-key layer hands it over). */
async function botOf(admin: AgentViewer, opts: { name?: string; groupId?: string; on?: Deps } = {}) {
  const created = await createBot(opts.on ?? deps, admin, { name: opts.name ?? 'Robo', groupId: opts.groupId });
  const bot = await requireBot(deps, await authenticateApiKey(deps, created.key));
  return { ...created, viewer: bot };
}

async function withBot(name = 'Robo') {
  const { m, admin } = await merchantWithAdmin();
  return { m, admin, ...(await botOf(admin, { name })) };
}

/** A visitor whose new conversation the merchant's bot takes. */
async function botChat(m: TestMerchant) {
  const visitor = await f.visitor(m);
  const { conversationId } = await assignAgent(deps, visitor);
  return { visitor, conversationId };
}

const conversationRow = async (id: string) => {
  const [row] = await deps.db.select().from(conversations).where(eq(conversations.id, id));
  if (!row) throw new Error(`no conversation ${id}`);
  return row;
};

const setDue = (id: string, due: number | null) =>
  deps.db
    .update(conversations)
    .set({ botDueAt: due === null ? null : new Date(due) })
    .where(eq(conversations.id, id));

const handoffReasons = async (visitor: VisitorViewer) =>
  (await listMessages(deps, visitor)).messages.filter((x) => x.meta?.event === 'handoff').map((x) => x.meta?.reason);

/** The audit rows of a target, oldest first. */
const auditOf = (merchantId: string, targetId: string) =>
  deps.db
    .select({
      actorKind: auditLog.actorKind,
      actorId: auditLog.actorId,
      actorName: auditLog.actorName,
      action: auditLog.action,
      targetType: auditLog.targetType,
      targetId: auditLog.targetId,
      before: auditLog.before,
      after: auditLog.after,
      clientAddress: auditLog.clientAddress,
    })
    .from(auditLog)
    .where(and(eq(auditLog.merchantId, merchantId), eq(auditLog.targetId, targetId)))
    .orderBy(asc(auditLog.id));

/** The deps of a database whose transactions fail (not a domain refusal). */
function failingTransactions(base: Deps): Deps {
  const db = new Proxy(base.db, {
    get(target, prop) {
      if (prop === 'transaction') return async () => Promise.reject(new Error('database down'));
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { ...base, db };
}

/** `count` live keys of the merchant with the bot scopes, written in one statement; answers their ids. */
async function insertLiveKeys(merchantId: string, count: number) {
  const ids = Array.from({ length: count }, (_, i) => `key_${merchantId}_${i}`);
  await deps.db.insert(apiKeys).values(
    ids.map((id) => ({
      id,
      merchantId,
      name: id,
      scopes: BOT_SCOPES,
      hash: hashApiKey(id),
      displayPrefix: 'prly_xxxxxx',
    })),
  );
  return ids;
}

describe('Creating bots', () => {
  it('answers the whole view; its key is named after it with the bot scopes; both are audited with the admin’s address', async () => {
    const { m, admin } = await merchantWithAdmin();
    const group = await createAgentGroup(deps, admin, { name: `Sales ${unique()}` });
    const t = Date.now();
    const viewer = { ...admin, clientAddress: '198.51.100.8' };
    const { bot, key } = await createBot(at(t), viewer, { name: 'Robo', groupId: group.id });
    expect(bot).toEqual({
      id: expect.stringMatching(/^bot_[0-9a-f]+$/),
      name: 'Robo',
      groupId: group.id,
      apiKeyId: expect.stringMatching(/^key_/),
      disabled: false,
      createdAt: t,
    });
    expect(await listBots(deps, admin)).toEqual([bot]);
    const [apiKey] = await listApiKeys(deps, admin);
    expect(apiKey).toEqual({
      id: bot.apiKeyId,
      name: 'bot: Robo',
      scopes: ['conversations:read', 'messages:write'],
      displayPrefix: key.slice(0, 11),
      createdBy: admin.agentId,
      createdAt: t,
      lastUsedAt: null,
      expiresAt: null,
      revokedAt: null,
    });
    const actor = { actorKind: 'agent', actorId: admin.agentId, actorName: 'Ada', clientAddress: '198.51.100.8' };
    expect(await auditOf(m.merchantId, bot.id)).toEqual([
      {
        ...actor,
        action: 'bot.created',
        targetType: 'bot',
        targetId: bot.id,
        before: null,
        after: { name: 'Robo', group_id: group.id },
      },
    ]);
    expect(await auditOf(m.merchantId, bot.apiKeyId)).toEqual([
      expect.objectContaining({ ...actor, action: 'api_key.created', targetType: 'api_key' }),
    ]);
  });

  it(`a merchant holding ${MAX_BOTS} bots (disabled ones count) is refused one more: LIMIT_REACHED with its message`, async () => {
    const { m, admin } = await merchantWithAdmin();
    // Written in two statements: the limit counts rows, and twenty createBot calls cost seconds.
    const keyIds = await insertLiveKeys(m.merchantId, MAX_BOTS);
    await deps.db.insert(bots).values(
      keyIds.map((apiKeyId, i) => ({
        id: `bot_${apiKeyId}`,
        merchantId: m.merchantId,
        name: apiKeyId,
        apiKeyId,
        disabled: i === 0,
      })),
    );
    expect(await refusalOf(createBot(deps, admin, { name: 'one more' }))).toBe(
      `LIMIT_REACHED: A merchant has at most ${MAX_BOTS} bots`,
    );
    expect(await listBots(deps, admin)).toHaveLength(MAX_BOTS);
  });
});

describe('Disabling and enabling', () => {
  it('answers the view and audits each transition; another merchant’s bot is NOT_FOUND with its message', async () => {
    const { m, admin, bot } = await withBot();
    const stranger = await merchantWithAdmin();
    expect(await refusalOf(setBotDisabled(deps, stranger.admin, { botId: bot.id, disabled: true }))).toBe(
      'NOT_FOUND: No such bot',
    );
    const viewer = { ...admin, clientAddress: '203.0.113.8' };
    // Each asked twice: the second answers the bot as it is and audits nothing.
    for (const _ of [1, 2])
      expect(await setBotDisabled(deps, viewer, { botId: bot.id, disabled: true })).toEqual({ ...bot, disabled: true });
    for (const _ of [1, 2]) expect(await setBotDisabled(deps, viewer, { botId: bot.id, disabled: false })).toEqual(bot);
    const actor = { actorKind: 'agent', actorId: admin.agentId, actorName: 'Ada', clientAddress: '203.0.113.8' };
    const target = { targetType: 'bot', targetId: bot.id };
    expect((await auditOf(m.merchantId, bot.id)).slice(1)).toEqual([
      { ...actor, ...target, action: 'bot.disabled', before: { disabled: false }, after: { disabled: true } },
      { ...actor, ...target, action: 'bot.enabled', before: { disabled: true }, after: { disabled: false } },
    ]);
  });

  it('disabling a disabled bot hands off what it still holds (a hand-off an instance’s crash cut short)', async () => {
    const { m, admin, bot } = await withBot();
    const { visitor, conversationId } = await botChat(m);
    await deps.db.update(bots).set({ disabled: true }).where(eq(bots.id, bot.id));
    expect(await setBotDisabled(deps, admin, { botId: bot.id, disabled: true })).toEqual({ ...bot, disabled: true });
    expect(await conversationRow(conversationId)).toMatchObject({ state: 'queued', botId: null, bot: 2 });
    expect(await handoffReasons(visitor)).toEqual(['disabled']);
  });

  it('enabling (only disabling hands off) leaves the bot its conversations', async () => {
    const { m, admin, bot, viewer } = await withBot();
    const { visitor, conversationId } = await botChat(m);
    await setBotDisabled(deps, admin, { botId: bot.id, disabled: false });
    expect(await conversationRow(conversationId)).toMatchObject({ state: 'active', botId: viewer.botId, bot: 1 });
    expect(await handoffReasons(visitor)).toEqual([]);
  });
});

describe('The bot as a viewer', () => {
  it('is its id, merchant and name; a key of no bot, a disabled bot, a key without messages:write are refused by message', async () => {
    const { m, admin, bot, key } = await withBot('Robo');
    const identity = await authenticateApiKey(deps, key);
    expect(await requireBot(deps, identity)).toEqual({
      kind: 'bot',
      botId: bot.id,
      merchantId: m.merchantId,
      name: 'Robo',
    });
    expect(await refusalOf(requireBot(deps, { ...identity, scopes: ['conversations:read'] }))).toBe(
      'INSUFFICIENT_SCOPE: This API key lacks the scope messages:write',
    );
    const server = await createApiKey(deps, admin, { name: 'server', scopes: ['messages:write'] });
    expect(await refusalOf(requireBot(deps, await authenticateApiKey(deps, server.key)))).toBe(
      'FORBIDDEN: This API key belongs to no bot (createBot makes a bot and its key)',
    );
    await setBotDisabled(deps, admin, { botId: bot.id, disabled: true });
    expect(await refusalOf(requireBot(deps, identity))).toBe('FORBIDDEN: This bot is disabled');
  });
});

describe('The first responder', () => {
  it('the group’s own bot before a merchant-wide one, else the oldest enabled merchant-wide bot', async () => {
    const { m, admin } = await merchantWithAdmin();
    const sales = await createAgentGroup(deps, admin, { name: `Sales ${unique()}` });
    const t = Date.now();
    const older = await botOf(admin, { name: 'older', on: at(t) });
    const newer = await botOf(admin, { name: 'newer', on: at(t + 1) });
    const salesBot = await botOf(admin, { name: 'sales', groupId: sales.id, on: at(t + 2) });
    const first = async (groupId: string | null) => (await firstResponderBot(deps, m.merchantId, groupId))?.name;
    expect([await first(sales.id), await first(null)]).toEqual(['sales', 'older']);
    await setBotDisabled(deps, admin, { botId: older.bot.id, disabled: true });
    expect([await first(sales.id), await first(null)]).toEqual(['sales', 'newer']);
    await setBotDisabled(deps, admin, { botId: salesBot.bot.id, disabled: true });
    expect(await first(sales.id)).toBe('newer');
    await setBotDisabled(deps, admin, { botId: newer.bot.id, disabled: true });
    expect(await first(sales.id)).toBeUndefined();
    expect(await firstResponderBot(deps, (await f.merchant()).merchantId, null)).toBeUndefined();
  });

  it('announces itself with a system message naming it', async () => {
    const { m, viewer } = await withBot('Robo');
    const { visitor } = await botChat(m);
    const [joined] = (await listMessages(deps, visitor)).messages;
    expect(joined).toMatchObject({
      seq: 1,
      senderType: 'system',
      senderId: '',
      clientMsgId: null,
      type: 'system',
      content: 'Robo joined the conversation',
      meta: { event: 'bot_assigned', bot_id: viewer.botId, bot_name: 'Robo' },
    });
  });
});

describe('Hand-off', () => {
  it('by the bot: the row, the system message, the event on both channels and the webhook, by value', async () => {
    const { m, viewer } = await withBot('Robo');
    await deps.db.insert(webhookEndpoints).values({
      id: `whep_${unique()}`,
      merchantId: m.merchantId,
      url: 'https://hooks.example.com/parley',
      events: ['conversation.handed_off'],
      secret: 'whsec_test',
    });
    const { visitor, conversationId } = await botChat(m);
    await sendMessage(deps, visitor, { clientMsgId: `m-${unique()}`, content: 'a human, please' });
    const before = await conversationRow(conversationId);
    expect(before.botDueAt).not.toBeNull();
    const rec = recordEvents(deps, [globalChannel(m.bid), visitor.channel]);
    await rec.ready;
    const t = Date.now();
    expect(await botHandoff(at(t), viewer, { visitorId: visitor.visitorId })).toEqual({
      conversationId,
      handedOff: true,
      state: 'queued',
    });
    expect(await conversationRow(conversationId)).toMatchObject({
      state: 'queued',
      botId: null,
      handedOffBotId: viewer.botId,
      bot: 2,
      botDueAt: null,
      queuedAt: new Date(t),
      version: before.version + 1,
    });
    expect((await listMessages(deps, visitor)).messages.at(-1)).toMatchObject({
      senderType: 'system',
      senderId: '',
      clientMsgId: null,
      type: 'system',
      content: 'Robo handed the conversation over to an agent',
      meta: { event: 'handoff', bot_id: viewer.botId, bot_name: 'Robo', reason: 'bot' },
    });
    const data = {
      conversation_id: conversationId,
      visitor_id: visitor.visitorId,
      state: 'queued',
      bot_id: viewer.botId,
      group_id: before.groupId,
      reason: 'bot',
    };
    expect((await rec.first('conversation.handed_off', globalChannel(m.bid))).data).toEqual(data);
    expect((await rec.first('conversation.handed_off', visitor.channel)).data).toEqual(data);
    rec.stop();
    const deliveries = await deps.db
      .select()
      .from(webhookDeliveries)
      .where(eq(webhookDeliveries.merchantId, m.merchantId));
    expect(deliveries.map((d) => [d.event, d.orderKey, JSON.parse(d.body).data])).toEqual([
      ['conversation.handed_off', conversationId, data],
    ]);
  });

  it('refusals by message: no open conversation, a conversation another bot holds', async () => {
    const { m, admin, viewer } = await withBot('First');
    const second = await botOf(admin, { name: 'Second' });
    const idle = await f.visitor(m);
    expect(await refusalOf(botHandoff(deps, viewer, { visitorId: idle.visitorId }))).toBe(
      'CONVERSATION_CLOSED: This visitor has no open conversation',
    );
    expect(await refusalOf(requestHuman(deps, idle))).toBe(
      'CONVERSATION_CLOSED: This visitor has no open conversation',
    );
    const { visitor, conversationId } = await botChat(m); // the oldest bot takes it
    expect(await refusalOf(botHandoff(deps, second.viewer, { visitorId: visitor.visitorId }))).toBe(
      'HANDED_OFF: This conversation is not held by this bot',
    );
    expect(await conversationRow(conversationId)).toMatchObject({ state: 'active', botId: viewer.botId });
    const stranger = await f.visitor(await f.merchant());
    expect(await codeOf(botHandoff(deps, viewer, { visitorId: stranger.visitorId }))).toBe('NOT_FOUND');
  });

  it('a repeated hand-off is idempotent for the bot that held the conversation only: another bot of the merchant is HANDED_OFF', async () => {
    const { m, admin, viewer } = await withBot('First');
    const second = await botOf(admin, { name: 'Second' });
    const { visitor, conversationId } = await botChat(m); // the oldest bot takes it
    expect(await botHandoff(deps, viewer, { visitorId: visitor.visitorId })).toEqual({
      conversationId,
      handedOff: true,
      state: 'queued',
    });
    const after = await conversationRow(conversationId);
    expect(after).toMatchObject({ state: 'queued', botId: null, handedOffBotId: viewer.botId, bot: 2 });
    expect(await botHandoff(deps, viewer, { visitorId: visitor.visitorId })).toEqual({
      conversationId,
      handedOff: false,
      state: 'queued',
    });
    // The same words as for a conversation the other bot never held, and nothing written.
    expect(await refusalOf(botHandoff(deps, second.viewer, { visitorId: visitor.visitorId }))).toBe(
      'HANDED_OFF: This conversation is not held by this bot',
    );
    expect(await conversationRow(conversationId)).toEqual(after);
    expect(await handoffReasons(visitor)).toEqual(['bot']);
  });

  it('after the visitor’s or the admin’s hand-off the bot that held it is answered false, another bot HANDED_OFF', async () => {
    const { m, admin, bot, viewer } = await withBot('First');
    const second = await botOf(admin, { name: 'Second' });
    const asked = await botChat(m);
    expect(await requestHuman(deps, asked.visitor)).toMatchObject({ handedOff: true });
    const disabled = await botChat(m);
    await setBotDisabled(deps, admin, { botId: bot.id, disabled: true });
    for (const { visitor, conversationId } of [asked, disabled]) {
      expect(await conversationRow(conversationId)).toMatchObject({
        botId: null,
        handedOffBotId: viewer.botId,
        bot: 2,
      });
      expect(await botHandoff(deps, viewer, { visitorId: visitor.visitorId })).toEqual({
        conversationId,
        handedOff: false,
        state: 'queued',
      });
      expect(await refusalOf(botHandoff(deps, second.viewer, { visitorId: visitor.visitorId }))).toBe(
        'HANDED_OFF: This conversation is not held by this bot',
      );
    }
    expect(await handoffReasons(asked.visitor)).toEqual(['visitor']);
    expect(await handoffReasons(disabled.visitor)).toEqual(['disabled']);
  });

  it('a conversation naming a bot but not active is left as it is', async () => {
    const { m, viewer } = await withBot();
    const { visitor, conversationId } = await botChat(m);
    await deps.db.update(conversations).set({ state: 'queued' }).where(eq(conversations.id, conversationId));
    expect(await requestHuman(deps, visitor)).toEqual({ conversationId, handedOff: false, state: 'queued' });
    expect(await conversationRow(conversationId)).toMatchObject({ state: 'queued', botId: viewer.botId, bot: 1 });
    expect(await handoffReasons(visitor)).toEqual([]);
  });

  it('asking for a human without a bot publishes nothing (no new `conversation.queued`)', async () => {
    const m = await f.merchant();
    const visitor = await f.visitor(m);
    const { conversationId } = await assignAgent(deps, visitor); // no agent online: queued
    const rec = recordEvents(deps, [globalChannel(m.bid)]);
    await rec.ready;
    expect(await requestHuman(deps, visitor)).toEqual({ conversationId, handedOff: false, state: 'queued' });
    // A marker published after the call: once it arrives, whatever the call published has too.
    await publishEvent(deps, { channel: globalChannel(m.bid), event: 'test.marker', data: 1 });
    await rec.first('test.marker', globalChannel(m.bid));
    expect(rec.events.map((e) => e.event)).toEqual(['test.marker']);
    rec.stop();
  });
});

describe('The answer-deadline sweep', () => {
  it('hands off a conversation due at the sweep’s very millisecond, and not one due a millisecond later', async () => {
    const t = era(2005);
    const { m, viewer } = await withBot('Robo');
    const due = await botChat(m);
    const later = await botChat(m);
    await setDue(due.conversationId, t);
    await setDue(later.conversationId, t + 1);
    try {
      expect(await handOffOverdueBots(at(t))).toBe(1);
      expect(await conversationRow(due.conversationId)).toMatchObject({
        state: 'queued',
        botId: null,
        handedOffBotId: viewer.botId,
        bot: 2,
        botDueAt: null,
        queuedAt: new Date(t),
      });
      expect(await handoffReasons(due.visitor)).toEqual(['timeout']);
      expect(await conversationRow(later.conversationId)).toMatchObject({ state: 'active', botDueAt: new Date(t + 1) });
    } finally {
      await setDue(later.conversationId, null);
    }
  });

  it('re-checks under the lock: an answer or a later deadline committed after its read wins', async () => {
    const t = era(2004);
    const { m, viewer } = await withBot();
    const answered = await botChat(m);
    const postponed = await botChat(m);
    for (const [chat, meanwhile] of [
      [answered, null],
      [postponed, t + 60_000],
    ] as const) {
      await setDue(chat.conversationId, t - 1000);
      const racing = meanwhileBeforeNextTransaction(at(t), () => setDue(chat.conversationId, meanwhile));
      expect(await handOffOverdueBots(racing)).toBe(0);
      expect(await conversationRow(chat.conversationId)).toMatchObject({
        state: 'active',
        botId: viewer.botId,
        botDueAt: meanwhile === null ? null : new Date(meanwhile),
      });
      expect(await handoffReasons(chat.visitor)).toEqual([]);
    }
    await setDue(postponed.conversationId, null);
  });

  it('a conversation closed meanwhile is skipped and the others are still handed off', async () => {
    const t = era(2003);
    const { m } = await withBot();
    const closing = await botChat(m);
    const waiting = await botChat(m);
    await setDue(closing.conversationId, t - 1000);
    await setDue(waiting.conversationId, t - 1000);
    const racing = meanwhileBeforeNextTransaction(at(t), () => closeConversation(deps, closing.visitor));
    try {
      expect(await handOffOverdueBots(racing)).toBe(1);
      expect(await conversationRow(waiting.conversationId)).toMatchObject({ state: 'queued', bot: 2 });
      expect(await handoffReasons(waiting.visitor)).toEqual(['timeout']);
      expect((await conversationRow(closing.conversationId)).state).toBe('closed');
    } finally {
      await setDue(closing.conversationId, null);
    }
  });

  it('reads no closed conversation: a batch of closed rows still due does not hide an open one', async () => {
    // Rows closed before closing cleared the deadline keep one; read, they would fill every batch.
    const t = era(2001);
    const { m } = await withBot();
    const closed = await botChat(m);
    await closeConversation(deps, closed.visitor);
    await setDue(closed.conversationId, t - 2000);
    const stale = `stale-${unique()}-`;
    await deps.db.execute(sql`
      INSERT INTO conversations (id, merchant_id, visitor_id, state, timestamp, bot, bot_id, bot_due_at, closed_at)
      SELECT ${stale} || g, merchant_id, visitor_id, state, timestamp, bot, bot_id, bot_due_at, closed_at
      FROM conversations, generate_series(1, 200) AS g WHERE id = ${closed.conversationId}`);
    const open = await botChat(m);
    await setDue(open.conversationId, t - 1000);
    try {
      expect(await handOffOverdueBots(at(t))).toBe(1);
      expect(await conversationRow(open.conversationId)).toMatchObject({ state: 'queued', bot: 2, botDueAt: null });
    } finally {
      await deps.db.delete(conversations).where(like(conversations.id, `${stale}%`));
      await setDue(closed.conversationId, null);
    }
  });

  it('a failure that is not a refusal ends the sweep with it', async () => {
    const t = era(2002);
    const { m } = await withBot();
    const chat = await botChat(m);
    await setDue(chat.conversationId, t - 1000);
    try {
      await expect(handOffOverdueBots(failingTransactions(at(t)))).rejects.toThrow('database down');
    } finally {
      await setDue(chat.conversationId, null);
    }
  });
});

describe('Handing off all of a disabled bot’s conversations', () => {
  it('counts the conversations it handed off: a visitor’s closed one is skipped, each open one once', async () => {
    const { m, viewer } = await withBot();
    // A visitor who closed a conversation with the bot and opened another one, which the bot holds too.
    const returning = await botChat(m);
    await closeConversation(deps, returning.visitor);
    const { conversationId: reopened } = await assignAgent(deps, returning.visitor);
    const other = await botChat(m);
    // A visitor whose only conversation with the bot is closed.
    const gone = await botChat(m);
    await closeConversation(deps, gone.visitor);
    expect(await handOffAllOf(deps, viewer.botId)).toBe(2);
    for (const id of [reopened, other.conversationId])
      expect(await conversationRow(id)).toMatchObject({ state: 'queued', botId: null, bot: 2 });
    expect(await handoffReasons(returning.visitor)).toEqual(['disabled']);
    expect(await handoffReasons(other.visitor)).toEqual(['disabled']);
  });

  it('a failure that is not a refusal ends it with it', async () => {
    const { m, viewer } = await withBot();
    await botChat(m);
    await expect(handOffAllOf(failingTransactions(deps), viewer.botId)).rejects.toThrow('database down');
  });
});

describe('a bot and what it leaves behind', () => {
  it('createBot is refused past the 50 live keys a merchant may hold: its key is one of them', async () => {
    const { m, admin } = await merchantWithAdmin();
    await insertLiveKeys(m.merchantId, MAX_API_KEYS);
    await expect(createBot(deps, admin, { name: 'Robo' })).rejects.toMatchObject({
      code: 'LIMIT_REACHED',
      message: `A merchant has at most ${MAX_API_KEYS} API keys: revoke one first`,
    });
    expect(await listBots(deps, admin)).toEqual([]);
  });

  it('a conversation the visitor closes while the bot owes an answer drops its deadline', async () => {
    // Else the sweep, which reads due rows 200 a round, would read the closed row every round.
    const { m } = await withBot();
    const chat = await botChat(m);
    await sendMessage(deps, chat.visitor, { clientMsgId: `m-${unique()}`, content: 'anyone?' });
    expect((await conversationRow(chat.conversationId)).botDueAt).not.toBeNull();
    await closeConversation(deps, chat.visitor);
    expect(await conversationRow(chat.conversationId)).toMatchObject({ state: 'closed', botDueAt: null });
  });
});
