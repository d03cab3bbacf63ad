import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HttpClient, visitorToken } from '../support/clients.js';
import { disconnectAll, pusherClient, reachState, record } from '../support/pusher.js';
import { INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';
import { closeAllSockets, connectSocket, eventually } from '../support/ws.js';

/**
 * Issue 31: a waiting visitor is pushed its queue position as it moves —
 * `conversation.queue_position` on its own channel, over graphql-ws and the Pusher protocol alike
 * (docs/availability.md "Guarantees").
 */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterEach(() => disconnectAll());
afterAll(async () => {
  await closeAllSockets();
  await t?.stop();
});

/** A visitor with its token, channel and the bootstrap's real-time settings. */
async function visitor() {
  const { token } = await visitorToken(t.url);
  const headers = { authorization: `Bearer ${token}` };
  const http = new HttpClient(t.url);
  const { body } = await http.json<{ visitor: { channel: string }; setting: { appkey: string; ws_address: string } }>(
    '/visitor/data/get',
    { headers },
  );
  return { http, headers, channel: body.data.visitor.channel, ...body.data.setting };
}

type Visitor = Awaited<ReturnType<typeof visitor>>;
const assign = async (v: Visitor) =>
  (
    await v.http.json<{ state: string; queue_position: number | null }>('/visitor/chat/assign', {
      method: 'POST',
      form: {},
      headers: v.headers,
    })
  ).body.data;

const CHANNEL = `subscription Channel($name: String!) {
  channel(name: $name) { event data payload { __typename ... on ConversationQueuePositionPayload { conversationId queuePosition } } }
}`;
type Received = { event: string; data: Record<string, unknown>; payload: Record<string, unknown> | null };

describe('the queue position pushed as it moves, on both transports', () => {
  it('the visitor behind hears its new place on graphql-ws and on Pusher when the one ahead leaves', async () => {
    // Nobody of the demo merchant is online in this file: both wait as messages left, in order.
    const first = await visitor();
    const second = await visitor();
    expect(await assign(first)).toMatchObject({ state: 'queued', queue_position: 1 });
    expect(await assign(second)).toMatchObject({ state: 'queued', queue_position: 2 });

    // graphql-ws
    const socket = connectSocket(t.wsUrl, { appkey: second.appkey, ...second.headers });
    await socket.acked;
    const received: Received[] = [];
    socket.client.subscribe(
      { query: CHANNEL, variables: { name: second.channel } },
      { next: (r) => received.push((r.data as { channel: Received }).channel), error: () => {}, complete: () => {} },
    );
    await eventually(async () => {
      await second.http.json('/internal/events', {
        method: 'POST',
        headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
        json: { channel: second.channel, event: 'test.probe', data: {} },
      });
      return received.some((e) => e.event === 'test.probe');
    }, 'the graphql-ws subscription');

    // Pusher
    const pusher = pusherClient(second.ws_address, second.appkey);
    await reachState(pusher, 'connected');
    const channel = record(pusher, second.channel);
    await channel.subscribed();

    // The visitor ahead gives up: the second is now first.
    const closed = await first.http.json('/visitor/chat/close', { method: 'POST', form: {}, headers: first.headers });
    expect(closed.body.code).toBe(0);

    const overPusher = await channel.waitFor('conversation.queue_position');
    expect(overPusher.data).toMatchObject({ visitor_id: expect.any(String), state: 'queued', queue_position: 1 });
    const overWs = (await eventually(
      () => received.find((e) => e.event === 'conversation.queue_position'),
      'conversation.queue_position over graphql-ws',
    )) as Received;
    expect(overWs.data).toEqual(overPusher.data);
    expect(overWs.payload).toEqual({
      __typename: 'ConversationQueuePositionPayload',
      conversationId: overWs.data.conversation_id,
      queuePosition: 1,
    });

    // The conversation view agrees with what was pushed.
    const view = await second.http.json<{ queue_position: number }>('/visitor/chat/get', { headers: second.headers });
    expect(view.body.data.queue_position).toBe(1);
  });
});
