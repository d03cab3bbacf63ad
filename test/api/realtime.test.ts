import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { settleExpiredPresence } from '../../src/resolvers/presence.js';
import { SESSION_REVALIDATE_MS } from '../../src/subscriptions/connection.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { describeWhen, itWhen } from '../support/required.js';
import { freshStores, INTERNAL_TOKEN, startTestApp, type TestApp, withClockAhead } from '../support/test-app.js';
import { type ChannelSubscription, closeAllSockets, connectSocket, eventually, rawSocket } from '../support/ws.js';

/** Posts an event through the internal publish API and returns its id. */
async function publish(t: TestApp, channel: string, event: string, data: unknown = {}) {
  const { status, body } = await new HttpClient(t.url).json<{ id: string }>('/internal/events', {
    method: 'POST',
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
    json: { channel, event, data },
  });
  expect(status).toBe(202);
  return body.data.id;
}

/** Logs an agent in and returns its Session token, id and HTTP client. */
async function agent(t: TestApp, username: string) {
  const { client, token } = await agentSession(t.url, username);
  const { body } = await client.graphql<{ currentAgent: { agentId: string; state: string } }>(
    '{ currentAgent { agentId state } }',
  );
  return { client, token, agentId: body.data?.currentAgent.agentId as string };
}

/** A new visitor of `appkey`: its token and the channel its bootstrap gives it. */
async function visitor(t: TestApp, appkey = 'demo-appkey') {
  const { token } = await visitorToken(t.url, appkey);
  const { body } = await new HttpClient(t.url).json<{ visitor: { channel: string; uid: string } }>(
    '/visitor/data/get',
    {
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
    },
  );
  return { token, channel: body.data.visitor.channel, uid: body.data.visitor.uid };
}

const agentSocket = (t: TestApp, token: string, appkey = 'demo-appkey') => connectSocket(t.wsUrl, { appkey, token });
const visitorSocket = (t: TestApp, token: string, appkey = 'demo-appkey') =>
  connectSocket(t.wsUrl, { appkey, authorization: `Bearer ${token}` });

/** The `extensions.code` of a refused subscription (it ends at once with that error and no event). */
const refusal = async (sub: ChannelSubscription) => {
  expect(await sub.ended).not.toBe('closed');
  expect(sub.events).toEqual([]);
  return sub.errors?.[0]?.extensions?.code;
};

/** PRESENCE_GRACE_SECONDS: how long an agent stays online after its last socket closes. */
const GRACE_SECONDS = 1;
const HISTORY_SIZE = 10;
// The socket that never sends connection_init waits this out (5 s by default); the clients send it
// as soon as their socket opens.
const INIT_TIMEOUT_MS = 1000;

// One gateway for most of the file, with a short presence grace period and a small history.
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    env: {
      PRESENCE_GRACE_SECONDS: String(GRACE_SECONDS),
      CHANNEL_HISTORY_SIZE: String(HISTORY_SIZE),
      WS_CONNECTION_INIT_TIMEOUT_MS: String(INIT_TIMEOUT_MS),
    },
  });
});
afterEach(() => closeAllSockets());
afterAll(() => t?.stop());

describe('real-time connection and channel authorization', () => {
  it('a visitor may subscribe to its own channel, and to no other', async () => {
    const me = await visitor(t);
    const other = await visitor(t);
    const alice = await agent(t, 'alice');
    const socket = visitorSocket(t, me.token);
    await socket.acked;

    const own = socket.channel(me.channel);
    await eventually(async () => {
      await publish(t, me.channel, 'shop.note', { text: 'hello' });
      return own.events.length > 0;
    }, 'the first event on the visitor channel');
    expect(own.events[0]).toMatchObject({ channel: me.channel, event: 'shop.note', data: { text: 'hello' } });
    expect(new Date(own.events[0]?.at ?? '').getTime()).toBeGreaterThan(0);

    expect(await refusal(socket.channel(other.channel))).toBe('FORBIDDEN');
    expect(await refusal(socket.channel(`agent-${alice.agentId}`))).toBe('FORBIDDEN');
    expect(await refusal(socket.channel('global-demo'))).toBe('FORBIDDEN');
  });

  it('an agent may subscribe to agent-{its id} and global-{its bid} only', async () => {
    const alice = await agent(t, 'alice');
    const bob = await agent(t, 'bob');
    const someone = await visitor(t);
    const socket = agentSocket(t, alice.token);
    await socket.acked;

    const mine = socket.channel(`agent-${alice.agentId}`);
    const global = socket.channel('global-demo');
    await eventually(async () => {
      await publish(t, `agent-${alice.agentId}`, 'assignment.new', { uid: 'v1' });
      await publish(t, 'global-demo', 'queue.changed', { waiting: 1 });
      return (
        mine.events.some((e) => e.event === 'assignment.new') && global.events.some((e) => e.event === 'queue.changed')
      );
    }, 'events on both agent channels');

    expect(await refusal(socket.channel(`agent-${bob.agentId}`))).toBe('FORBIDDEN');
    expect(await refusal(socket.channel('global-acme'))).toBe('FORBIDDEN');
    expect(await refusal(socket.channel(someone.channel))).toBe('FORBIDDEN');
  });

  it('a ticket_agent is refused the online-reception channels', async () => {
    const tom = await agent(t, 'tom');
    const socket = agentSocket(t, tom.token);
    await socket.acked;
    expect(await refusal(socket.channel(`agent-${tom.agentId}`))).toBe('FORBIDDEN');
    expect(await refusal(socket.channel('global-demo'))).toBe('FORBIDDEN');
  });

  it("an agent of another merchant cannot subscribe to global-demo or to alice's channel", async () => {
    const alice = await agent(t, 'alice');
    const bob = await agent(t, 'bob');
    const socket = agentSocket(t, bob.token, 'acme-appkey');
    await socket.acked;
    expect(await refusal(socket.channel('global-demo'))).toBe('FORBIDDEN');
    expect(await refusal(socket.channel(`agent-${alice.agentId}`))).toBe('FORBIDDEN');
  });

  it('the socket stays open for the allowed subscriptions after a refused one', async () => {
    const alice = await agent(t, 'alice');
    const socket = agentSocket(t, alice.token);
    await socket.acked;
    const allowed = socket.channel('global-demo');
    expect(await refusal(socket.channel('global-acme'))).toBe('FORBIDDEN');
    const later = socket.channel(`agent-${alice.agentId}`);
    await eventually(async () => {
      await publish(t, 'global-demo', 'still.here');
      await publish(t, `agent-${alice.agentId}`, 'still.here');
      return allowed.names().includes('still.here') && later.names().includes('still.here');
    }, 'events after the refusal');
  });

  it('an agent may identify with the Session cookie of the upgrade request', async () => {
    const alice = await agent(t, 'alice');
    const cookie = [...alice.client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey' }, { headers: { cookie } });
    await socket.acked;
    const sub = socket.channel('global-demo');
    await eventually(async () => {
      await publish(t, 'global-demo', 'cookie.ok');
      return sub.names().includes('cookie.ok');
    }, 'an event over the cookie-authenticated socket');
  });

  it('a missing or bad identity, or an appkey of another merchant, closes the socket with 4403', async () => {
    const alice = await agent(t, 'alice');
    const me = await visitor(t);
    const attempts = [
      {},
      { appkey: 'demo-appkey' },
      { appkey: 'demo-appkey', token: 'x'.repeat(40) },
      { appkey: 'demo-appkey', token: 'not a session id' },
      { appkey: 'demo-appkey', authorization: 'Bearer not-a-visitor-token' },
      { appkey: 'demo-appkey', authorization: alice.token },
      { appkey: 'acme-appkey', token: alice.token },
      { appkey: 'no-such-appkey', token: alice.token },
      { token: alice.token },
      { appkey: 'acme-appkey', authorization: `Bearer ${me.token}` },
    ];
    for (const params of attempts) {
      const socket = connectSocket(t.wsUrl, params);
      await expect(socket.acked, JSON.stringify(params)).rejects.toThrow();
      expect((await socket.closed).code, JSON.stringify(params)).toBe(4403);
    }
  });

  it('a visitor token is not an agent token, nor the other way round', async () => {
    const alice = await agent(t, 'alice');
    const me = await visitor(t);
    const asAgent = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: me.token });
    expect((await asAgent.closed).code).toBe(4403);
    const asVisitor = connectSocket(t.wsUrl, { appkey: 'demo-appkey', authorization: `Bearer ${alice.token}` });
    expect((await asVisitor.closed).code).toBe(4403);
  });

  it('an unanswered connection_init times out (4408)', async () => {
    const { opened, closed } = rawSocket(t.wsUrl);
    await opened;
    const openedAt = performance.now();
    expect((await closed).code).toBe(4408);
    expect(performance.now() - openedAt).toBeGreaterThanOrEqual(INIT_TIMEOUT_MS - 50);
  });
});

describe('operations that need HTTP', () => {
  it('login and logout are refused over a socket, agent or visitor, and the Session stays', async () => {
    const alice = await agent(t, 'alice');
    const me = await visitor(t);
    for (const socket of [agentSocket(t, alice.token), visitorSocket(t, me.token)]) {
      await socket.acked;
      for (const query of [
        'mutation { logout }',
        'mutation { login(username: "alice", password: "alice-password", captcha: "x") { token } }',
      ]) {
        const results = [];
        for await (const result of socket.client.iterate({ query })) results.push(result);
        expect(results).toHaveLength(1);
        expect(results[0]?.errors?.[0]).toMatchObject({
          message: expect.stringContaining('HTTP-only operations'),
          extensions: { code: 'BAD_USER_INPUT' },
        });
      }
    }
    const { body } = await alice.client.graphql('{ currentAgent { agentId } }');
    expect(body.data?.currentAgent.agentId).toBe(alice.agentId);
  });
});

describe('POST /internal/events', () => {
  it('publishes {channel, event, data} and answers 202 with the event id', async () => {
    const me = await visitor(t);
    const socket = visitorSocket(t, me.token);
    await socket.acked;
    const sub = socket.channel(me.channel);
    const first = await publish(t, me.channel, 'warmup');
    const { status, body } = await new HttpClient(t.url).json('/internal/events', {
      method: 'POST',
      headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
      json: { channel: me.channel, event: 'shop.note', data: { text: 'hi', from: 'agent' } },
    });
    expect(status).toBe(202);
    expect(body).toMatchObject({ code: 0, msg: 'ok', data: { id: expect.stringMatching(/^\d+-\d+$/) } });
    // A late subscriber replays from the warm-up event: the posted one follows it.
    const replay = socket.channel(me.channel, first);
    await replay.waitFor('shop.note');
    expect(replay.events[0]).toMatchObject({ position: body.data.id, data: { text: 'hi', from: 'agent' } });
    void sub;
  });

  it('refuses a missing or wrong token (403) and malformed input (400)', async () => {
    const http = new HttpClient(t.url);
    const post = (headers: Record<string, string>, json: unknown) =>
      http.json('/internal/events', { method: 'POST', headers, json });
    const good = { channel: 'global-demo', event: 'x.y', data: {} };
    expect((await post({}, good)).status).toBe(403);
    expect((await post({ authorization: 'Bearer wrong-token-wrong-token' }, good)).status).toBe(403);
    const auth = { authorization: `Bearer ${INTERNAL_TOKEN}` };
    expect((await post(auth, { ...good, event: 'has spaces' })).status).toBe(400);
    expect((await post(auth, { event: 'x', data: {} })).status).toBe(400);
    expect((await post(auth, { channel: 'global-demo', event: 'x' })).status).toBe(400);
  });
});

describe('events the gateway publishes', () => {
  it('an agent logging in and out, and a visitor coming online, on global-{bid}', async () => {
    const alice = await agent(t, 'alice');
    const socket = agentSocket(t, alice.token);
    await socket.acked;
    // Subscribed live before the events happen, not replayed with `since` afterwards: on a busy
    // machine the earlier tests' presence churn (agent.state, re-queues, assignments) pushed more
    // than the history's 10 events in between, so these were dropped behind a history.gap.
    const global = socket.channel('global-demo');
    await eventually(() => global.cursor, 'the subscription started');
    const other = await agent(t, 'alice');
    const me = await visitor(t); // its bootstrap announces it
    await other.client.json('/agent/logout', { method: 'POST' });

    // The bootstrap answers without waiting for its announcement, so `visitor.online` may come
    // after the logout: wait for each event, and count this visitor's only (an earlier test's
    // visitor may be announced late too).
    const byName = (name: string) => global.events.filter((e) => e.event === name);
    const mine = () => byName('visitor.online').filter((e) => e.data.uid === me.uid);
    await global.until(
      () =>
        byName('agent.login').some((e) => e.data.agent_id === alice.agentId) &&
        byName('agent.logout').length > 0 &&
        mine().length > 0,
      'agent.login, agent.logout and this visitor’s visitor.online',
    );
    expect(byName('agent.login').map((e) => e.data)).toContainEqual({ agent_id: alice.agentId, nickname: 'Alice' });
    expect(mine().map((e) => e.data)).toEqual([{ uid: me.uid, nickname: expect.any(String) }]);
    expect(byName('agent.logout').map((e) => e.data)).toEqual([{ agent_id: alice.agentId }]);
  });
});

describe('no lost events on reconnect', () => {
  it('a client that drops and resumes with since receives exactly the missed events, then live ones', async () => {
    const me = await visitor(t);
    const start = await publish(t, me.channel, 'm0');
    const first = visitorSocket(t, me.token);
    const sub = first.channel(me.channel, start);
    for (const name of ['m1', 'm2', 'm3']) await publish(t, me.channel, name);
    await sub.until((es) => es.length === 3, 'm1..m3');
    expect(sub.names()).toEqual(['m1', 'm2', 'm3']);
    const lastSeen = sub.events.at(-1)?.position as string;
    await first.dispose();

    const missed = [];
    for (const name of ['m4', 'm5', 'm6']) missed.push(await publish(t, me.channel, name));
    const second = visitorSocket(t, me.token);
    const resumed = second.channel(me.channel, lastSeen);
    // Published while the resumed subscription switches from replay to live.
    for (const name of ['m7', 'm8', 'm9']) missed.push(await publish(t, me.channel, name));
    await resumed.until((es) => es.some((e) => e.event === 'm9'), 'm9');
    expect(resumed.names()).toEqual(['m4', 'm5', 'm6', 'm7', 'm8', 'm9']);
    expect(resumed.events.map((e) => e.position)).toEqual(missed);
  });

  it('ids are monotonic within a channel', async () => {
    const me = await visitor(t);
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await publish(t, me.channel, 'tick'));
    const numeric = ids.map((id) => id.split('-').map(Number) as [number, number]);
    for (let i = 1; i < numeric.length; i++) {
      const [ms, seq] = numeric[i] as [number, number];
      const [pms, pseq] = numeric[i - 1] as [number, number];
      expect(ms > pms || (ms === pms && seq > pseq)).toBe(true);
    }
  });

  it('an event id is unique across channels (a logout on agent-… and global-…); since takes the position or the id', async () => {
    const alice = await agent(t, 'alice');
    const socket = agentSocket(t, alice.token);
    const own = socket.channel(`agent-${alice.agentId}`);
    const global = socket.channel('global-demo');
    await eventually(() => own.cursor && global.cursor, 'both subscriptions started');
    await alice.client.json('/agent/logout', { method: 'POST' });
    const ends = [await own.waitFor('session.ended'), await global.waitFor('session.ended')];
    // The same end, at the same position, on two channels: two objects for a normalizing cache.
    expect(ends[0]?.position).toBe(ends[1]?.position);
    expect(ends[0]?.id).toBe(`agent-${alice.agentId}:${ends[0]?.position}`);
    expect(ends[1]?.id).toBe(`global-demo:${ends[1]?.position}`);

    const me = await visitor(t);
    const first = await publish(t, me.channel, 'one');
    const second = await publish(t, me.channel, 'two');
    const reader = visitorSocket(t, me.token);
    const byPosition = reader.channel(me.channel, first);
    const byId = reader.channel(me.channel, `${me.channel}:${first}`);
    for (const sub of [byPosition, byId]) {
      await sub.waitFor('two');
      expect(sub.events.map((e) => e.position)).toEqual([second]);
    }
    // An id of another channel is not a position of this one.
    const wrong = reader.channel(me.channel, `global-demo:${first}`);
    expect(await refusal(wrong)).toBe('BAD_USER_INPUT');
  });

  it('a since older than the history kept starts with history.gap, then the kept events', async () => {
    const me = await visitor(t);
    const ids = [];
    for (let i = 0; i < HISTORY_SIZE + 6; i++) ids.push(await publish(t, me.channel, `g${i}`));
    const kept = ids.slice(-HISTORY_SIZE);
    const socket = visitorSocket(t, me.token);

    const tooOld = socket.channel(me.channel, ids[0]);
    await tooOld.until((es) => es.length === HISTORY_SIZE + 1, 'the gap and the kept events');
    expect(tooOld.events[0]).toMatchObject({ event: 'history.gap', channel: me.channel, data: { since: ids[0] } });
    expect(tooOld.events.slice(1).map((e) => e.position)).toEqual(kept);

    // The newest dropped event itself is no gap: everything after it is still there.
    const newestDropped = ids[ids.length - HISTORY_SIZE - 1] as string;
    const justInTime = socket.channel(me.channel, newestDropped);
    await justInTime.until((es) => es.length === HISTORY_SIZE, 'the kept events');
    expect(justInTime.events.map((e) => e.position)).toEqual(kept);
  });

  it('a subscription without since starts with a subscribed event giving the position to resume from', async () => {
    const me = await visitor(t);
    const socket = visitorSocket(t, me.token);
    const sub = socket.channel(me.channel);
    await eventually(() => sub.cursor, 'the subscribed event');
    const first = await publish(t, me.channel, 'first');
    await sub.waitFor('first');
    expect(sub.names()).toEqual(['first']);
    expect(first > (sub.cursor as string)).toBe(true);
  });

  it('a client that saw nothing yet resumes from its subscribed position and misses nothing, with no gap', async () => {
    const me = await visitor(t);
    const first = visitorSocket(t, me.token);
    const sub = first.channel(me.channel);
    const cursor = await eventually(() => sub.cursor, 'the subscribed event');
    await first.dispose();

    const missed = [await publish(t, me.channel, 'while.down.1'), await publish(t, me.channel, 'while.down.2')];
    const resumed = visitorSocket(t, me.token).channel(me.channel, cursor);
    await resumed.until((es) => es.length === 2, 'the two missed events');
    expect(resumed.names()).toEqual(['while.down.1', 'while.down.2']);
    expect(resumed.events.map((e) => e.position)).toEqual(missed);
  });

  it('a since for a channel with no history left is a gap', async () => {
    const me = await visitor(t);
    const socket = visitorSocket(t, me.token);
    const sub = socket.channel(me.channel, '1000-0');
    await sub.waitFor('history.gap');
    expect(sub.events).toHaveLength(1);
    await publish(t, me.channel, 'after.gap');
    await sub.waitFor('after.gap');
  });
});

describe('subscriptions that end', () => {
  itWhen(
    Boolean(process.env.REDIS_URL),
    'REQUIRE_SERVICES',
    'a subscription to a quiet channel is released as soon as the client leaves (Redis: the instance unsubscribes)',
    'REDIS_URL is unset',
    async () => {
      const me = await visitor(t);
      const redis = new Redis(process.env.REDIS_URL as string);
      try {
        const topic = `${t.config.redisPrefix}events:${me.channel}`;
        const listening = async () => Number((await redis.pubsub('NUMSUB', topic))[1]) > 0;
        const completed = visitorSocket(t, me.token);
        const sub = completed.channel(me.channel);
        await eventually(listening, 'the instance listening');
        sub.unsubscribe(); // graphql-ws `complete`
        await eventually(async () => !(await listening()), 'the instance no longer listening after complete');

        const dropped = visitorSocket(t, me.token);
        dropped.channel(me.channel);
        await eventually(listening, 'the instance listening again');
        await dropped.dispose(); // the socket goes away
        await eventually(async () => !(await listening()), 'the instance no longer listening after close');
      } finally {
        redis.disconnect();
      }
    },
  );
});

describe('session end', () => {
  it("logout ends the Session's subscriptions with session.ended and closes its sockets with 4401", async () => {
    const alice = await agent(t, 'alice');
    const elsewhere = await agent(t, 'alice'); // another browser: its Session stays
    const socket = agentSocket(t, alice.token);
    const own = socket.channel(`agent-${alice.agentId}`);
    const global = socket.channel('global-demo');
    const otherSocket = agentSocket(t, elsewhere.token);
    const otherOwn = otherSocket.channel(`agent-${alice.agentId}`);
    await eventually(async () => {
      await publish(t, `agent-${alice.agentId}`, 'ready');
      await publish(t, 'global-demo', 'ready');
      return own.names().includes('ready') && global.names().includes('ready') && otherOwn.names().includes('ready');
    }, 'live subscriptions');

    const { body } = await alice.client.json('/agent/logout', { method: 'POST' });
    expect(body.code).toBe(0);

    expect(await own.ended).toBe('complete');
    expect(await global.ended).toBe('complete');
    for (const sub of [own, global]) {
      expect(sub.events.at(-1)).toMatchObject({ event: 'session.ended', data: { reason: 'logout' } });
    }
    expect((await socket.closed).code).toBe(4401);

    // The other Session neither ends nor sees this one's end.
    await publish(t, `agent-${alice.agentId}`, 'still.there');
    await otherOwn.waitFor('still.there');
    expect(otherOwn.names()).not.toContain('session.ended');
  });

  it('a Session that expired silently is noticed by the periodic check: session.ended (expired), then 4401', async () => {
    const alice = await agent(t, 'alice');
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] }); // the 30 s check, without waiting 30 s
    try {
      const socket = agentSocket(t, alice.token);
      const global = socket.channel('global-demo');
      await eventually(async () => {
        await publish(t, 'global-demo', 'ready');
        return global.names().includes('ready');
      }, 'a live subscription');
      // Idle expiry: the store drops the Session and tells nobody.
      await new Promise((resolve) => t.app.sessions.store.destroy(alice.token, resolve));
      vi.advanceTimersByTime(SESSION_REVALIDATE_MS);
      expect(await global.ended).toBe('complete');
      expect(global.events.at(-1)).toMatchObject({ event: 'session.ended', data: { reason: 'expired' } });
      expect((await socket.closed).code).toBe(4401);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a visitor socket is closed with 4403 once its token is revoked', async () => {
    const me = await visitor(t);
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      const socket = visitorSocket(t, me.token);
      await socket.acked;
      const { body } = await new HttpClient(t.url).graphql('mutation { revokeVisitorToken }', undefined, {
        authorization: `Bearer ${me.token}`,
      });
      expect(body.data).toEqual({ revokeVisitorToken: true });
      vi.advanceTimersByTime(SESSION_REVALIDATE_MS);
      expect((await socket.closed).code).toBe(4403);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('presence', () => {
  const stateOf = async (client: HttpClient) => {
    const { body } = await client.graphql<{ currentAgent: { state: string } }>('{ currentAgent { state } }');
    return body.data?.currentAgent.state;
  };
  const setState = async (client: HttpClient, state: string | null) => {
    const { body } = await client.graphql<{ setAgentState: { state: string } }>(
      'mutation($state: AgentState) { setAgentState(state: $state) { state } }',
      { state },
    );
    expect(body.errors).toBeUndefined();
    return body.data?.setAgentState.state;
  };

  it('online while a socket is connected, offline a grace period after the last closes, manual state overrides', async () => {
    const bob = await agent(t, 'bob');
    const connect = async () => {
      const socket = agentSocket(t, bob.token, 'acme-appkey');
      await socket.acked;
      return socket;
    };
    await eventually(async () => (await stateOf(bob.client)) === 'offline', 'bob offline to begin with');
    const marker = await publish(t, 'global-acme', 'test.marker');

    const tab1 = await connect();
    expect(await stateOf(bob.client)).toBe('online');
    const tab2 = await connect(); // a second tab: no change
    await tab2.dispose();
    await tab1.dispose();
    // A reload within the grace period: no flap. The grace timers of tab1 and tab2 fire before
    // reloaded's (same length, started earlier), and reloaded's is awaited below ("offline after
    // the grace period"): a flap would put offline + online into the exact sequence checked last.
    const reloaded = await connect();
    expect(await stateOf(bob.client)).toBe('online');

    expect(await setState(bob.client, 'busy')).toBe('busy');
    expect(await stateOf(bob.client)).toBe('busy');
    expect(await setState(bob.client, null)).toBe('online');

    await reloaded.dispose();
    await eventually(async () => (await stateOf(bob.client)) === 'offline', 'offline after the grace period');
    // A manual state chosen while away applies once connected again.
    expect(await setState(bob.client, 'away')).toBe('offline');
    const back = await connect();
    expect(await stateOf(bob.client)).toBe('away');
    expect(await setState(bob.client, 'online')).toBe('online');

    const watch = back.channel('global-acme', marker);
    await watch.until((es) => es.filter((e) => e.event === 'agent.state').length >= 6, 'six state changes');
    const changes = watch.events.filter((e) => e.event === 'agent.state').map((e) => e.data);
    expect(changes).toEqual([
      { agent_id: bob.agentId, state: 'online', reason: 'connected' },
      { agent_id: bob.agentId, state: 'busy', reason: 'manual' },
      { agent_id: bob.agentId, state: 'online', reason: 'manual' },
      { agent_id: bob.agentId, state: 'offline', reason: 'disconnected' },
      { agent_id: bob.agentId, state: 'away', reason: 'connected' },
      { agent_id: bob.agentId, state: 'online', reason: 'manual' },
    ]);
  });

  it('offline cannot be chosen, and ticket agents have no presence to set', async () => {
    const bob = await agent(t, 'bob');
    const { body } = await bob.client.graphql('mutation { setAgentState(state: offline) { state } }');
    expect(body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    const tom = await agent(t, 'tom');
    const refused = await tom.client.graphql('mutation { setAgentState(state: busy) { state } }');
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });

  it("a crashed instance's connections expire and their agent goes offline", async () => {
    const bob = await agent(t, 'bob');
    await eventually(async () => (await stateOf(bob.client)) === 'offline', 'bob offline to begin with');
    const { deps } = t.app;
    // A connection recorded by an instance that then died: nobody refreshes it.
    await deps.presence.touch(bob.agentId, 'crashed-instance-connection', deps.now() + 200);
    await deps.presence.settle(bob.agentId, 'acme', deps.now(), 'online');
    expect(await stateOf(bob.client)).toBe('online');
    // What every instance's heartbeat runs, once the connection's time is up (no sleep: the clock moves).
    await withClockAhead(t, 300, () => settleExpiredPresence(deps));
    expect(await stateOf(bob.client)).toBe('offline');
  });
});

describe('back-pressure', () => {
  it('a consumer that stops reading is closed with 1013 instead of buffering without bound', async () => {
    const { publishEvent } = await import('../../src/resolvers/channels.js');
    const me = await visitor(t);
    const { ws, opened, closed } = rawSocket(t.wsUrl);
    await opened;
    let received = 0;
    const acked = new Promise<void>((resolve) => {
      ws.on('message', (raw) => {
        const message = JSON.parse(String(raw));
        if (message.type === 'connection_ack') resolve();
        if (message.type === 'next') received++;
      });
    });
    ws.send(
      JSON.stringify({
        type: 'connection_init',
        payload: { appkey: 'demo-appkey', authorization: `Bearer ${me.token}` },
      }),
    );
    await acked;
    ws.send(
      JSON.stringify({
        id: '1',
        type: 'subscribe',
        payload: {
          query: 'subscription($n: String!) { channel(name: $n) { id event data } }',
          variables: { n: me.channel },
        },
      }),
    );
    await eventually(async () => {
      await publish(t, me.channel, 'warmup');
      return received > 0;
    }, 'a live subscription');

    ws.pause(); // stop reading: the kernel buffers fill, then the server's queue
    const big = 'x'.repeat(16 * 1024);
    const published = 1500;
    for (let i = 0; i < published; i++)
      await publishEvent(t.app.deps, { channel: me.channel, event: 'bulk', data: { i, big } });
    ws.resume();
    const { code } = await closed;
    expect(code).toBe(1013);
    expect(received).toBeLessThan(published);
  });
});

describe('an instance without INTERNAL_API_TOKEN, and its graceful shutdown', () => {
  let other: TestApp;
  beforeAll(async () => {
    other = await startTestApp({ env: { INTERNAL_API_TOKEN: '' } });
  });
  afterAll(() => other?.stop());

  it('POST /internal/events does not exist when INTERNAL_API_TOKEN is unset', async () => {
    const { status } = await new HttpClient(other.url).json('/internal/events', {
      method: 'POST',
      headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
      json: { channel: 'global-demo', event: 'x', data: {} },
    });
    expect(status).toBe(404);
  });

  it('app.stop() closes every socket with 1001', async () => {
    const alice = await agent(other, 'alice');
    const me = await visitor(other);
    const sockets = [agentSocket(other, alice.token), visitorSocket(other, me.token)];
    await Promise.all(sockets.map((s) => s.acked));
    sockets[0]?.channel('global-demo');
    sockets[1]?.channel(me.channel);
    await other.app.stop();
    for (const socket of sockets) expect((await socket.closed).code).toBe(1001);
  });
});

describeWhen(
  Boolean(process.env.REDIS_URL),
  'REQUIRE_SERVICES',
  'scale out: two instances on one Redis',
  'REDIS_URL is unset',
  () => {
    let a: TestApp;
    let b: TestApp;
    let stores: Awaited<ReturnType<typeof freshStores>>;
    beforeAll(async () => {
      stores = await freshStores();
      const env = { PRESENCE_GRACE_SECONDS: String(GRACE_SECONDS) };
      a = await startTestApp({ stores, env });
      b = await startTestApp({ stores, env });
    });
    afterAll(async () => {
      await a?.stop();
      await b?.stop();
      await stores?.drop();
    });

    it('an event published on one instance reaches subscribers on the other, and resumes there', async () => {
      const alice = await agent(a, 'alice');
      const onB = agentSocket(b, alice.token);
      const global = onB.channel('global-demo');
      const sent = new Set<string>();
      const first = await eventually(async () => {
        sent.add(await publish(a, 'global-demo', 'cross.instance', { from: 'a' }));
        return global.events.find((e) => sent.has(e.position))?.position;
      }, 'an event from instance a on instance b');

      // Resume on instance a from what was seen on instance b.
      const later = await publish(b, 'global-demo', 'after', { from: 'b' });
      const onA = agentSocket(a, alice.token);
      const resumed = onA.channel('global-demo', first);
      await resumed.waitFor('after');
      expect(resumed.events.map((e) => e.position)).toContain(later);
      expect(resumed.names()).not.toContain('history.gap');
    });

    it('presence counts the sockets of every instance', async () => {
      const bob = await agent(a, 'bob');
      const onA = agentSocket(a, bob.token, 'acme-appkey');
      await onA.acked;
      const onB = agentSocket(b, bob.token, 'acme-appkey');
      await onB.acked;
      const marker = await publish(a, 'global-acme', 'test.marker');
      await onA.dispose();
      const watch = onB.channel('global-acme', marker);
      // Instance a's grace period for the closed socket ends with a settle that forgets the
      // expired connection (the Redis store's set of bob's connections is down to b's): wait for
      // that, not for a fixed time. Bob is still online through instance b, so nothing is
      // published before the next marker.
      const redis = a.app.deps.redis as NonNullable<typeof a.app.deps.redis>;
      await eventually(
        async () => (await redis.zcard(`presence:conns:${bob.agentId}`)) === 1,
        "instance a's grace period to end",
      );
      const after = await publish(b, 'global-acme', 'test.marker');
      await watch.waitFor('test.marker', (e) => e.position === after);
      expect(watch.names()).not.toContain('agent.state'); // still online through instance b
      await onB.dispose();
    });
  },
);
