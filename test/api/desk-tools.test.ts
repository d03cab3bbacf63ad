import { asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditLog } from '../../src/db/schema.js';
import { webhookEventNames } from '../../src/resolvers/event-catalog.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { webhookReceiver } from '../support/webhook-receiver.js';
import { closeAllSockets, connectSocket, eventually } from '../support/ws.js';

/**
 * The desk tools over a real server (docs/desk.md "Desk tools"): canned responses, labels and
 * internal notes through REST and GraphQL. Above all: a note never reaches the visitor — not
 * its channel, not its history (REST and GraphQL), not its unread count — and the visitor's
 * seq-gap handling sees no hole. The rules themselves are tested in test/domain/desk-*.test.ts.
 */

let t: TestApp;
beforeAll(async () => {
  // Webhooks to a receiver on 127.0.0.1 (the notes test of webhooks and bots).
  t = await startTestApp({ env: { WEBHOOK_ALLOW_PRIVATE: 'on' } });
});
afterAll(async () => {
  await closeAllSockets();
  await t.stop();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** A new visitor of the demo merchant, subscribed to its own channel. */
async function subscribedVisitor() {
  const { token, uid } = await visitorToken(t.url);
  const client = new HttpClient(t.url);
  const headers = bearer(token);
  const boot = await client.json('/visitor/data/get', { headers });
  const channel = boot.body.data.visitor.channel as string;
  const socket = connectSocket(t.wsUrl, { authorization: `Bearer ${token}`, appkey: 'demo-appkey' });
  await socket.acked;
  const feed = socket.channel(channel);
  await eventually(() => feed.cursor, 'visitor subscription');
  return { token, uid, client, headers, channel, socket, feed };
}

/** alice online (her socket subscribed to her channel) and a visitor chatting with her. */
async function chatWithAlice() {
  const alice = await agentSession(t.url, 'alice');
  const aliceSocket = connectSocket(t.wsUrl, { token: alice.token, appkey: 'demo-appkey' });
  await aliceSocket.acked;
  const aliceFeed = aliceSocket.channel('agent-a_alice');
  await eventually(() => aliceFeed.cursor, 'alice subscription');
  const v = await subscribedVisitor();
  const assigned = await v.client.json('/visitor/chat/assign', { method: 'POST', json: {}, headers: v.headers });
  if (assigned.body.data.state !== 'active') {
    const claimed = await alice.client.json('/agent/chat/claim', { method: 'POST', json: { visitor_id: v.uid } });
    expect(claimed.body.code).toBe(0);
  }
  const sent = await v.client.json('/visitor/message/send', {
    method: 'POST',
    json: { client_msg_id: 'v-1', content: 'Where is my parcel?' },
    headers: v.headers,
  });
  expect(sent.body.code).toBe(0);
  const reply = await alice.client.json('/agent/message/send', {
    method: 'POST',
    json: { visitor_id: v.uid, client_msg_id: 'a-1', content: 'Let me check.' },
  });
  expect(reply.body.code).toBe(0);
  await v.feed.until((es) =>
    es.some((e) => e.event === 'message.created' && e.data.message.seq === reply.body.data.seq),
  );
  return { alice, aliceFeed, v, lastSeq: reply.body.data.seq as number };
}

const SECRET_REST = 'REST note: refund approved, do not tell yet';
const SECRET_GQL = 'GraphQL note: VIP customer';

describe('internal notes never reach the visitor', () => {
  it('channel, REST and GraphQL history, unread count and seq continuity are as if no note was written', async () => {
    const { alice, aliceFeed, v, lastSeq } = await chatWithAlice();
    const historyBefore = await v.client.json('/visitor/message/list?limit=100', { headers: v.headers });
    const conversationBefore = await v.client.json('/visitor/chat/get', { headers: v.headers });

    const rest = await alice.client.json('/agent/note/add', {
      method: 'POST',
      form: { visitor_id: v.uid, content: SECRET_REST },
    });
    expect(rest.body).toMatchObject({
      code: 0,
      data: { visitor_id: v.uid, agent_id: 'a_alice', after_seq: lastSeq, content: SECRET_REST },
    });
    const gql = await alice.client.graphql(
      'mutation($v: ID!, $c: String!) { addNote(visitorId: $v, content: $c) { id afterSeq content agentId } }',
      { v: v.uid, c: SECRET_GQL },
      { token: alice.token },
    );
    expect(gql.body.errors).toBeUndefined();
    expect(gql.body.data.addNote).toMatchObject({ afterSeq: lastSeq, content: SECRET_GQL, agentId: 'a_alice' });

    // The agents see both notes: live on alice's channel, and listed in history order.
    await aliceFeed.until((es) => es.filter((e) => e.event === 'note.created').length >= 2, 'two note.created');
    const listed = await alice.client.json(`/agent/note/list?visitor_id=${v.uid}`);
    expect(listed.body.data.list.map((n: { content: string }) => n.content)).toEqual([SECRET_REST, SECRET_GQL]);
    const listedGql = await alice.client.graphql(
      'query($v: ID!) { notes(visitorId: $v) { id content afterSeq } }',
      { v: v.uid },
      { token: alice.token },
    );
    expect(listedGql.body.data.notes).toEqual(
      listed.body.data.list.map((n: { id: string; content: string; after_seq: number }) => ({
        id: n.id,
        content: n.content,
        afterSeq: n.after_seq,
      })),
    );

    // A message after the notes: the visitor receives it with the next seq, no hole to fill.
    const next = await alice.client.json('/agent/message/send', {
      method: 'POST',
      json: { visitor_id: v.uid, client_msg_id: 'a-2', content: 'It ships today.' },
    });
    expect(next.body.data.seq).toBe(lastSeq + 1);
    await v.feed.until((es) => es.some((e) => e.event === 'message.created' && e.data.message.seq === lastSeq + 1));

    // The visitor's channel: no note event, no note text, message seqs contiguous.
    const seen = JSON.stringify(v.feed.events);
    expect(v.feed.names()).not.toContain('note.created');
    expect(seen).not.toContain(SECRET_REST);
    expect(seen).not.toContain(SECRET_GQL);
    const seqs = v.feed.events.filter((e) => e.event === 'message.created').map((e) => e.data.message.seq);
    expect(seqs).toEqual(seqs.map((_: number, i: number) => (seqs[0] ?? 0) + i));

    // Resuming from the start of the subscription replays the same: nothing of the notes.
    const resumed = v.socket.channel(v.channel, v.feed.cursor);
    await resumed.until((es) => es.some((e) => e.event === 'message.created' && e.data.message.seq === lastSeq + 1));
    expect(resumed.names()).not.toContain('note.created');
    expect(JSON.stringify(resumed.events)).not.toContain('note');

    // REST history: the messages before, plus the one after; GraphQL history the same.
    const history = await v.client.json('/visitor/message/list?limit=100', { headers: v.headers });
    expect(history.body.data.messages).toEqual([...historyBefore.body.data.messages, next.body.data].map(strip));
    const gqlHistory = await v.client.graphql(
      '{ messages(first: 100) { messages { id seq content } } }',
      {},
      v.headers,
    );
    expect(gqlHistory.body.data.messages.messages).toEqual(
      history.body.data.messages.map((m: { id: string; seq: number; content: string }) => ({
        id: m.id,
        seq: m.seq,
        content: m.content,
      })),
    );
    expect(JSON.stringify(gqlHistory.body)).not.toContain('note');
    // Filling a "hole" after the last seq finds nothing; the unread count counts messages only.
    const after = await v.client.json(`/visitor/message/list?after=${lastSeq + 1}`, { headers: v.headers });
    expect(after.body.data.messages).toEqual([]);
    const conversation = await v.client.json('/visitor/chat/get', { headers: v.headers });
    expect(conversation.body.data.unread_count).toBe(conversationBefore.body.data.unread_count + 1);
    expect(conversation.body.data.last_seq).toBe(lastSeq + 1);

    // A visitor cannot read notes at all.
    const asVisitor = await v.client.graphql('query($v: ID!) { notes(visitorId: $v) { id } }', { v: v.uid }, v.headers);
    expect(asVisitor.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });
});

type Node = { visitorId: string; labels: { name: string }[] };

/** A send answer without its send-only fields: the shape of a history row. */
const strip = ({ conversation_state: _s, duplicate: _d, ...m }: Record<string, unknown>) => m;

describe('canned responses and labels through REST and GraphQL', () => {
  it('an agent keeps its own canned responses and searches them; the merchant’s are for administrators', async () => {
    const alice = await agentSession(t.url, 'alice');
    const shortcut = `thx${Date.now().toString(36)}`;
    const created = await alice.client.json('/agent/canned/create', {
      method: 'POST',
      form: { shortcut, content: 'Thank you for your patience!' },
    });
    expect(created.body).toMatchObject({
      code: 0,
      data: { scope: 'personal', agent_id: 'a_alice', shortcut, content: 'Thank you for your patience!' },
    });
    const found = await alice.client.json(`/agent/canned/list?search=${encodeURIComponent(`/${shortcut}`)}`);
    expect(found.body.data.list).toEqual([created.body.data]);
    const viaGql = await alice.client.graphql(
      'query($s: String) { cannedResponses(search: $s) { id scope shortcut content } }',
      { s: shortcut },
      { token: alice.token },
    );
    expect(viaGql.body.data.cannedResponses).toEqual([
      { id: created.body.data.id, scope: 'personal', shortcut, content: 'Thank you for your patience!' },
    ]);
    const refused = await alice.client.json('/agent/canned/create', {
      method: 'POST',
      json: { shortcut: 'shop', content: 'x', scope: 'merchant' },
    });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe(1403);
    const refusedGql = await alice.client.graphql(
      'mutation { createCannedResponse(input: {shortcut: "shop", content: "x", scope: merchant}) { id } }',
      {},
      { token: alice.token },
    );
    expect(refusedGql.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const deleted = await alice.client.json('/agent/canned/delete', {
      method: 'POST',
      json: { id: created.body.data.id },
    });
    expect(deleted.body.data).toEqual(created.body.data);
    expect((await alice.client.json(`/agent/canned/list?search=${shortcut}`)).body.data.list).toEqual([]);
    const anonymous = await new HttpClient(t.url).json('/agent/canned/list');
    expect(anonymous.body.code).toBe(-1);
  });

  it('labels: create, put on a conversation, filter the list by it (REST and GraphQL)', async () => {
    const { alice, v } = await chatWithAlice();
    const name = `vip-${Date.now().toString(36)}`;
    const label = await alice.client.json('/agent/label/create', { method: 'POST', form: { name, color: '#2563eb' } });
    expect(label.body).toMatchObject({ code: 0, data: { name, color: '#2563eb' } });
    const added = await alice.client.json('/agent/label/add', {
      method: 'POST',
      form: { visitor_id: v.uid, label_id: label.body.data.id },
    });
    expect(added.body.data).toMatchObject({ visitor_id: v.uid, labels: [label.body.data] });
    expect((await alice.client.json(`/agent/label/get?visitor_id=${v.uid}`)).body.data).toEqual(added.body.data);

    const filtered = await alice.client.json(`/agent/chat/list?scope=mine&label_id=${label.body.data.id}`);
    expect(filtered.body.data.list.map((c: { visitor_id: string }) => c.visitor_id)).toEqual([v.uid]);
    const gql = await alice.client.graphql(
      'query($l: String) { conversations(scope: mine, labelId: $l) { nodes { visitorId labels { id name color } } } }',
      { l: label.body.data.id },
      { token: alice.token },
    );
    expect(gql.body.data.conversations.nodes).toEqual([
      { visitorId: v.uid, labels: [{ id: label.body.data.id, name, color: '#2563eb' }] },
    ]);

    const removed = await alice.client.graphql(
      'mutation($v: ID!, $l: ID!) { unlabelConversation(visitorId: $v, labelId: $l) { visitorId labels { id } } }',
      { v: v.uid, l: label.body.data.id },
      { token: alice.token },
    );
    expect(removed.body.data.unlabelConversation).toEqual({ visitorId: v.uid, labels: [] });
    const none = await alice.client.json(`/agent/chat/list?scope=mine&label_id=${label.body.data.id}`);
    expect(none.body.data.list).toEqual([]);
    // Deleting a label is for administrators.
    const refused = await alice.client.json('/agent/label/delete', {
      method: 'POST',
      json: { id: label.body.data.id },
    });
    expect(refused.body.code).toBe(1403);
  });

  it('a page of conversations loads the labels of all its conversations in one query, each its own', async () => {
    const first = await chatWithAlice();
    const second = await chatWithAlice();
    const alice = first.alice;
    const make = async (name: string) =>
      (await alice.client.json('/agent/label/create', { method: 'POST', json: { name } })).body.data;
    const a = await make(`a-${Date.now().toString(36)}`);
    const b = await make(`b-${Date.now().toString(36)}`);
    await alice.client.json('/agent/label/add', { method: 'POST', json: { visitor_id: first.v.uid, label_id: a.id } });
    await alice.client.json('/agent/label/add', { method: 'POST', json: { visitor_id: second.v.uid, label_id: a.id } });
    await alice.client.json('/agent/label/add', { method: 'POST', json: { visitor_id: second.v.uid, label_id: b.id } });
    const statements: string[] = [];
    const stop = t.app.deps.database.onQuery((sql) => statements.push(sql));
    let page: Awaited<ReturnType<typeof alice.client.graphql<{ conversations: { nodes: Node[] } }>>>;
    try {
      page = await alice.client.graphql<{ conversations: { nodes: Node[] } }>(
        'query($l: String) { conversations(scope: mine, first: 100, labelId: $l) { nodes { visitorId labels { name } } } }',
        { l: a.id },
        { token: alice.token },
      );
    } finally {
      stop();
    }
    expect(page.body.errors).toBeUndefined();
    const byVisitor = Object.fromEntries(
      (page.body.data?.conversations.nodes ?? []).map((n) => [n.visitorId, n.labels.map((l) => l.name)]),
    );
    expect(byVisitor).toEqual({ [first.v.uid]: [a.name], [second.v.uid]: [a.name, b.name] });
    expect(statements.filter((q) => q.includes('"conversation_labels"') && !q.includes('exists'))).toHaveLength(1);
  });

  it('the demo admin ada manages the merchant’s responses over REST; alice inserts them; each change is audited', async () => {
    const ada = await agentSession(t.url, 'ada');
    const alice = await agentSession(t.url, 'alice');
    const shortcut = `hours${Date.now().toString(36)}`;
    const created = await ada.client.json('/agent/canned/create', {
      method: 'POST',
      json: { shortcut, content: 'We answer 9:00–18:00.', scope: 'merchant' },
    });
    expect(created.body).toMatchObject({ code: 0, data: { scope: 'merchant', agent_id: null, shortcut } });
    const seen = await alice.client.json(`/agent/canned/list?search=${shortcut}`);
    expect(seen.body.data.list).toEqual([created.body.data]);
    const updated = await ada.client.json('/agent/canned/update', {
      method: 'POST',
      form: { id: created.body.data.id, content: 'We answer 8:00–20:00.' },
    });
    expect(updated.body.data).toMatchObject({ id: created.body.data.id, content: 'We answer 8:00–20:00.' });
    const byAlice = await alice.client.json('/agent/canned/delete', {
      method: 'POST',
      json: { id: created.body.data.id },
    });
    expect(byAlice.body.code).toBe(1403);
    await ada.client.json('/agent/canned/delete', { method: 'POST', json: { id: created.body.data.id } });
    const audit = await t.app.deps.db
      .select()
      .from(auditLog)
      .where(eq(auditLog.targetId, created.body.data.id))
      .orderBy(asc(auditLog.id));
    expect(audit.map((r) => [r.action, r.actorId, r.before, r.after])).toEqual([
      ['canned_response.created', 'a_ada', null, { shortcut, content: 'We answer 9:00–18:00.' }],
      [
        'canned_response.updated',
        'a_ada',
        { shortcut, content: 'We answer 9:00–18:00.' },
        { shortcut, content: 'We answer 8:00–20:00.' },
      ],
      ['canned_response.deleted', 'a_ada', { shortcut, content: 'We answer 8:00–20:00.' }, null],
    ]);
    expect(audit.every((r) => typeof r.clientAddress === 'string' && r.clientAddress.length > 0)).toBe(true);
  });
});

describe('internal notes never reach a visitor-facing webhook, an API key or a bot', () => {
  it('a bot holding the conversation, its key and a webhook of every event type see the messages, never the notes', async () => {
    const receiver = await webhookReceiver();
    try {
      const ada = await agentSession(t.url, 'ada');
      const endpoint = await ada.client.graphql(
        'mutation($url: String!, $events: [String!]!) { createWebhookEndpoint(url: $url, events: $events) { secret } }',
        { url: receiver.url, events: webhookEventNames.filter((n) => n !== 'webhook.test') },
      );
      expect(endpoint.body.errors).toBeUndefined();
      receiver.useSecrets([endpoint.body.data.createWebhookEndpoint.secret]);
      const created = await ada.client.graphql('mutation { createBot(name: "Helper") { bot { id } key } }');
      const { bot, key } = created.body.data.createBot as { bot: { id: string }; key: string };
      const asKey = bearer(key);
      try {
        // A new visitor's conversation goes to the bot; the visitor writes, an agent and an admin note it.
        const v = await subscribedVisitor();
        const assigned = await v.client.json('/visitor/chat/assign', { method: 'POST', json: {}, headers: v.headers });
        expect(assigned.body.data).toMatchObject({ state: 'active', agent: null });
        const send = (id: string, content: string) =>
          v.client.json('/visitor/message/send', {
            method: 'POST',
            json: { client_msg_id: id, content },
            headers: v.headers,
          });
        expect((await send('vb-1', 'Hello bot')).body.code).toBe(0);
        const alice = await agentSession(t.url, 'alice');
        const note = await alice.client.json('/agent/note/add', {
          method: 'POST',
          json: { visitor_id: v.uid, content: SECRET_REST },
        });
        expect(note.body.code).toBe(0);
        const gqlNote = await ada.client.graphql(
          'mutation($v: ID!, $c: String!) { addNote(visitorId: $v, content: $c) { id } }',
          { v: v.uid, c: SECRET_GQL },
          { token: ada.token },
        );
        expect(gqlNote.body.errors).toBeUndefined();
        expect((await send('vb-2', 'After the notes')).body.code).toBe(0);

        // Webhook deliveries of one conversation go out in order: the message after the notes
        // arriving means anything before it did too.
        await eventually(
          () =>
            receiver.received.some(
              (r) => r.payload.type === 'message.created' && r.payload.data.message.content === 'After the notes',
            ),
          'the message after the notes, by webhook',
        );
        const delivered = JSON.stringify(receiver.received.map((r) => r.payload));
        expect(receiver.received.every((r) => r.verified)).toBe(true);
        expect(receiver.received.map((r) => r.payload.type).filter((type) => type.startsWith('note'))).toEqual([]);
        expect(delivered).toContain('Hello bot');
        expect(delivered).not.toContain(SECRET_REST);
        expect(delivered).not.toContain(SECRET_GQL);

        // The bot's key reads the conversation and its history (REST and GraphQL): messages only.
        const http = new HttpClient(t.url);
        const history = await http.json(`/api/message/list?visitor_id=${v.uid}&limit=100`, { headers: asKey });
        expect(history.body.code).toBe(0);
        expect(JSON.stringify(history.body)).toContain('After the notes');
        const conversation = await http.json(`/api/conversation/get?visitor_id=${v.uid}`, { headers: asKey });
        expect(conversation.body.code).toBe(0);
        const gql = await http.graphql(
          'query($v: String!) { messages(visitorId: $v, first: 100) { messages { content } } conversation(visitorId: $v) { lastSeq } }',
          { v: v.uid },
          asKey,
        );
        expect(gql.body.errors).toBeUndefined();
        for (const answer of [history.body, conversation.body, gql.body]) {
          expect(JSON.stringify(answer)).not.toContain(SECRET_REST);
          expect(JSON.stringify(answer)).not.toContain(SECRET_GQL);
        }
        // Nor can the key ask for the notes.
        const notes = await http.graphql('query($v: ID!) { notes(visitorId: $v) { id } }', { v: v.uid }, asKey);
        expect(notes.body.data).toBeNull();
        expect(notes.body.errors?.[0]?.extensions?.code).toMatch(/FORBIDDEN|UNAUTHENTICATED/);
        const restNotes = await http.json(`/agent/note/list?visitor_id=${v.uid}`, { headers: asKey });
        expect(restNotes.body.code).not.toBe(0);
        expect(JSON.stringify(restNotes.body)).not.toContain(SECRET_REST);
      } finally {
        await ada.client.json('/agent/bot/disable', { method: 'POST', form: { bot_id: bot.id } });
      }
    } finally {
      await receiver.down();
    }
  });
});
