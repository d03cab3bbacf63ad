import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { conversations, merchants, webhookDeliveries, webhookEndpoints } from '../../src/db/schema.js';
import { prepareUpload, uploaderOf } from '../../src/resolvers/attachments/policy.js';
import { receiveUpload } from '../../src/resolvers/attachments/upload.js';
import { updateBusinessHours } from '../../src/resolvers/availability/calendars.js';
import {
  leaveContactDetails,
  listMessagesLeft,
  updateContactFields,
} from '../../src/resolvers/availability/messages-left.js';
import { claimConversation } from '../../src/resolvers/conversations/agent-actions.js';
import { closeIdleConversations } from '../../src/resolvers/conversations/closing.js';
import { drainQueue } from '../../src/resolvers/conversations/queue.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { globalChannel } from '../../src/resolvers/events.js';
import { listMessages } from '../../src/resolvers/messages/history.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import { createObjectStorage } from '../../src/stores/storage/index.js';
import { codeOf, eventually, type Factories, recordEvents, type TestDeps, useTestDeps } from '../support/deps.js';

/** When nobody can answer, nothing is refused: the conversation is kept as a message left (docs/availability.md). */

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const MIN = 60_000;
const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);

describe('messages left: nobody online', () => {
  it('the visitor writes, is told what happens, the merchant is notified, the first agent online answers, the visitor sees it', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    await updateContactFields(deps, admin, { fields: ['email', 'name'] });
    const visitor = await f.visitor(m);
    const rec = recordEvents(deps, [globalChannel(m.bid), visitor.channel]);
    await rec.ready;
    // The merchant's systems too: an endpoint subscribed to messages left gets a delivery.
    await deps.db.insert(webhookEndpoints).values({
      id: `whep_${m.merchantId}`,
      merchantId: m.merchantId,
      url: 'https://hooks.example.com/parley',
      events: ['conversation.message_left'],
      secret: 'whsec_test',
      createdAt: new Date(),
    });

    const assigned = await assignAgent(deps, visitor);
    expect(assigned.state).toBe('queued');
    await eventually(async () => {
      const rows = await deps.db
        .select({ event: webhookDeliveries.event, body: webhookDeliveries.body })
        .from(webhookDeliveries)
        .where(eq(webhookDeliveries.endpointId, `whep_${m.merchantId}`));
      return rows.length === 1 && rows[0]?.event === 'conversation.message_left' && rows[0].body;
    }, 'the webhook delivery of the message left').then((body) =>
      expect(JSON.parse(String(body))).toMatchObject({
        type: 'conversation.message_left',
        version: 1,
        data: { conversation_id: assigned.conversationId, visitor_id: visitor.visitorId, reason: 'no_agent' },
      }),
    );
    expect(assigned.messageLeft).toMatchObject({
      reason: 'no_agent',
      nextOpenAt: null,
      contactFields: ['email', 'name'],
    });
    expect(assigned.messageLeft?.notice).toContain('No agent is online right now');
    const notified = await rec.first('conversation.message_left', globalChannel(m.bid));
    expect(notified.data).toMatchObject({
      conversation_id: assigned.conversationId,
      visitor_id: visitor.visitorId,
      reason: 'no_agent',
      notice: assigned.messageLeft?.notice,
    });
    await rec.first('conversation.message_left', visitor.channel);

    // Nothing refused: messages and contact details are stored.
    const sent = await sendMessage(deps, visitor, { clientMsgId: 'l1', content: 'Is my order shipped?' });
    expect(sent.conversationState).toBe('queued');
    await sendMessage(deps, visitor, { clientMsgId: 'l2', content: 'Order 1234' });
    expect(await leaveContactDetails(deps, visitor, { email: 'lily@example.com', phone: '+33 1 23 45 67 89' })).toEqual(
      {
        email: 'lily@example.com',
      },
    );
    // The idle close never closes a message left.
    await deps.db.update(merchants).set({ idleCloseMinutes: 1 }).where(eq(merchants.id, m.merchantId));
    const real = deps.now;
    deps.now = () => Date.now() + 3600_000;
    try {
      await closeIdleConversations(deps);
    } finally {
      deps.now = real;
    }
    const [row] = await deps.db.select().from(conversations).where(eq(conversations.id, assigned.conversationId));
    expect(row?.state).toBe('queued');

    // Agents find it in the list (a second one left later comes after it).
    const agent = await f.agent(m);
    const other = await f.visitor(m);
    await assignAgent(deps, other);
    const page = await listMessagesLeft(deps, agent, { first: 1 });
    expect(page.nodes.map((n) => [n.conversationId, n.reason, n.contact, n.lastSeq])).toEqual([
      [assigned.conversationId, 'no_agent', { email: 'lily@example.com' }, 2],
    ]);
    expect(page.hasNextPage).toBe(true);
    const next = await listMessagesLeft(deps, agent, { first: 10, after: page.endCursor ?? undefined });
    expect(next.nodes.map((n) => n.visitorId)).toEqual([other.visitorId]);
    expect(await codeOf(listMessagesLeft(deps, agent, { after: 'nonsense' }))).toBe('BAD_USER_INPUT');

    // The first agent online takes the oldest (routing, FIFO), answers; the visitor sees the answer.
    const online = await f.online(agent);
    await drainQueue(deps, m.merchantId);
    const [taken] = await deps.db.select().from(conversations).where(eq(conversations.id, assigned.conversationId));
    expect([taken?.state, taken?.agentId]).toEqual(['active', agent.agentId]);
    // Taken, it is no longer a message left (a later re-queue would be an ordinary wait).
    expect([taken?.leftAt, taken?.leftReason]).toEqual([null, null]);
    await sendMessage(deps, agent, { visitorId: visitor.visitorId, clientMsgId: 'a1', content: 'Shipped today.' });
    const history = await listMessages(deps, visitor, {});
    expect(history.messages.filter((x) => x.senderType !== 'system').map((x) => [x.senderType, x.content])).toEqual([
      ['visitor', 'Is my order shipped?'],
      ['visitor', 'Order 1234'],
      ['agent', 'Shipped today.'],
    ]);
    await online.disconnect();
    rec.stop();
  });
});

describe('messages left: out of hours', () => {
  it('an online agent is not routed a conversation out of hours; it is a message left it may take', async () => {
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const agent = await f.agent(m);
    const online = await f.online(agent);
    // Open later today only (an hour from 3 hours from now).
    const opens = Math.ceil((Date.now() + 180 * MIN) / MIN) * MIN;
    await updateBusinessHours(deps, admin, {
      timezone: 'UTC',
      weekly: [1, 2, 3, 4, 5, 6, 7].map((day) => ({ day, start: hhmm(opens), end: hhmm(opens + 60 * MIN) })),
    });
    const visitor = await f.visitor(m);
    const assigned = await assignAgent(deps, visitor);
    expect(assigned.state).toBe('queued');
    expect(assigned.messageLeft).toMatchObject({ reason: 'closed', nextOpenAt: opens / 1000 });
    await sendMessage(deps, visitor, { clientMsgId: 'n1', content: 'Hello at night' });
    expect(await drainQueue(deps, m.merchantId)).toBe(0);
    expect((await listMessagesLeft(deps, agent)).nodes.map((n) => n.reason)).toEqual(['closed']);
    // The agent takes it from the list and answers.
    const claimed = await claimConversation(deps, agent, { visitorId: visitor.visitorId });
    expect(claimed.state).toBe('active');
    expect((await listMessagesLeft(deps, agent)).nodes).toEqual([]);
    // When the group opens, routing serves its queue again.
    const real = deps.now;
    deps.now = () => opens + 1000;
    try {
      const late = await f.visitor(m);
      const queued = await assignAgent(deps, late);
      expect([queued.state, queued.messageLeft]).toEqual(['active', null]);
    } finally {
      deps.now = real;
    }
    await online.disconnect();
  });
});

describe('messages left: attachments', () => {
  it("a visitor leaving a message attaches a file within the merchant's limits; the agent sees it in the list and the history", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-messages-left-'));
    const config = { ...deps.config, attachments: { ...deps.config.attachments, driver: 'local' as const, dir } };
    const storage = await createObjectStorage(config.attachments);
    const d = { ...deps, config, storage };
    try {
      const m = await f.merchant({ switches: { upload_file: 'on', upload_img: 'on' } });
      await deps.db.update(merchants).set({ fileMaxBytes: 3000 }).where(eq(merchants.id, m.merchantId));
      deps.configCache.invalidate(m.merchantId);
      const visitor = await f.visitor(m);
      const assigned = await assignAgent(d, visitor);
      expect([assigned.state, assigned.messageLeft?.reason]).toEqual(['queued', 'no_agent']);
      await sendMessage(d, visitor, { clientMsgId: 'q1', content: 'The invoice is attached' });

      const uploader = uploaderOf(visitor);
      // Over the merchant's limit: refused, as in any conversation.
      const big = await prepareUpload(d, uploader, { declaredKind: 'file' });
      expect(big.maxBytes).toBe(3000);
      expect(
        await codeOf(
          receiveUpload(d, storage, uploader, big, {
            stream: Readable.from([Buffer.alloc(4000, 0x61)]),
            name: 'big.txt',
          }),
        ),
      ).toBe('PAYLOAD_TOO_LARGE');
      // Within it: stored and sent while nobody can answer; the conversation stays a message left.
      const policy = await prepareUpload(d, uploader, { declaredKind: 'file' });
      const file = await receiveUpload(d, storage, uploader, policy, {
        stream: Readable.from([Buffer.from('invoice 1234\n')]),
        name: 'invoice.txt',
      });
      const sent = await sendMessage(d, visitor, { clientMsgId: 'q2', type: 'file', attachmentId: file.attachmentId });
      expect(sent.conversationState).toBe('queued');

      // The agent finds it in the messages left, its last message the attachment, and in the history.
      const agent = await f.agent(m);
      const left = (await listMessagesLeft(d, agent)).nodes.find((n) => n.conversationId === assigned.conversationId);
      expect(left?.lastSeq).toBe(2);
      expect(left?.items).toMatchObject([{ seq: 2, type: 'file', sender_type: 'visitor' }]);
      const history = await listMessages(d, agent, { visitorId: visitor.visitorId });
      const withFile = history.messages.filter((x) => x.attachment);
      expect(withFile.map((x) => [x.senderType, x.type, x.attachment?.attachmentId, x.attachment?.name])).toEqual([
        ['visitor', 'file', file.attachmentId, 'invoice.txt'],
      ]);
      expect(withFile[0]?.attachment?.size).toBe(13);
    } finally {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
