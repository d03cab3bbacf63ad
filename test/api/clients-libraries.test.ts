import { ApolloClient, gql, HttpLink, InMemoryCache, split } from '@apollo/client';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { getMainDefinition } from '@apollo/client/utilities';
import { cacheExchange, fetchExchange, subscriptionExchange, Client as UrqlClient } from '@urql/core';
import { createClient, type Client as WsClient } from 'graphql-ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { agentSession, HttpClient, visitorChannel, visitorToken } from '../support/clients.js';
import { INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';
import { eventually } from '../support/ws.js';

// Issue 14: the GraphQL clients teams already use work with their default settings, over HTTP
// and graphql-ws, as an agent (Session token header or cookie) and as a visitor (bearer).

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());
const sockets: WsClient[] = [];
afterEach(async () => {
  await Promise.all(sockets.splice(0).map((s) => s.dispose()));
});

interface Identity {
  name: string;
  /** HTTP headers carrying the identity. */
  headers: Record<string, string>;
  /** connection_init payload, and headers of the upgrade request (the cookie). */
  params: Record<string, string>;
  upgradeHeaders: Record<string, string>;
  channel: string;
  query: string;
  read: (data: Json) => unknown;
  expected: unknown;
  mutation: string;
  mutated: (data: Json) => unknown;
}

async function agentByToken(): Promise<Identity> {
  const { token } = await agentSession(t.url, 'alice');
  return {
    ...agentOps,
    name: 'agent (token header)',
    headers: { token },
    params: { appkey: 'demo-appkey', token },
    upgradeHeaders: {},
  };
}

async function agentByCookie(): Promise<Identity> {
  const { client } = await agentSession(t.url, 'alice');
  const cookie = [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  return {
    ...agentOps,
    name: 'agent (Session cookie)',
    headers: { cookie },
    params: { appkey: 'demo-appkey' },
    upgradeHeaders: { cookie },
  };
}

// biome-ignore lint/suspicious/noExplicitAny: GraphQL results are read field by field
type Json = any;

const agentOps = {
  channel: 'agent-a_alice',
  query: 'query Me { currentAgent { agentId } }',
  read: (data: Json) => data.currentAgent.agentId,
  expected: 'a_alice',
  mutation: 'mutation Busy { setAgentState(state: busy) { agentId } }',
  mutated: (data: Json) => typeof data.setAgentState.agentId,
};

async function visitorByBearer(): Promise<Identity> {
  const { token, uid } = await visitorToken(t.url);
  const authorization = `Bearer ${token}`;
  const channel = await visitorChannel(t.url, token);
  return {
    name: 'visitor (bearer)',
    headers: { authorization },
    params: { appkey: 'demo-appkey', authorization },
    upgradeHeaders: {},
    channel,
    query: 'query Boot { visitorBootstrap { visitor { uid } } }',
    read: (data: Json) => data.visitorBootstrap.visitor.uid,
    expected: uid,
    // Last, as it ends the identity.
    mutation: 'mutation Revoke { revokeVisitorToken }',
    mutated: (data: Json) => data.revokeVisitorToken,
  };
}

const identities = [
  { identity: 'agent (Session token header)', make: agentByToken },
  { identity: 'agent (Session cookie)', make: agentByCookie },
  { identity: 'visitor (bearer)', make: visitorByBearer },
];
const SUBSCRIPTION = 'subscription Feed($name: String!) { channel(name: $name) { id position event data } }';

function wsClient(identity: Identity) {
  class WithHeaders extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, { headers: identity.upgradeHeaders });
    }
  }
  const client = createClient({ url: t.wsUrl, connectionParams: identity.params, webSocketImpl: WithHeaders });
  sockets.push(client);
  return client;
}

async function publish(channel: string, n: number) {
  const { status } = await new HttpClient(t.url).json('/internal/events', {
    method: 'POST',
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
    json: { channel, event: 'test.client', data: { n } },
  });
  expect(status).toBe(202);
}

/** Publishes until the subscriber has seen one event (the first may precede its subscription). */
async function receiveOne(channel: string, events: { event: string }[]) {
  let n = 0;
  await eventually(async () => {
    if (events.some((e) => e.event === 'test.client')) return true;
    await publish(channel, n++);
    return false;
  }, `an event on ${channel}`);
}

const graphqlGets = () => t.logs.filter((l) => l.method === 'GET' && String(l.url).startsWith('/graphql?')).length;

describe.each(identities)('Apollo Client 4 (HttpLink + GraphQLWsLink), default settings, as $identity', ({ make }) => {
  it('runs a query, a subscription and a mutation', async () => {
    const identity = await make();
    const http = new HttpLink({ uri: `${t.url}/graphql`, headers: identity.headers });
    const link = split(
      ({ query }) => {
        const def = getMainDefinition(query);
        return def.kind === 'OperationDefinition' && def.operation === 'subscription';
      },
      new GraphQLWsLink(wsClient(identity)),
      http,
    );
    const apollo = new ApolloClient({ link, cache: new InMemoryCache() });

    const result = await apollo.query({ query: gql(identity.query), fetchPolicy: 'network-only' });
    expect(result.error, identity.name).toBeUndefined();
    expect(identity.read(result.data)).toBe(identity.expected);

    const events: { event: string }[] = [];
    const subscription = apollo
      .subscribe({ query: gql(SUBSCRIPTION), variables: { name: identity.channel } })
      .subscribe({ next: (r) => r.data && events.push((r.data as Json).channel) });
    await receiveOne(identity.channel, events);
    subscription.unsubscribe();

    const mutated = await apollo.mutate({ mutation: gql(identity.mutation) });
    expect(mutated.error, identity.name).toBeUndefined();
    expect(identity.mutated(mutated.data)).toBeTruthy();
    apollo.stop();
  });

  it("Apollo's GET of a query with its apollo-require-preflight header runs", async () => {
    const identity = await make();
    const before = graphqlGets();
    const apollo = new ApolloClient({
      link: new HttpLink({
        uri: `${t.url}/graphql`,
        useGETForQueries: true,
        headers: { ...identity.headers, 'apollo-require-preflight': 'true' },
      }),
      cache: new InMemoryCache(),
    });
    const result = await apollo.query({ query: gql(identity.query) });
    expect(identity.read(result.data)).toBe(identity.expected);
    await eventually(() => graphqlGets() > before, 'the GET in the request log'); // logged when the response ends
  });
});

describe.each(identities)('urql (@urql/core), default settings, as $identity', ({ make }) => {
  it('runs a query (as a GET without Content-Type), a subscription and a mutation', async () => {
    const identity = await make();
    const ws = wsClient(identity);
    const urql = new UrqlClient({
      url: `${t.url}/graphql`,
      fetchOptions: { headers: identity.headers },
      exchanges: [
        cacheExchange,
        fetchExchange,
        subscriptionExchange({
          forwardSubscription: (request) => ({
            subscribe: (sink) => ({ unsubscribe: ws.subscribe({ ...request, query: request.query ?? '' }, sink) }),
          }),
        }),
      ],
    });

    const before = graphqlGets();
    const result = await urql.query(identity.query, {}).toPromise();
    expect(result.error, identity.name).toBeUndefined();
    expect(identity.read(result.data)).toBe(identity.expected);
    await eventually(() => graphqlGets() === before + 1, 'the GET in the request log'); // urql's default: queries as GET

    const events: { event: string }[] = [];
    const subscription = urql
      .subscription(SUBSCRIPTION, { name: identity.channel })
      .subscribe((r) => r.data && events.push(r.data.channel));
    await receiveOne(identity.channel, events);
    subscription.unsubscribe();

    const mutated = await urql.mutation(identity.mutation, {}).toPromise();
    expect(mutated.error, identity.name).toBeUndefined();
    expect(identity.mutated(mutated.data)).toBeTruthy();
  });
});
