import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApolloClient, gql, InMemoryCache } from '@apollo/client';
import { Client as UrqlClient } from '@urql/core';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createParleyLink } from '../../client/apollo.js';
import { type ChannelEvent, createParleyClient, type Identity, type ParleyClient } from '../../client/index.js';
import { parleyExchange } from '../../client/urql.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { chatWindow, type WireMessage } from '../support/resume.js';
import { tcpProxy } from '../support/tcp-proxy.js';
import { freshStores, INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';
import { eventually } from '../support/ws.js';

// Issue 32, "Done when": the chat loop of a visitor and an agent, 100 messages each way, while
// the network under the clients is cut twice (a TCP proxy drops every connection) and the gateway
// restarts twice (stop, start on the same port and stores), messages still being sent while the
// clients are away; on both database modes. Each GraphQL client kind as documented — the
// first-party client on its own, Apollo Client 4 through createParleyLink, urql 6 through
// parleyExchange — shows every message once: none lost, none delivered twice. The application
// does what the docs say: reload the history on `onGap` (an embedded restart forgets the
// channels' history), log in again on `onIdentityGone` (it forgets the agent Sessions too).
// pusher-js, the fourth kind, runs the same loop in test/api/pusher-resume.test.ts.

const TOTAL = 100;
const CHANNEL_QUERY = `subscription Feed($name: String!) { channel(name: $name) { id event data } }`;

/** One channel followed by one client kind: every channel event it delivers, and its gap signals. */
type Follow = (
  parley: ParleyClient,
  channel: string,
  handlers: { onEvent(event: Pick<ChannelEvent, 'event' | 'data'>): void; onGap(): void },
) => () => void;

const parleyOnly: Follow = (parley, channel, handlers) => {
  const sub = parley.subscribe(channel, { onEvent: handlers.onEvent, onGap: handlers.onGap });
  return () => sub.unsubscribe();
};

const apollo: Follow = (parley, channel, handlers) => {
  const client = new ApolloClient({
    cache: new InMemoryCache(),
    link: createParleyLink({ client: parley, onGap: handlers.onGap }),
  });
  const sub = client.subscribe({ query: gql(CHANNEL_QUERY), variables: { name: channel } }).subscribe({
    next: (result) => {
      const event = (result.data as { channel?: Pick<ChannelEvent, 'event' | 'data'> } | undefined)?.channel;
      if (event) handlers.onEvent(event);
    },
  });
  return () => sub.unsubscribe();
};

const urql: Follow = (parley, channel, handlers) => {
  const client = new UrqlClient({
    url: 'http://127.0.0.1:1/graphql', // only subscriptions run here, all on the Parley exchange
    exchanges: [parleyExchange({ client: parley, onGap: handlers.onGap })],
  });
  const { unsubscribe } = client.subscription(CHANNEL_QUERY, { name: channel }).subscribe((result) => {
    const event = (result.data as { channel?: Pick<ChannelEvent, 'event' | 'data'> } | undefined)?.channel;
    if (event) handlers.onEvent(event);
  });
  return unsubscribe;
};

const parleys: ParleyClient[] = [];
afterEach(async () => {
  await Promise.all(parleys.splice(0).map((p) => p.close()));
});

describe.each([
  ['@parley/client', parleyOnly],
  ['Apollo Client 4 + createParleyLink', apollo],
  ['urql 6 + parleyExchange', urql],
] as const)('%s in a chat', (_name, follow) => {
  it(`${TOTAL} messages each way through two socket cuts and two restarts: 0 lost, 0 repeated`, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'parley-chat-resume-'));
    const stores = { ...(await freshStores()), pgliteDir: dir };
    // 200 messages in a few seconds: above the chat's per-sender burst (a budget tested elsewhere).
    const env = { CHAT_MESSAGE_BURST: '1000' };
    let server: TestApp = await startTestApp({ stores, env });
    const port = Number(new URL(server.url).port);
    const proxy = await tcpProxy(() => port);
    const wsAddress = `ws://127.0.0.1:${proxy.port}/graphql`;
    const http = () => new HttpClient(server.url);
    const stops: (() => void)[] = [];
    try {
      const { token: bearer } = await visitorToken(server.url);
      const visitorHeaders = { authorization: `Bearer ${bearer}` };
      const boot = await http().json<{ visitor: { channel: string; uid: string } }>('/visitor/data/get', {
        headers: visitorHeaders,
      });
      const visitorChannel = boot.body.data.visitor.channel;
      const visitorId = boot.body.data.visitor.uid;
      // The agent's REST calls and its real-time client have a Session each; an embedded restart
      // forgets both (REST answers code -1, the socket is closed 4401/4403: onIdentityGone).
      let agentToken = (await agentSession(server.url, 'alice')).token;
      let realtimeToken = (await agentSession(server.url, 'alice')).token;
      let relogins = 0;
      const asAgent = async <T>(request: () => Promise<{ body: { code: number; data: T } }>) => {
        const first = await request();
        if (first.body.code !== -1) return first;
        agentToken = (await agentSession(server.url, 'alice')).token;
        return request();
      };

      const visitorWindow = chatWindow();
      const agentWindow = chatWindow();
      const reloadVisitor = async () => {
        const page = await http().json<{ messages: WireMessage[] }>('/visitor/message/list?limit=100', {
          headers: visitorHeaders,
        });
        visitorWindow.merge(page.body.data.messages);
      };
      const reloadAgent = async () => {
        const page = await asAgent(() =>
          http().json<{ messages: WireMessage[] }>(`/agent/message/list?visitor_id=${visitorId}&limit=100`, {
            headers: { token: agentToken },
          }),
        );
        agentWindow.merge(page.body.data.messages);
      };

      const connected = new Map<ParleyClient, boolean>();
      const parleyFor = (identity: () => Identity, onIdentityGone?: () => Promise<void>) => {
        const parley: ParleyClient = createParleyClient({
          url: wsAddress,
          identity,
          webSocketImpl: WebSocket,
          onStatus: (status) => connected.set(parley, status.state === 'connected'),
          ...(onIdentityGone ? { onIdentityGone } : {}),
        });
        parleys.push(parley);
        return parley;
      };
      const visitorParley = parleyFor(() => ({ appkey: 'demo-appkey', authorization: `Bearer ${bearer}` }));
      const agentParley = parleyFor(
        () => ({ appkey: 'demo-appkey', token: realtimeToken }),
        async () => {
          relogins += 1;
          realtimeToken = (await agentSession(server.url, 'alice')).token;
        },
      );

      const probes = { visitor: 0, agent: 0 };
      const gaps = { visitor: 0, agent: 0 };
      const feed =
        (side: 'visitor' | 'agent', window: ReturnType<typeof chatWindow>) =>
        (event: Pick<ChannelEvent, 'event' | 'data'>) => {
          if (event.event === 'message.created') window.live((event.data as { message: WireMessage }).message);
          if (event.event === 'test.ready') probes[side] += 1;
        };
      // "Reload your state" on a gap; a reload cut short by the next restart is done at the next gap.
      const onGap = (side: 'visitor' | 'agent', reload: () => Promise<void>) => () => {
        gaps[side] += 1;
        void reload().catch(() => {});
      };
      stops.push(
        follow(visitorParley, visitorChannel, {
          onEvent: feed('visitor', visitorWindow),
          onGap: onGap('visitor', reloadVisitor),
        }),
        follow(agentParley, 'agent-a_alice', {
          onEvent: feed('agent', agentWindow),
          onGap: onGap('agent', reloadAgent),
        }),
      );
      // Live before the first message: a subscription without `since` starts when it is made.
      for (const [side, channel] of [
        ['visitor', visitorChannel],
        ['agent', 'agent-a_alice'],
      ] as const) {
        await eventually(
          async () => {
            if (probes[side] > 0) return true;
            await http().json('/internal/events', {
              method: 'POST',
              headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
              json: { channel, event: 'test.ready', data: {} },
            });
            await new Promise((r) => setTimeout(r, 100));
            return probes[side] > 0;
          },
          `${side} feed live`,
          20_000,
        );
      }

      const assigned = await http().json<{ state: string }>('/visitor/chat/assign', {
        method: 'POST',
        form: {},
        headers: visitorHeaders,
      });
      if (assigned.body.data.state === 'queued') {
        const claimed = await asAgent(() =>
          http().json('/agent/chat/claim', {
            method: 'POST',
            form: { visitor_id: visitorId },
            headers: { token: agentToken },
          }),
        );
        expect(claimed.body.code).toBe(0);
      }

      const send = async (n: number) => {
        const [fromVisitor, fromAgent] = await Promise.all([
          http().json('/visitor/message/send', {
            method: 'POST',
            form: { client_msg_id: `v-${n}`, content: `v${n}` },
            headers: visitorHeaders,
          }),
          asAgent(() =>
            http().json('/agent/message/send', {
              method: 'POST',
              form: { visitor_id: visitorId, client_msg_id: `a-${n}`, content: `a${n}` },
              headers: { token: agentToken },
            }),
          ),
        ]);
        expect([fromVisitor.body.code, fromAgent.body.code]).toEqual([0, 0]);
      };
      // Messages keep flowing while the clients are away: the next ones are sent at once.
      const restart = async () => {
        await server.app.stop();
        server = await startTestApp({ stores, env: { ...env, PORT: String(port) } });
      };
      for (let n = 0; n < TOTAL; n++) {
        if (n === 20 || n === 60) {
          await eventually(
            () => [visitorParley, agentParley].every((p) => connected.get(p)),
            'both connected before the cut',
            30_000,
          );
          expect(proxy.cut(1000)).toBeGreaterThanOrEqual(2);
        }
        if (n === 40 || n === 80) await restart();
        await send(n);
      }

      const all = (prefix: string) => Array.from({ length: TOTAL }, (_, n) => `${prefix}${n}`);
      await eventually(
        () => visitorWindow.contents('agent').length === TOTAL && agentWindow.contents('visitor').length === TOTAL,
        'every message shown',
        60_000,
      ).catch((error) => {
        throw new Error(
          `${error.message}: ${JSON.stringify({ relogins, gaps, shown: [visitorWindow.contents('agent').length, agentWindow.contents('visitor').length] })}`,
        );
      });
      expect(visitorWindow.contents('agent')).toEqual(all('a'));
      expect(agentWindow.contents('visitor')).toEqual(all('v'));
      expect([visitorWindow.repeatedLive(), agentWindow.repeatedLive()]).toEqual([0, 0]);
      if (stores.redisUrl) {
        // Sessions and channel histories live in Redis: the same identity resumes, no gap.
        expect(relogins).toBe(0);
        expect(gaps).toEqual({ visitor: 0, agent: 0 });
      } else {
        // The embedded store forgets Sessions at each restart: the client logs in again.
        expect(relogins).toBeGreaterThanOrEqual(2);
      }
    } finally {
      for (const stop of stops) stop();
      await Promise.all(parleys.splice(0).map((p) => p.close()));
      await server.app.stop();
      await proxy.close();
      await stores.drop();
      await rm(dir, { recursive: true, force: true });
    }
  }, 240_000);
});
