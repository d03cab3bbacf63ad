import { afterAll, afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { type ChannelEvent, createParleyClient, type Identity, type ParleyClient } from '../../client/index.js';
import { agentSession, visitorChannel, visitorToken } from '../support/clients.js';
import { cutNetwork, openSockets, publishCount, RecordedWebSocket, range, recorded } from '../support/resume.js';
import { freshStores, sharedTestApp, startTestApp, type TestApp, type TestStores } from '../support/test-app.js';
import { eventually } from '../support/ws.js';

// Issue 14, "Our own client": socket kills and a server restart under client/ and every event
// arrives exactly once; the identity is refreshed when the server says it is gone.

const clients: ParleyClient[] = [];
const apps: TestApp[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
});
afterAll(async () => {
  await Promise.all(apps.map((a) => a.stop()));
});

/** A channel's deliveries as the application sees them. */
function recorder() {
  const events: ChannelEvent[] = [];
  const gaps: ChannelEvent[] = [];
  const errors: unknown[] = [];
  return {
    events,
    gaps,
    errors,
    handlers: {
      onEvent: (e: ChannelEvent) => events.push(e),
      onGap: (e: ChannelEvent) => gaps.push(e),
      onError: (e: unknown) => errors.push(e),
    },
    /** The test's own events (the gateway may publish others on these channels, e.g. assignments). */
    counts: () => events.filter((e) => e.event === 'test.count').map((e) => (e.data as { n: number }).n),
  };
}

function client(
  url: string,
  identity: () => Identity | Promise<Identity>,
  extra: { onIdentityGone?: () => Promise<void> } = {},
) {
  const states: string[] = [];
  const c = createParleyClient({
    url,
    identity,
    webSocketImpl: RecordedWebSocket,
    initialRetryDelayMs: 50,
    maxRetryDelayMs: 400,
    onStatus: (s) => states.push(s.state),
    ...extra,
  });
  clients.push(c);
  return { c, states };
}

// The socket-kill and keep-alive tests share one gateway with the default settings: each makes
// its own clients and counts only what it subscribed to after they connected.
const gatewayWithDefaults = sharedTestApp(apps);

describe('client/: resume after socket drops, exactly once', () => {
  it('an agent (Session token) and a visitor (bearer) see every event once across repeated socket kills', async () => {
    const t = await gatewayWithDefaults();
    const { token } = await agentSession(t.url, 'alice');
    const { token: bearer } = await visitorToken(t.url);
    const ownChannel = await visitorChannel(t.url, bearer);

    const agentClient = client(t.wsUrl, () => ({ appkey: 'demo-appkey', token }));
    const visitorClient = client(t.wsUrl, () => ({ appkey: 'demo-appkey', authorization: `Bearer ${bearer}` }));
    const agentFeed = recorder();
    const globalFeed = recorder();
    const visitorFeed = recorder();
    const subs = [
      agentClient.c.subscribe('agent-a_alice', agentFeed.handlers),
      agentClient.c.subscribe('global-demo', globalFeed.handlers),
      visitorClient.c.subscribe(ownChannel, visitorFeed.handlers),
    ];
    // The `subscribed` marker is hidden but gives each channel its starting position.
    await eventually(() => subs.every((s) => s.position() !== undefined), 'every channel subscribed');

    const TOTAL = 40;
    for (const n of range(0, TOTAL)) {
      await publishCount(t.url, 'agent-a_alice', n);
      await publishCount(t.url, ownChannel, n);
      if (n % 8 === 3) {
        // Both clients back on a socket, then cut: the next events are published while they are down.
        await eventually(() => openSockets() === 2, 'reconnected');
        expect(cutNetwork()).toBe(2);
      }
    }
    await eventually(
      () => agentFeed.counts().length >= TOTAL && visitorFeed.counts().length >= TOTAL,
      'every event delivered',
      20_000,
    );
    expect(agentFeed.counts()).toEqual(range(0, TOTAL));
    expect(visitorFeed.counts()).toEqual(range(0, TOTAL));
    for (const feed of [agentFeed, visitorFeed, globalFeed]) {
      expect(feed.events.some((e) => e.event === 'subscribed')).toBe(false);
      expect(feed.gaps).toEqual([]);
      expect(feed.errors).toEqual([]);
    }
    expect(agentClient.states.filter((s) => s === 'reconnecting').length).toBeGreaterThanOrEqual(5);
  }, 120_000);

  it('history.gap reaches the application as a "reload your state" signal', async () => {
    const t = await startTestApp({ env: { CHANNEL_HISTORY_SIZE: '10' } });
    apps.push(t);
    const { token } = await agentSession(t.url, 'alice');
    const feed = recorder();
    const { c } = client(t.wsUrl, () => ({ appkey: 'demo-appkey', token }));
    const sub = c.subscribe('agent-a_alice', feed.handlers);
    await eventually(() => sub.position() !== undefined, 'subscribed');
    await publishCount(t.url, 'agent-a_alice', 0);
    await eventually(() => feed.counts().length === 1, 'first event');
    const position = sub.position();
    sub.unsubscribe();
    for (const n of range(1, 16)) await publishCount(t.url, 'agent-a_alice', n);
    const resumed = recorder();
    c.subscribe('agent-a_alice', resumed.handlers, { since: position });
    await eventually(() => resumed.counts().length === 10, 'the kept events');
    expect(resumed.gaps).toHaveLength(1);
    expect(resumed.counts()).toEqual(range(6, 16));
  });
});

describe('client/: keep-alive against the gateway', () => {
  it("the gateway answers the client's pings: the connection is kept", async () => {
    const t = await gatewayWithDefaults();
    const { token } = await agentSession(t.url, 'alice');
    const states: string[] = [];
    const c = createParleyClient({
      url: t.wsUrl,
      identity: () => ({ appkey: 'demo-appkey', token }),
      webSocketImpl: RecordedWebSocket,
      keepAliveMs: 100,
      onStatus: (s) => states.push(s.state),
    });
    clients.push(c);
    const sub = c.subscribe('agent-a_alice', { onEvent: () => {} });
    await eventually(() => sub.position() !== undefined, 'subscribed');
    const before = recorded.pongs;
    await eventually(() => recorded.pongs >= before + 5, 'five pongs');
    expect(states).toEqual(['connecting', 'connected']);
  }, 120_000);
});

describe('client/: a server restart under the client', () => {
  it('reconnects after refused connections, refreshes the identity when told it is gone, and loses nothing', async () => {
    const stores: TestStores = await freshStores();
    const first = await startTestApp({ stores });
    const port = new URL(first.url).port;
    let server: TestApp | undefined = first;
    const redis = Boolean(stores.redisUrl);

    let token = (await agentSession(first.url, 'alice')).token;
    let refreshes = 0;
    const feed = recorder();
    const { c, states } = client(first.wsUrl, () => ({ appkey: 'demo-appkey', token }), {
      // Embedded stores forget Sessions on restart: the server closes with 4403 and we log in again.
      onIdentityGone: async () => {
        refreshes += 1;
        if (!server) throw new Error('no server to log in to');
        token = (await agentSession(server.url, 'alice')).token;
      },
    });
    const sub = c.subscribe('agent-a_alice', feed.handlers);
    await eventually(() => sub.position() !== undefined, 'subscribed');
    for (const n of range(0, 10)) await publishCount(first.url, 'agent-a_alice', n);
    await eventually(() => feed.counts().length === 10, 'events before the restart');

    await first.app.stop();
    server = undefined;
    // The client keeps trying while nothing listens (graphql-ws's own retry would give up here).
    await eventually(() => states.filter((s) => s === 'reconnecting').length >= 3, 'refused reconnects', 10_000);
    server = await startTestApp({ stores, env: { PORT: port } });
    apps.push(server);
    const restarted = server;
    for (const n of range(10, 20)) await publishCount(restarted.url, 'agent-a_alice', n);
    await eventually(() => feed.counts().length >= 20, 'events after the restart', 20_000);
    expect(feed.counts()).toEqual(range(0, 20));
    expect(feed.errors).toEqual([]);
    if (redis) {
      // Sessions and history live in Redis: the same identity resumes, with nothing dropped.
      expect(refreshes).toBe(0);
      expect(feed.gaps).toEqual([]);
    } else {
      // The embedded restart forgot both: a new login, and a gap to reload state from.
      expect(refreshes).toBe(1);
      expect(feed.gaps.length).toBeLessThanOrEqual(1);
    }
    await c.close();
    await restarted.stop();
    apps.splice(apps.indexOf(restarted), 1);
    await stores.drop();
  }, 120_000);
});

describe('client/: a connection that died silently', () => {
  /** A graphql-transport-ws server that acknowledges, then answers pings only when told to. */
  async function silentServer(answerPings: boolean) {
    const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise((resolve) => server.once('listening', resolve));
    let connections = 0;
    let pongs = 0;
    server.on('connection', (socket) => {
      connections += 1;
      socket.on('message', (raw) => {
        const message = JSON.parse(String(raw)) as { type: string };
        if (message.type === 'connection_init') socket.send(JSON.stringify({ type: 'connection_ack' }));
        if (message.type === 'ping' && answerPings) {
          pongs += 1;
          socket.send(JSON.stringify({ type: 'pong' }));
        }
      });
    });
    const { port } = server.address() as { port: number };
    return {
      url: `ws://127.0.0.1:${port}/graphql`,
      connections: () => connections,
      pongs: () => pongs,
      close: () => new Promise((resolve) => server.close(resolve)),
    };
  }

  it('is noticed by an unanswered ping and replaced by a new connection', async () => {
    const server = await silentServer(false);
    const states: string[] = [];
    const c = createParleyClient({
      url: server.url,
      identity: () => ({ appkey: 'demo-appkey' }),
      webSocketImpl: WebSocket,
      keepAliveMs: 150,
      initialRetryDelayMs: 20,
      onStatus: (s) => states.push(s.state === 'reconnecting' ? `reconnecting:${s.close?.code}` : s.state),
    });
    clients.push(c);
    c.subscribe('agent-a_alice', { onEvent: () => {} });
    await eventually(() => server.connections() >= 2, 'a second connection');
    expect(states).toContain('reconnecting:4408');
    await c.close();
    await server.close();
  });

  it('a connection whose pongs come back is kept', async () => {
    const server = await silentServer(true);
    const c = createParleyClient({
      url: server.url,
      identity: () => ({ appkey: 'demo-appkey' }),
      webSocketImpl: WebSocket,
      keepAliveMs: 100,
    });
    clients.push(c);
    c.subscribe('agent-a_alice', { onEvent: () => {} });
    await eventually(() => server.pongs() >= 4, 'four pings answered');
    expect(server.connections()).toBe(1);
    await c.close();
    await server.close();
  });
});
