import { ApolloClient, gql, HttpLink, InMemoryCache, split } from '@apollo/client';
import { getMainDefinition } from '@apollo/client/utilities';
import { cacheExchange, fetchExchange, Client as UrqlClient } from '@urql/core';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createParleyLink } from '../../client/apollo.js';
import { type ChannelEvent, createParleyClient, type Identity, type ParleyClient } from '../../client/index.js';
import { channelOperation } from '../../client/operation.js';
import { parleyExchange } from '../../client/urql.js';
import { agentSession, HttpClient, visitorChannel, visitorToken } from '../support/clients.js';
import { cutNetwork, openSockets, publishCount, RecordedWebSocket, range } from '../support/resume.js';
import { freshStores, INTERNAL_TOKEN, sharedTestApp, startTestApp, type TestApp } from '../support/test-app.js';
import { eventually } from '../support/ws.js';

// Issue 32: Apollo Client and urql, through the first-party link and exchange, lose nothing and
// repeat nothing across socket cuts and server restarts, as an agent and as a visitor.

const CHANNEL = `subscription Feed($name: String!) { channel(name: $name) { id event data } }`;

/** A subscription as an application built on one GraphQL library sees it. */
interface LibraryFeed {
  counts(): number[];
  /** How many `test.ready` probes arrived. */
  probes(): number;
  gaps: ChannelEvent[];
  errors: unknown[];
  stop(): void;
}

type Library = (url: string, parley: ParleyClient, channel: string, headers: Record<string, string>) => LibraryFeed;

function feedOf(results: { data?: unknown }[]) {
  const events = () => results.map((r) => (r.data as { channel: { event: string; data: { n: number } } }).channel);
  return {
    counts: () =>
      events()
        .filter((c) => c.event === 'test.count')
        .map((c) => c.data.n),
    probes: () => events().filter((c) => c.event === 'test.ready').length,
  };
}

/**
 * Waits until the subscription is live: a library hides the `subscribed` marker, so probes are
 * published until one arrives (a subscription without `since` starts at its subscription).
 */
async function live(url: string, channel: string, feed: LibraryFeed) {
  const before = feed.probes();
  await eventually(
    async () => {
      if (feed.probes() > before) return true;
      const { status } = await new HttpClient(url).json('/internal/events', {
        method: 'POST',
        headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
        json: { channel, event: 'test.ready', data: {} },
      });
      expect(status).toBe(202);
      await new Promise((r) => setTimeout(r, 100));
      return feed.probes() > before;
    },
    `${channel} live`,
    20_000,
  );
}

const apollo: Library = (url, parley, channel, headers) => {
  const gaps: ChannelEvent[] = [];
  const errors: unknown[] = [];
  const results: { data?: unknown }[] = [];
  const isSubscription = ({ query }: { query: Parameters<typeof getMainDefinition>[0] }) => {
    const definition = getMainDefinition(query);
    return definition.kind === 'OperationDefinition' && definition.operation === 'subscription';
  };
  const client = new ApolloClient({
    cache: new InMemoryCache(),
    link: split(
      isSubscription,
      createParleyLink({ client: parley, onGap: (e) => gaps.push(e) }),
      new HttpLink({ uri: `${url}/graphql`, headers }),
    ),
  });
  const subscription = client.subscribe({ query: gql(CHANNEL), variables: { name: channel } }).subscribe({
    next: (r) => (r.error ? errors.push(r.error) : results.push(r)),
    error: (e) => errors.push(e),
  });
  return { ...feedOf(results), gaps, errors, stop: () => subscription.unsubscribe() };
};

const urql: Library = (url, parley, channel, headers) => {
  const gaps: ChannelEvent[] = [];
  const errors: unknown[] = [];
  const results: { data?: unknown }[] = [];
  const client = new UrqlClient({
    url: `${url}/graphql`,
    fetchOptions: { headers },
    exchanges: [cacheExchange, parleyExchange({ client: parley, onGap: (e) => gaps.push(e) }), fetchExchange],
  });
  const { unsubscribe } = client.subscription(CHANNEL, { name: channel }).subscribe((r) => {
    if (r.error) errors.push(r.error);
    else results.push(r);
  });
  return { ...feedOf(results), gaps, errors, stop: unsubscribe };
};

const parleys: ParleyClient[] = [];
const apps: TestApp[] = [];
afterEach(async () => {
  await Promise.all(parleys.splice(0).map((p) => p.close()));
});
afterAll(async () => {
  await Promise.all(apps.map((a) => a.stop()));
});

function parleyClient(url: string, identity: () => Identity, onIdentityGone?: () => Promise<void>) {
  const parley = createParleyClient({
    url,
    identity,
    webSocketImpl: RecordedWebSocket,
    initialRetryDelayMs: 50,
    maxRetryDelayMs: 400,
    ...(onIdentityGone ? { onIdentityGone } : {}),
  });
  parleys.push(parley);
  return parley;
}

const TOTAL = 100;

// The socket-cut tests of both libraries share one gateway: each subscribes afresh (no `since`),
// so it sees only the events published after its subscription, and its feeds count only those.
const gatewayForCuts = sharedTestApp(apps);

describe.each([
  ['Apollo Client 4 + createParleyLink', apollo],
  ['urql 6 + parleyExchange', urql],
] as const)('%s', (_name, library) => {
  it(`${TOTAL} events each way (agent and visitor channels) through two socket cuts: 0 lost, 0 repeated`, async () => {
    const t = await gatewayForCuts();
    const { token } = await agentSession(t.url, 'alice');
    const { token: bearer } = await visitorToken(t.url);
    const visitor = await visitorChannel(t.url, bearer);
    const agentFeed = library(
      t.url,
      parleyClient(t.wsUrl, () => ({ appkey: 'demo-appkey', token })),
      'agent-a_alice',
      { token },
    );
    const visitorFeed = library(
      t.url,
      parleyClient(t.wsUrl, () => ({ appkey: 'demo-appkey', authorization: `Bearer ${bearer}` })),
      visitor,
      { authorization: `Bearer ${bearer}` },
    );
    await live(t.url, 'agent-a_alice', agentFeed);
    await live(t.url, visitor, visitorFeed);

    for (const n of range(0, TOTAL)) {
      await Promise.all([publishCount(t.url, 'agent-a_alice', n), publishCount(t.url, visitor, n)]);
      if (n === 30 || n === 65) {
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
    for (const feed of [agentFeed, visitorFeed]) {
      expect(feed.gaps).toEqual([]);
      expect(feed.errors).toEqual([]);
      feed.stop();
    }
  }, 120_000);

  it('two server restarts under the subscription: every event once, the identity refreshed when the server forgot it', async () => {
    const stores = await freshStores();
    let server = await startTestApp({ stores });
    apps.push(server);
    const port = new URL(server.url).port;
    let token = (await agentSession(server.url, 'alice')).token;
    let refreshes = 0;
    const parley = parleyClient(
      server.wsUrl,
      () => ({ appkey: 'demo-appkey', token }),
      async () => {
        // Embedded stores forget Sessions on restart (4403): log in again.
        refreshes += 1;
        token = (await agentSession(server.url, 'alice')).token;
      },
    );
    const feed = library(server.url, parley, 'agent-a_alice', { token });
    await live(server.url, 'agent-a_alice', feed);

    for (const round of [0, 1, 2]) {
      for (const n of range(round * 10, round * 10 + 10)) await publishCount(server.url, 'agent-a_alice', n);
      await eventually(() => feed.counts().length === round * 10 + 10, `events of round ${round}`, 20_000);
      if (round === 2) break;
      await server.app.stop();
      apps.splice(apps.indexOf(server), 1);
      server = await startTestApp({ stores, env: { PORT: port } });
      apps.push(server);
      // Resubscribed (and, after an embedded restart, logged in again) before the next round.
      await live(server.url, 'agent-a_alice', feed);
    }
    expect(feed.counts()).toEqual(range(0, 30));
    expect(feed.errors).toEqual([]);
    expect(refreshes).toBe(stores.redisUrl ? 0 : 2);
    feed.stop();
    await server.stop();
    apps.splice(apps.indexOf(server), 1);
    await stores.drop();
  }, 120_000);
});

describe('the operation a library sends becomes resumable', () => {
  it('`since` is bound to a variable and `position` and `event` are selected, the rest kept as written', () => {
    const prepared = channelOperation('subscription S($n: String!) { feed: channel(name: $n) { id data } }', {
      n: 'agent-a_alice',
    });
    expect(prepared).toMatchObject({ channel: 'agent-a_alice', responseKey: 'feed', sinceVariable: 'parleySince' });
    expect(prepared?.query.replace(/\s+/g, ' ')).toBe(
      'subscription S($n: String!, $parleySince: String) { feed: channel(name: $n, since: $parleySince) { id data position event } }',
    );
  });

  it("an operation's own `since` variable is kept and starts the first subscription", () => {
    const prepared = channelOperation(
      'subscription S($name: String!, $from: String) { channel(name: $name, since: $from) { position event } }',
      { name: 'global-demo', from: '5-1' },
    );
    expect(prepared).toMatchObject({ channel: 'global-demo', sinceVariable: 'from', variables: { from: '5-1' } });
  });

  it('queries, mutations and other subscriptions are not channel operations', () => {
    expect(channelOperation('query { __typename }', {})).toBeUndefined();
    expect(channelOperation('subscription { other }', {})).toBeUndefined();
  });
});
