import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { closeAllSockets, connectSocket, eventually } from '../support/ws.js';

/**
 * The chat's contracts over a real server: the legacy REST envelopes (snake_case, form or JSON)
 * and GraphQL, on the same domain; a live conversation with events over the WebSocket. The
 * rules themselves are tested at the domain level (test/chat-conversations, test/chat-messages).
 */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await closeAllSockets();
  await t.stop();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** A new visitor of the demo merchant and its bootstrap channel. */
async function newVisitor() {
  const { token, uid } = await visitorToken(t.url);
  const client = new HttpClient(t.url);
  const boot = await client.json('/visitor/data/get', { headers: bearer(token) });
  return { token, uid, client, channel: boot.body.data.visitor.channel as string, headers: bearer(token) };
}

describe('REST: a whole conversation, legacy envelopes', () => {
  it('assign (queued while alice is offline) → alice connects and gets it → messages both ways → read → close → rate', async () => {
    const v = await newVisitor();
    const visitorSocket = connectSocket(t.wsUrl, { authorization: `Bearer ${v.token}`, appkey: 'demo-appkey' });
    await visitorSocket.acked;
    const feed = visitorSocket.channel(v.channel);
    await eventually(() => feed.cursor, 'visitor subscription');

    const assigned = await v.client.json('/visitor/chat/assign', { method: 'POST', form: {}, headers: v.headers });
    expect(assigned.body.code).toBe(0);
    expect(Object.keys(assigned.body.data).sort()).toEqual([
      'agent',
      'conversation_id',
      'message_left',
      'queue_position',
      'state',
    ]);
    // Alice is offline: nobody can answer, so the conversation is kept as a message left (docs/availability.md).
    expect(assigned.body.data.message_left).toMatchObject({ reason: 'no_agent', next_open_at: null });

    const first = await v.client.json('/visitor/message/send', {
      method: 'POST',
      form: { client_msg_id: 'c-1', content: 'hello there' },
      headers: v.headers,
    });
    expect(first.body).toMatchObject({
      code: 0,
      data: { client_msg_id: 'c-1', content: 'hello there', sender_type: 'visitor' },
    });

    const alice = await agentSession(t.url, 'alice');
    const aliceSocket = connectSocket(t.wsUrl, { token: alice.token, appkey: 'demo-appkey' });
    await aliceSocket.acked;
    // alice online: if the conversation waited in the queue, it is hers now.
    if (assigned.body.data.state === 'queued')
      await eventually(() => feed.events.some((e) => e.event === 'conversation.assigned'), 'assigned event');

    const reply = await alice.client.json('/agent/message/send', {
      method: 'POST',
      json: { visitor_id: v.uid, client_msg_id: 'a-1', content: 'Hi! How can I help?' },
    });
    expect(reply.body).toMatchObject({
      code: 0,
      data: { sender_type: 'agent', sender_id: 'a_alice', duplicate: false },
    });
    await eventually(
      () => feed.events.some((e) => e.event === 'message.created' && JSON.stringify(e.data).includes('How can I help')),
      'the reply reaches the visitor',
    );

    const history = await v.client.json(`/visitor/message/list?limit=50`, { headers: v.headers });
    expect(history.body.code).toBe(0);
    const contents = history.body.data.messages.map((m: { content: string }) => m.content);
    expect(contents).toContain('hello there');
    expect(contents.at(-1)).toBe('Hi! How can I help?');
    const seqs = history.body.data.messages.map((m: { seq: number }) => m.seq);
    expect(seqs).toEqual(seqs.map((_: number, i: number) => i + 1));

    const agentView = await alice.client.json(`/agent/message/list?visitor_id=${v.uid}`);
    expect(agentView.body.data.messages).toEqual(history.body.data.messages);

    const read = await v.client.json('/visitor/message/read', {
      method: 'POST',
      form: { seq: String(seqs.at(-1)) },
      headers: v.headers,
    });
    expect(read.body).toMatchObject({ code: 0, data: { read_seq: seqs.at(-1), unread_count: 0 } });

    const typing = await alice.client.json('/agent/chat/typing', { method: 'POST', form: { visitor_id: v.uid } });
    expect(typing.body).toEqual({ code: 0, msg: 'ok', data: { published: true } });

    const mine = await alice.client.json('/agent/chat/list?scope=mine&limit=100');
    expect(mine.body.data.list.map((c: { visitor_id: string }) => c.visitor_id)).toContain(v.uid);

    const closed = await alice.client.json('/agent/chat/close', { method: 'POST', form: { visitor_id: v.uid } });
    expect(closed.body).toMatchObject({ code: 0, data: { state: 'closed', closed_by: 'agent' } });
    const again = await alice.client.json('/agent/message/send', {
      method: 'POST',
      form: { visitor_id: v.uid, client_msg_id: 'a-2', content: 'late' },
    });
    expect(again.status).toBe(200);
    expect(again.body.code).toBe(1201);
    await eventually(() => feed.events.some((e) => e.event === 'conversation.rating_invited'), 'rating invitation');

    const rated = await v.client.json('/visitor/chat/rate', {
      method: 'POST',
      form: { score: '5', resolved: 'true' },
      headers: v.headers,
    });
    expect(rated.body).toMatchObject({ code: 0, data: { rating: { score: 5, resolved: true, comment: null } } });
    const twice = await v.client.json('/visitor/chat/rate', { method: 'POST', json: { score: 4 }, headers: v.headers });
    expect(twice.body.code).toBe(1205);
  });

  it('a ticket agent gets the online-reception refusal (HTTP 403, 1403); no Session gets -1; another merchant’s visitor is 1404', async () => {
    const v = await newVisitor();
    await v.client.json('/visitor/chat/assign', { method: 'POST', json: {}, headers: v.headers });
    const tom = await agentSession(t.url, 'tom');
    const refused = await tom.client.json('/agent/chat/claim', { method: 'POST', form: { visitor_id: v.uid } });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe(1403);
    const anonymous = await new HttpClient(t.url).json('/agent/chat/list');
    expect(anonymous.body.code).toBe(-1);
    const bob = await agentSession(t.url, 'bob');
    const foreign = await bob.client.json(`/agent/message/list?visitor_id=${v.uid}`);
    expect(foreign.body.code).toBe(1404);
    expect((await bob.client.json(`/agent/chat/get?visitor_id=${v.uid}`)).body.code).toBe(1404);
    const own = await v.client.json('/visitor/chat/get', { headers: v.headers });
    expect(own.body).toMatchObject({ code: 0, data: { visitor_id: v.uid, closed_at: null } });
    const fresh = await newVisitor();
    expect((await fresh.client.json('/visitor/chat/get', { headers: fresh.headers })).body).toEqual({
      code: 0,
      msg: 'ok',
      data: null,
    });
    const bad = await v.client.json('/visitor/message/send', {
      method: 'POST',
      json: { content: 'no key' },
      headers: v.headers,
    });
    expect(bad.body.code).toBe(1000);
  });
});

describe('GraphQL: the same operations, typed', () => {
  it('assignAgent, sendMessage (exactly once), messages for both sides, claim conflict as ALREADY_CLAIMED', async () => {
    const v = await newVisitor();
    const gql = new HttpClient(t.url);
    const assign = await gql.graphql(
      'mutation { assignAgent { conversationId state queuePosition agent { agentId } } }',
      {},
      v.headers,
    );
    expect(assign.body.errors).toBeUndefined();
    const send = `mutation($k: String!) { sendMessage(clientMsgId: $k, content: "hi") { duplicate conversationState message { seq content senderType } } }`;
    const one = await gql.graphql(send, { k: 'g-1' }, v.headers);
    const two = await gql.graphql(send, { k: 'g-1' }, v.headers);
    expect(one.body.data.sendMessage.duplicate).toBe(false);
    expect(two.body.data.sendMessage).toEqual({ ...one.body.data.sendMessage, duplicate: true });

    const mine = await gql.graphql(
      '{ messages(first: 10) { messages { seq content } hasMore startCursor } }',
      {},
      v.headers,
    );
    expect(mine.body.data.messages.messages.map((m: { content: string }) => m.content)).toContain('hi');

    const dave = await agentSession(t.url, 'alice');
    const tokenHeader = { token: dave.token };
    const state = assign.body.data.assignAgent.state;
    if (state === 'queued') {
      const claim = `mutation($v: String!) { claimConversation(visitorId: $v) { state agent { agentId } } }`;
      const won = await gql.graphql(claim, { v: v.uid }, tokenHeader);
      expect(won.body.data.claimConversation).toEqual({ state: 'active', agent: { agentId: 'a_alice' } });
      const lost = await gql.graphql(claim, { v: v.uid }, tokenHeader);
      expect(lost.body.errors?.[0]?.extensions?.code).toBe('ALREADY_CLAIMED');
    }
    const agentSide = await gql.graphql(
      'query($v: String!) { conversation(visitorId: $v) { state unreadCount visitorName } messages(visitorId: $v) { messages { seq senderType } } }',
      { v: v.uid },
      tokenHeader,
    );
    expect(agentSide.body.errors).toBeUndefined();
    expect(agentSide.body.data.conversation.state).toBe('active');
    expect(agentSide.body.data.conversation.unreadCount).toBe(1);
    const list = await gql.graphql(
      '{ conversations(scope: mine, first: 100) { nodes { visitorId } pageInfo { hasNextPage endCursor } } }',
      {},
      tokenHeader,
    );
    expect(list.body.data.conversations.nodes.map((n: { visitorId: string }) => n.visitorId)).toContain(v.uid);
    const visitorOnAgentField = await gql.graphql('{ conversations { nodes { visitorId } } }', {}, v.headers);
    expect(visitorOnAgentField.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });
});
