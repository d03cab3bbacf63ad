import { eq } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { agents } from '../../src/db/schema.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { browser, disconnectAll, pusherClient, reachState, record } from '../support/pusher.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { type ChannelSubscription, closeAllSockets, connectSocket, eventually } from '../support/ws.js';

/**
 * Issue 32 item 5: `admin-{bid}`, every `message.created` of the merchant for its admins
 * (docs/realtime.md "The admin channel"), over graphql-ws and Pusher; never an internal note;
 * refused to anyone else.
 */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
  // acme has no admin in the demo data: bob becomes one, to be another merchant's admin.
  await t.app.deps.db.update(agents).set({ level: 'admin' }).where(eq(agents.id, 'a_bob'));
});
afterEach(async () => {
  disconnectAll();
  browser.cookie = undefined;
  await closeAllSockets();
});
afterAll(() => t?.stop());

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function newVisitor() {
  const { token, uid } = await visitorToken(t.url);
  const client = new HttpClient(t.url);
  await client.json('/visitor/data/get', { headers: bearer(token) });
  return { uid, client, headers: bearer(token) };
}

/** An agent's Session, its HTTP client and the cookie a browser would send with the upgrade. */
async function login(username: string) {
  const { client, token } = await agentSession(t.url, username);
  const cookie = [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  return { client, token, cookie };
}

/** The `extensions.code` of a refused subscription (it ends at once with that error and no event). */
const refusal = async (sub: ChannelSubscription) => {
  expect(await sub.ended).not.toBe('closed');
  expect(sub.events).toEqual([]);
  return sub.errors?.[0]?.extensions?.code;
};

const contentOf = (data: unknown) => (data as { message?: { content?: string } }).message?.content;

describe('admin-{bid}: every message of the merchant for its admins', () => {
  it('an admin follows two conversations of another agent (visitor and agent messages) over graphql-ws and Pusher; a note never appears', async () => {
    const run = Date.now().toString(36);
    // alice online first: the two new conversations are routed to her, not to the admin.
    const alice = await login('alice');
    const aliceSocket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: alice.token });
    await aliceSocket.acked;
    const first = await newVisitor();
    const second = await newVisitor();
    for (const v of [first, second]) {
      const assigned = await v.client.json('/visitor/chat/assign', { method: 'POST', json: {}, headers: v.headers });
      expect(assigned.body.data).toMatchObject({ state: 'active', agent: { agent_id: 'a_alice' } });
    }

    const ada = await login('ada');
    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: ada.token });
    await socket.acked;
    const feed = socket.channel('admin-demo');
    await eventually(() => feed.cursor, 'the admin subscription');
    // Pusher: the private channel signed by /pusher/auth, and the plain one on a Session cookie.
    const signed = pusherClient(t.wsUrl, 'demo-appkey', { authHeaders: { token: ada.token } });
    const privateFeed = record(signed, 'private-admin-demo');
    browser.cookie = ada.cookie;
    const withCookie = pusherClient(t.wsUrl, 'demo-appkey');
    await reachState(withCookie, 'connected');
    const plainFeed = record(withCookie, 'admin-demo');
    await Promise.all([privateFeed.subscribed(), plainFeed.subscribed()]);

    const sent = [`v1 ${run}`, `alice ${run}`, `v2 ${run}`];
    const send = async (client: HttpClient, path: string, json: object, headers = {}) => {
      const { body } = await client.json(path, { method: 'POST', json, headers });
      expect(body.code).toBe(0);
    };
    await send(first.client, '/visitor/message/send', { client_msg_id: `v1-${run}`, content: sent[0] }, first.headers);
    const note = `secret note ${run}`;
    await send(alice.client, '/agent/note/add', { visitor_id: first.uid, content: note });
    await send(alice.client, '/agent/message/send', {
      visitor_id: first.uid,
      client_msg_id: `a1-${run}`,
      content: sent[1],
    });
    await send(
      second.client,
      '/visitor/message/send',
      { client_msg_id: `v2-${run}`, content: sent[2] },
      second.headers,
    );

    const received = (events: { event: string; data: unknown }[]) =>
      events.filter((e) => e.event === 'message.created').map((e) => contentOf(e.data));
    await feed.until((events) => sent.every((c) => received(events).includes(c)), 'the three messages on graphql-ws');
    await privateFeed.until(() => sent.every((c) => received(privateFeed.events).includes(c)), 'them on private-');
    await plainFeed.until(() => sent.every((c) => received(plainFeed.events).includes(c)), 'them on admin-demo');

    for (const events of [feed.events, privateFeed.events, plainFeed.events]) {
      const messages = events.filter((e) => e.event === 'message.created').map((e) => e.data);
      // Both conversations, visitor and agent senders, with the payload of the other channels.
      const mine = messages.filter((d) => sent.includes(contentOf(d) as string)) as {
        message: { conversation_id: string; sender_type: string; sender_id: string };
      }[];
      expect(new Set(mine.map((d) => d.message.conversation_id)).size).toBe(2);
      expect(mine.map((d) => d.message.sender_type)).toEqual(['visitor', 'agent', 'visitor']);
      expect(mine[1]?.message.sender_id).toBe('a_alice');
      // Only messages on this channel; the note is nowhere, under any event.
      expect(events.every((e) => e.event === 'message.created' || e.event === 'subscribed')).toBe(true);
      expect(JSON.stringify(events)).not.toContain(note);
    }
  });

  it('refused to a plain agent, a ticket agent, a visitor and another merchant’s admin (graphql-ws and Pusher)', async () => {
    const alice = await login('alice');
    const tom = await login('tom');
    const bob = await login('bob'); // admin of acme (beforeAll)
    const ada = await login('ada');
    const v = await visitorToken(t.url);

    const aliceSocket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: alice.token });
    const tomSocket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: tom.token });
    const bobSocket = connectSocket(t.wsUrl, { appkey: 'acme-appkey', token: bob.token });
    const adaSocket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: ada.token });
    const visitorSocket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', ...bearer(v.token) });
    await Promise.all([aliceSocket, tomSocket, bobSocket, adaSocket, visitorSocket].map((s) => s.acked));
    expect(await refusal(aliceSocket.channel('admin-demo'))).toBe('FORBIDDEN');
    expect(await refusal(tomSocket.channel('admin-demo'))).toBe('FORBIDDEN');
    expect(await refusal(visitorSocket.channel('admin-demo'))).toBe('FORBIDDEN');
    expect(await refusal(bobSocket.channel('admin-demo'))).toBe('FORBIDDEN');
    expect(await refusal(adaSocket.channel('admin-acme'))).toBe('FORBIDDEN');
    // bob is an admin: his own merchant's admin channel is his.
    const bobFeed = bobSocket.channel('admin-acme');
    await eventually(() => bobFeed.cursor, "bob's admin subscription");

    // Pusher: /pusher/auth refuses the private channel, the Session cookie the plain one.
    const aliceSigned = pusherClient(t.wsUrl, 'demo-appkey', { authHeaders: { token: alice.token } });
    expect(await record(aliceSigned, 'private-admin-demo').refused()).toMatchObject({ status: 403 });
    const visitorSigned = pusherClient(t.wsUrl, 'demo-appkey', { authHeaders: bearer(v.token) });
    expect(await record(visitorSigned, 'private-admin-demo').refused()).toMatchObject({ status: 403 });
    const bobSigned = pusherClient(t.wsUrl, 'acme-appkey', { authHeaders: { token: bob.token } });
    expect(await record(bobSigned, 'private-admin-demo').refused()).toMatchObject({ status: 403 });
    browser.cookie = alice.cookie;
    const aliceCookie = pusherClient(t.wsUrl, 'demo-appkey');
    await reachState(aliceCookie, 'connected');
    expect(await record(aliceCookie, 'admin-demo').refused()).toMatchObject({ status: 403 });
  });

  it('an admin demoted by another admin loses admin-{bid} at once (graphql-ws and Pusher): FORBIDDEN, nothing more, and a re-subscribe (same socket or a new one) is refused; its socket and agent channel stay', async () => {
    const run = Date.now().toString(36);
    const ada = await login('ada');
    // A second admin of demo, made by ada, to be demoted by her.
    const username = `admin-${run}`;
    const created = await ada.client.graphql(
      'mutation($input: CreateAgentInput!) { createAgent(input: $input) { id } }',
      { input: { username, nickname: 'Second admin', password: `${username}-password`, level: 'admin' } },
    );
    expect(created.body.errors).toBeUndefined();
    const agentId = created.body.data.createAgent.id as string;
    const second = await login(username);

    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: second.token });
    await socket.acked;
    const feed = socket.channel('admin-demo');
    const own = socket.channel(`agent-${agentId}`);
    await eventually(() => feed.cursor && own.cursor, 'the admin and agent subscriptions');
    const signed = pusherClient(t.wsUrl, 'demo-appkey', { authHeaders: { token: second.token } });
    const privateFeed = record(signed, 'private-admin-demo');
    browser.cookie = second.cookie;
    const withCookie = pusherClient(t.wsUrl, 'demo-appkey');
    await reachState(withCookie, 'connected');
    const plainFeed = record(withCookie, 'admin-demo');
    await Promise.all([privateFeed.subscribed(), plainFeed.subscribed()]);
    // ada keeps following: the control that messages still flow.
    const adaSocket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: ada.token });
    await adaSocket.acked;
    const adaFeed = adaSocket.channel('admin-demo');
    await eventually(() => adaFeed.cursor, "ada's admin subscription");

    const visitor = await newVisitor();
    const say = async (content: string) => {
      const { body } = await visitor.client.json('/visitor/message/send', {
        method: 'POST',
        json: { client_msg_id: content, content },
        headers: visitor.headers,
      });
      expect(body.code).toBe(0);
    };
    const before = `before ${run}`;
    await say(before);
    const has = (events: { event: string; data: unknown }[], content: string) =>
      events.some((e) => e.event === 'message.created' && contentOf(e.data) === content);
    await feed.until((events) => has(events, before), 'the message before on graphql-ws');
    await privateFeed.until(() => has(privateFeed.events, before), 'it on private-');
    await plainFeed.until(() => has(plainFeed.events, before), 'it on admin-demo');

    const demoted = await ada.client.graphql(
      `mutation { updateAgent(input: {agentId: "${agentId}", level: agent}) { id } }`,
    );
    expect(demoted.body.errors).toBeUndefined();

    // Every admin-channel subscription ends with FORBIDDEN, on both transports.
    expect(await feed.ended).toBe('complete');
    expect(feed.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(await privateFeed.refused()).toMatchObject({ status: 403 });
    expect(await plainFeed.refused()).toMatchObject({ status: 403 });
    // Its own channel stays and tells it; so does the socket.
    await own.waitFor('agent.level_changed', (e) => e.data.level === 'agent' && e.data.agent_id === agentId);
    expect(withCookie.connection.state).toBe('connected');

    const after = `after ${run}`;
    await say(after);
    await adaFeed.until((events) => has(events, after), 'the message after on ada’s feed');
    for (const events of [feed.events, privateFeed.events, plainFeed.events]) expect(has(events, after)).toBe(false);
    // A new subscribe on the same socket is judged by the new level.
    expect(await refusal(socket.channel('admin-demo'))).toBe('FORBIDDEN');
    // So is a Pusher re-subscribe: /pusher/auth no longer signs the private channel, the
    // socket's new level refuses the plain one, and so does a new socket with the same Session
    // (what pusher-js does after a reconnect).
    signed.unsubscribe('private-admin-demo');
    expect(await record(signed, 'private-admin-demo').refused()).toMatchObject({ status: 403 });
    withCookie.unsubscribe('admin-demo');
    expect(await record(withCookie, 'admin-demo').refused()).toMatchObject({ status: 403 });
    const reconnected = pusherClient(t.wsUrl, 'demo-appkey');
    await reachState(reconnected, 'connected');
    const again = record(reconnected, 'admin-demo');
    expect(await again.refused()).toMatchObject({ status: 403 });
    expect(again.events).toEqual([]);
  });
});
