import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';
import { closeAllSockets, connectSocket, eventually } from '../support/ws.js';

// Issue 32: event payloads are typed in the schema (camelCase, one member per catalogued event)
// and say what the snake_case `data` says, value for value.

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await closeAllSockets();
  await t?.stop();
});

const TYPED = `subscription Typed($name: String!) {
  channel(name: $name) {
    event data
    payload {
      __typename
      ... on MessageCreatedPayload { message { id seq conversationId visitorId senderType senderId clientMsgId type content createdAt recalled attachment { attachmentId } meta } }
      ... on ConversationQueuedPayload { conversationId visitorId state groupId queuePosition }
      ... on ConversationAssignedPayload { conversationId visitorId state by agent { agentId nickname avatar } }
    }
  }
}`;

type Received = { event: string; data: Record<string, unknown>; payload: Record<string, unknown> | null };

/** The first received event that matches, once it arrives. */
async function found(match: (e: Received) => boolean, received: Received[]): Promise<Received> {
  return (await eventually(() => received.find(match), 'the event')) as Received;
}

describe('ChannelEvent.payload: typed, camelCase, the same values as `data`', () => {
  it("a visitor's message.created and conversation events carry every field of `data`, camelCased", async () => {
    const { token } = await visitorToken(t.url);
    const headers = { authorization: `Bearer ${token}` };
    const http = new HttpClient(t.url);
    const boot = await http.json<{ visitor: { channel: string } }>('/visitor/data/get', { headers });
    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', ...headers });
    await socket.acked;
    const received: Received[] = [];
    socket.client.subscribe(
      { query: TYPED, variables: { name: boot.body.data.visitor.channel } },
      { next: (r) => received.push((r.data as { channel: Received }).channel), error: () => {}, complete: () => {} },
    );
    // Live once a probe arrives (a subscription without `since` starts when it is subscribed).
    await eventually(async () => {
      await http.json('/internal/events', {
        method: 'POST',
        headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
        json: { channel: boot.body.data.visitor.channel, event: 'test.probe', data: { n: 1 } },
      });
      return received.some((e) => e.event === 'test.probe');
    }, 'subscribed');
    expect(received.find((e) => e.event === 'test.probe')?.payload).toBeNull();

    await http.json('/visitor/chat/assign', { method: 'POST', form: {}, headers });
    const sent = await http.json('/visitor/message/send', {
      method: 'POST',
      form: { client_msg_id: 'typed-1', content: 'typed <b>payload</b>' },
      headers,
    });
    expect(sent.body.code).toBe(0);
    const created = await found((e) => e.event === 'message.created', received);
    const wire = (created.data as { message: Record<string, unknown> }).message;
    expect(created.payload).toEqual({
      __typename: 'MessageCreatedPayload',
      message: {
        id: wire.id,
        seq: wire.seq,
        conversationId: wire.conversation_id,
        visitorId: wire.visitor_id,
        senderType: wire.sender_type,
        senderId: wire.sender_id,
        clientMsgId: 'typed-1',
        type: wire.type,
        content: 'typed <b>payload</b>',
        createdAt: wire.created_at,
        recalled: wire.recalled,
        attachment: null,
        meta: wire.meta,
      },
    });
    expect(wire).toMatchObject({ content: 'typed <b>payload</b>', client_msg_id: 'typed-1', seq: sent.body.data.seq });

    // The conversation waits (nobody online) or was assigned: either event's payload mirrors its data.
    const conversation = await found(
      (e) => e.event === 'conversation.queued' || e.event === 'conversation.assigned',
      received,
    );
    const data = conversation.data as Record<string, unknown>;
    expect(conversation.payload).toMatchObject({
      conversationId: data.conversation_id,
      visitorId: data.visitor_id,
      state: data.state,
    });
    if (conversation.event === 'conversation.queued') {
      expect(conversation.payload).toEqual({
        __typename: 'ConversationQueuedPayload',
        conversationId: data.conversation_id,
        visitorId: data.visitor_id,
        state: data.state,
        groupId: data.group_id,
        queuePosition: data.queue_position,
      });
    }
  });

  it('an agent channel: conversation.assigned names the agent in camelCase', async () => {
    const alice = await agentSession(t.url, 'alice');
    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: alice.token });
    await socket.acked;
    const received: Received[] = [];
    socket.client.subscribe(
      { query: TYPED, variables: { name: 'agent-a_alice' } },
      { next: (r) => received.push((r.data as { channel: Received }).channel), error: () => {}, complete: () => {} },
    );
    await eventually(async () => {
      await new HttpClient(t.url).json('/internal/events', {
        method: 'POST',
        headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
        json: { channel: 'agent-a_alice', event: 'test.probe', data: {} },
      });
      return received.some((e) => e.event === 'test.probe');
    }, 'subscribed');
    const { token } = await visitorToken(t.url);
    await new HttpClient(t.url).json('/visitor/chat/assign', {
      method: 'POST',
      form: {},
      headers: { authorization: `Bearer ${token}` },
    });
    const assigned = await found((e) => e.event === 'conversation.assigned', received);
    const data = assigned.data as { conversation_id: string; by: string; agent: Record<string, string> };
    expect(assigned.payload).toEqual({
      __typename: 'ConversationAssignedPayload',
      conversationId: data.conversation_id,
      visitorId: (assigned.data as { visitor_id: string }).visitor_id,
      state: 'active',
      by: data.by,
      agent: { agentId: 'a_alice', nickname: data.agent.nickname, avatar: data.agent.avatar },
    });
  });
});
