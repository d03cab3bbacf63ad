import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { SESSION_REVALIDATE_MS } from '../../src/subscriptions/connection.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { browser, disconnectAll, pusherClient, rawPusher, reachState, record } from '../support/pusher.js';
import { tcpProxy } from '../support/tcp-proxy.js';
import { freshStores, INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';
import { eventually } from '../support/ws.js';

/**
 * Issue 16: the Pusher Channels protocol (v7) at /app/{appkey}, driven with the real pusher-js
 * (Node build) against a started gateway.
 */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterEach(() => {
  disconnectAll();
  browser.cookie = undefined;
});
afterAll(() => t?.stop());

async function publish(app: TestApp, channel: string, event: string, data: unknown = {}) {
  const { status, body } = await new HttpClient(app.url).json<{ id: string }>('/internal/events', {
    method: 'POST',
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
    json: { channel, event, data },
  });
  expect(status).toBe(202);
  return body.data.id;
}

/** A visitor as a legacy widget sees it: its token and the bootstrap's real-time settings. */
async function visitor(app: TestApp = t) {
  const { token } = await visitorToken(app.url);
  const { body } = await new HttpClient(app.url).json<{
    visitor: { channel: string };
    setting: { appkey: string; ws_address: string };
  }>('/visitor/data/get', { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
  return { token, channel: body.data.visitor.channel, ...body.data.setting };
}

/** An agent as its workbench sees it: Session, cookie and the bootstrap's settings. */
async function agent(username: string) {
  const { client, token } = await agentSession(t.url, username);
  const { body } = await client.json<{ setting: { appkey: string; ws_address: string; bid: string } }>(
    '/agent/data/get',
    { headers: { accept: 'application/json' } },
  );
  const { body: me } = await client.graphql<{ currentAgent: { agentId: string } }>('{ currentAgent { agentId } }');
  const cookie = [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  return { client, token, cookie, agentId: me.data?.currentAgent.agentId as string, ...body.data.setting };
}

describe('Pusher protocol: connecting with the bootstrap (ws_address + appkey)', () => {
  it('a visitor subscribes to its channel by name and receives an event published through POST /internal/events', async () => {
    const me = await visitor();
    const pusher = pusherClient(me.ws_address, me.appkey);
    await reachState(pusher, 'connected');
    expect(pusher.connection.socket_id).toMatch(/^\d+\.\d+$/);
    const channel = record(pusher, me.channel);
    await channel.subscribed();
    await publish(t, me.channel, 'test.message', { text: 'hello', n: 1 });
    // `data` travels as a JSON string (as Pusher server libraries send it); pusher-js parses it.
    expect((await channel.waitFor('test.message')).data).toEqual({ text: 'hello', n: 1 });
  });

  it('an unknown appkey is closed with 4001, which pusher-js takes as "do not reconnect"', async () => {
    const me = await visitor();
    const pusher = pusherClient(me.ws_address, 'no-such-appkey');
    const errors: unknown[] = [];
    pusher.connection.bind('error', (error: unknown) => errors.push(error));
    await eventually(
      // Refused during the handshake: pusher-js wraps the close as a WebSocketError.
      () => errors.some((e) => (e as { error?: { data?: { code?: number } } }).error?.data?.code === 4001),
      'the 4001 close',
    );
    await reachState(pusher, 'disconnected');
  });

  it('ping/pong both ways: pusher:ping is answered with pusher:pong', async () => {
    const me = await visitor();
    const pusher = pusherClient(me.ws_address, me.appkey);
    await reachState(pusher, 'connected');
    const pong = new Promise<void>((resolve) => pusher.bind('pusher:pong', () => resolve()));
    pusher.send_event('pusher:ping', {});
    await pong;
    // The raw protocol: connection_established carries socket_id and activity_timeout; a
    // connection without a protocol version is closed 4008.
    const raw = rawPusher(`${t.wsUrl.replace('/graphql', '')}/app/demo-appkey?protocol=7&client=js&version=8.0.0`);
    expect((await raw.next('pusher:connection_established')).data).toMatchObject({
      socket_id: expect.stringMatching(/^\d+\.\d+$/),
      activity_timeout: 120,
    });
    raw.send('pusher:ping', {});
    await raw.next('pusher:pong');
    raw.ws.close();
    const noVersion = rawPusher(`${t.wsUrl.replace('/graphql', '')}/app/demo-appkey`);
    expect((await noVersion.closed).code).toBe(4008);
  });
});

describe('Pusher protocol: authorization', () => {
  it('an agent connected with its Session cookie receives agent-{id} and global-{bid}, and is refused other agents and merchants', async () => {
    const alice = await agent('alice');
    const bob = await agent('bob');
    browser.cookie = alice.cookie;
    const pusher = pusherClient(alice.ws_address, alice.appkey);
    await reachState(pusher, 'connected');
    const own = record(pusher, `agent-${alice.agentId}`);
    const global = record(pusher, `global-${alice.bid}`);
    const otherAgent = record(pusher, `agent-${bob.agentId}`);
    const otherMerchant = record(pusher, `global-${bob.bid}`);
    await Promise.all([own.subscribed(), global.subscribed()]);
    expect(await otherAgent.refused()).toMatchObject({ status: 403 });
    expect(await otherMerchant.refused()).toMatchObject({ status: 403 });
    // The socket stays open for the allowed ones.
    await publish(t, `agent-${alice.agentId}`, 'test.message', { text: 'for alice' });
    await publish(t, 'global-demo', 'test.queue', { waiting: 2 });
    expect((await own.waitFor('test.message')).data).toEqual({ text: 'for alice' });
    expect((await global.waitFor('test.queue')).data).toEqual({ waiting: 2 });
    expect(pusher.connection.state).toBe('connected');
  });

  it('without a Session, agent and global channels are refused (anyone knowing an appkey listened in the original)', async () => {
    const me = await visitor();
    const pusher = pusherClient(me.ws_address, me.appkey);
    const global = record(pusher, 'global-demo');
    expect(await global.refused()).toMatchObject({ status: 403 });
    const someone = record(pusher, 'visitor-not-a-real-channel-name-0123456789');
    expect(await someone.refused()).toMatchObject({ status: 403 });
  });

  it('private- channels are authorized through POST /pusher/auth (agent token, visitor bearer)', async () => {
    const alice = await agent('alice');
    const agentClient = pusherClient(alice.ws_address, alice.appkey, { authHeaders: { token: alice.token } });
    const privateGlobal = record(agentClient, `private-global-${alice.bid}`);
    const privateOther = record(agentClient, 'private-global-acme');
    await privateGlobal.subscribed();
    expect(await privateOther.refused()).toMatchObject({ type: 'AuthError', status: 403 });

    const me = await visitor();
    const visitorClient = pusherClient(me.ws_address, me.appkey, {
      authHeaders: { Authorization: `Bearer ${me.token}` },
    });
    const privateOwn = record(visitorClient, `private-${me.channel}`);
    await privateOwn.subscribed();

    await publish(t, 'global-demo', 'test.queue', { waiting: 3 });
    await publish(t, me.channel, 'test.message', { text: 'private hello' });
    expect((await privateGlobal.waitFor('test.queue')).data).toEqual({ waiting: 3 });
    expect((await privateOwn.waitFor('test.message')).data).toEqual({ text: 'private hello' });

    // No identity at the endpoint: 401, which pusher-js reports as the subscription's error.
    const anonymous = pusherClient(me.ws_address, me.appkey);
    expect(await record(anonymous, `private-${me.channel}`).refused()).toMatchObject({ status: 401 });
  });

  it('a wrong signature is refused with pusher:subscription_error 403; the connection stays', async () => {
    const me = await visitor();
    const forged = pusherClient(me.ws_address, me.appkey, {
      extra: {
        channelAuthorization: {
          customHandler: (_params: unknown, callback: (error: Error | null, data: { auth: string }) => void) =>
            callback(null, { auth: `${me.appkey}:${'0'.repeat(64)}` }),
        } as never,
      },
    });
    const channel = record(forged, `private-${me.channel}`);
    expect(await channel.refused()).toMatchObject({ status: 403 });
    expect(forged.connection.state).toBe('connected');

    // A genuine signature is bound to its socket: replayed on another socket it is refused.
    const genuine = await new HttpClient(t.url).request('/pusher/auth', {
      method: 'POST',
      headers: { authorization: `Bearer ${me.token}` },
      form: { socket_id: '123.456', channel_name: `private-${me.channel}` },
    });
    const { auth } = (await genuine.json()) as { auth: string };
    expect(auth).toMatch(new RegExp(`^${me.appkey}:[0-9a-f]{64}$`));
    const raw = rawPusher(`${t.wsUrl.replace('/graphql', '')}/app/${me.appkey}?protocol=7`);
    await raw.next('pusher:connection_established');
    raw.send('pusher:subscribe', { channel: `private-${me.channel}`, auth });
    expect((await raw.next('pusher:subscription_error')).data).toMatchObject({ status: 403 });
    raw.ws.close();
  });

  it('a late signature for an earlier socket, sent just before the valid one, is refused and the channel is still subscribed', async () => {
    // pusher-js can send both after a reconnect (issue 32): the answer of an authorization
    // started on the old socket arrives late, then the one for the new socket. The requests of
    // one channel are answered one at a time, so the refusal of the stale one cannot undo the
    // valid one's subscription.
    const me = await visitor();
    const raw = rawPusher(`${t.wsUrl.replace('/graphql', '')}/app/${me.appkey}?protocol=7`);
    const established = await raw.next('pusher:connection_established');
    const socketId = (established.data as { socket_id: string }).socket_id;
    const sign = async (socket: string) => {
      const res = await new HttpClient(t.url).request('/pusher/auth', {
        method: 'POST',
        headers: { authorization: `Bearer ${me.token}` },
        form: { socket_id: socket, channel_name: `private-${me.channel}` },
      });
      return ((await res.json()) as { auth: string }).auth;
    };
    const [stale, valid] = [await sign('123.456'), await sign(socketId)];
    raw.send('pusher:subscribe', { channel: `private-${me.channel}`, auth: stale });
    raw.send('pusher:subscribe', { channel: `private-${me.channel}`, auth: valid });
    expect((await raw.next('pusher:subscription_error')).data).toMatchObject({ status: 403 });
    await raw.next('pusher_internal:subscription_succeeded');
    await publish(t, me.channel, 'test.after', { still: 'subscribed' });
    expect((await raw.next('test.after')).data).toEqual({ still: 'subscribed' });
    raw.ws.close();
  });

  it('client events are refused with pusher:error; the connection stays', async () => {
    const me = await visitor();
    const pusher = pusherClient(me.ws_address, me.appkey, { authHeaders: { authorization: `Bearer ${me.token}` } });
    const channel = record(pusher, `private-${me.channel}`);
    await channel.subscribed();
    const refused = new Promise<unknown>((resolve) => pusher.connection.bind('error', resolve));
    channel.channel.trigger('client-typing', { typing: true });
    expect(await refused).toMatchObject({
      type: 'PusherError',
      data: { message: expect.stringMatching(/Client events/) },
    });
    await publish(t, me.channel, 'still.open');
    await channel.waitFor('still.open');
  });

  it("an agent's Session ending ends its Pusher subscriptions (session.ended, then 4009: no reconnect)", async () => {
    const alice = await agent('alice');
    browser.cookie = alice.cookie;
    const pusher = pusherClient(alice.ws_address, alice.appkey);
    const own = record(pusher, `agent-${alice.agentId}`);
    const global = record(pusher, 'global-demo');
    await Promise.all([own.subscribed(), global.subscribed()]);
    const errors: { data?: { code?: number } }[] = [];
    pusher.connection.bind('error', (e: { data?: { code?: number } }) => errors.push(e));
    await alice.client.json('/agent/logout', { method: 'POST' });
    expect((await own.waitFor('session.ended')).data).toMatchObject({ reason: 'logout' });
    expect((await global.waitFor('session.ended')).data).toMatchObject({ reason: 'logout' });
    await eventually(() => errors.some((e) => e.data?.code === 4009), 'the 4009 close');
    await reachState(pusher, 'disconnected');
  });

  it('a revoked visitor token makes its channel unusable: refused to new subscriptions, existing ones closed (4009)', async () => {
    const me = await visitor();
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const pusher = pusherClient(me.ws_address, me.appkey);
      const channel = record(pusher, me.channel);
      await channel.subscribed();
      const revoked = await new HttpClient(t.url).graphql('mutation { revokeVisitorToken }', undefined, {
        authorization: `Bearer ${me.token}`,
      });
      expect(revoked.body.data).toEqual({ revokeVisitorToken: true });
      const errors: { data?: { code?: number } }[] = [];
      pusher.connection.bind('error', (e: { data?: { code?: number } }) => errors.push(e));
      vi.advanceTimersByTime(SESSION_REVALIDATE_MS);
      await eventually(() => errors.some((e) => e.data?.code === 4009), 'the 4009 close');
      await reachState(pusher, 'disconnected');
    } finally {
      vi.useRealTimers();
    }
    const again = pusherClient(me.ws_address, me.appkey);
    expect(await record(again, me.channel).refused()).toMatchObject({ status: 403 });
  });
});

describe('Pusher protocol: reconnection', () => {
  it('after a server restart pusher-js reconnects and resubscribes by itself', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'parley-pusher-'));
    const stores = { ...(await freshStores()), pgliteDir: dir };
    let first: TestApp | undefined = await startTestApp({ stores });
    let second: TestApp | undefined;
    let proxy: Awaited<ReturnType<typeof tcpProxy>> | undefined;
    try {
      const me = await visitor(first);
      const port = new URL(first.url).port;
      // The client reaches the gateway through a proxy that holds a connection while nothing
      // listens (a load balancer in front of a restarting gateway), so pusher-js's own immediate
      // reconnect after 4200 reaches the new instance. Refused instead, pusher-js would wait out
      // its fixed 15 s attempt timeout before trying again (what keepConnected is for, tested in
      // pusher-resume.test.ts); here the reconnect and the resubscription are pusher-js's alone.
      proxy = await tcpProxy(() => Number(port), { holdWhileRefused: true });
      const pusher = pusherClient(`ws://127.0.0.1:${proxy.port}`, me.appkey);
      const channel = record(pusher, me.channel);
      await channel.subscribed();
      await publish(first, me.channel, 'before');
      await channel.waitFor('before');
      const closes: number[] = [];
      pusher.connection.bind('error', (e: { data?: { code?: number } }) => {
        if (e.data?.code) closes.push(e.data.code);
      });

      await first.app.stop();
      // A graceful stop closes with 4200: reconnect at once.
      await eventually(() => closes.includes(4200), 'the 4200 close of the shutdown');
      first = undefined;
      second = await startTestApp({ stores, env: { PORT: port } });
      const restarted = second;
      await eventually(
        async () => {
          await publish(restarted, me.channel, 'after');
          return channel.events.some((e) => e.event === 'after');
        },
        'an event after the restart',
        30_000,
      );
      expect(pusher.connection.state).toBe('connected');
    } finally {
      disconnectAll();
      await first?.app.stop();
      await second?.app.stop();
      await proxy?.close();
      await stores.drop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
