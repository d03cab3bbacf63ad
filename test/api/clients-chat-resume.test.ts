import { ApolloClient, gql, InMemoryCache } from '@apollo/client';
import { Client as UrqlClient } from '@urql/core';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createParleyLink } from '../../client/apollo.js';
import { type ChannelEvent, createParleyClient, type Identity, type ParleyClient } from '../../client/index.js';
import { parleyExchange } from '../../client/urql.js';
import { type Follow as ChatFollow, type ChatParties, runChatLoop } from '../support/chat-loop.js';
import type { WireMessage } from '../support/resume.js';
import { INTERNAL_TOKEN } from '../support/test-app.js';
import { eventually } from '../support/ws.js';

// Issue 32, "Done when": the chat loop of a visitor and an agent, 100 messages each way, while
// the network under the clients is cut twice (a TCP proxy drops every connection) and the gateway
// restarts twice (stop, start on the same port and stores), messages still being sent while the
// clients are away; on both database modes. Each GraphQL client kind as documented — the
// first-party client on its own, Apollo Client 4 through createParleyLink, urql 6 through
// parleyExchange — shows every message once: none lost, none delivered twice. The application
// does what the docs say: reload the history on `onGap` (an embedded restart forgets the
// channels' history), log in again on `onIdentityGone` (it forgets the agent Sessions too). The
// three kinds run side by side in one loop, each with its own clients and windows.
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

/**
 * The application of one client kind in the loop: a visitor and an agent client, each channel
 * followed through `follow`, the history reloaded on each gap.
 */
const application =
  (follow: Follow): ChatFollow =>
  async (chat) => {
    const connected = new Map<ParleyClient, boolean>();
    const own: ParleyClient[] = [];
    const parleyFor = (identity: () => Identity, onIdentityGone?: () => Promise<void>) => {
      const parley: ParleyClient = createParleyClient({
        url: chat.wsAddress,
        identity,
        webSocketImpl: WebSocket,
        // A short backoff (documented options) so the clients do not sit out seconds of a doubled
        // delay after each restart; the recovery they show is the same.
        initialRetryDelayMs: 50,
        maxRetryDelayMs: 400,
        onStatus: (status) => connected.set(parley, status.state === 'connected'),
        ...(onIdentityGone ? { onIdentityGone } : {}),
      });
      parleys.push(parley);
      own.push(parley);
      return parley;
    };
    const visitorParley = parleyFor(() => ({ appkey: 'demo-appkey', ...chat.visitorHeaders }));
    const agentParley = parleyFor(
      () => ({ appkey: 'demo-appkey', token: chat.realtime.token() }),
      chat.realtime.relogin,
    );

    const probes = { visitor: 0, agent: 0 };
    const gaps = { visitor: 0, agent: 0 };
    const feed =
      (side: 'visitor' | 'agent', window: ChatParties['visitorWindow']) =>
      (event: Pick<ChannelEvent, 'event' | 'data'>) => {
        if (event.event === 'message.created') window.live((event.data as { message: WireMessage }).message);
        if (event.event === 'test.ready') probes[side] += 1;
      };
    // "Reload your state" on a gap; a reload cut short by the next restart is done at the next gap.
    const onGap = (side: 'visitor' | 'agent', reload: () => Promise<void>) => () => {
      gaps[side] += 1;
      void reload().catch(() => {});
    };
    const stops = [
      follow(visitorParley, chat.visitorChannel, {
        onEvent: feed('visitor', chat.visitorWindow),
        onGap: onGap('visitor', chat.reloadVisitor),
      }),
      follow(agentParley, 'agent-a_alice', {
        onEvent: feed('agent', chat.agentWindow),
        onGap: onGap('agent', chat.reloadAgent),
      }),
    ];
    // Live before the first message: a subscription without `since` starts when it is made.
    for (const [side, channel] of [
      ['visitor', chat.visitorChannel],
      ['agent', 'agent-a_alice'],
    ] as const) {
      await eventually(
        async () => {
          if (probes[side] > 0) return true;
          await chat.http().json('/internal/events', {
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
    return {
      connected: () => [visitorParley, agentParley].every((p) => connected.get(p)),
      diagnostics: () => ({ gaps }),
      // Channel histories live in Redis: the same identity resumes, no gap.
      afterwards: (redis) => {
        if (redis) expect(gaps).toEqual({ visitor: 0, agent: 0 });
      },
      stop: async () => {
        for (const stop of stops) stop();
        await Promise.all(own.map((p) => p.close()));
      },
    };
  };

// The three kinds follow one loop side by side (one gateway, one conversation, the same cuts and
// restarts), each with its own clients, windows and agent Session, each judged on its own: a
// loop per kind proved nothing more, and cost three gateways, three times 200 sends and six
// restarts.
describe('the GraphQL client kinds in a chat', () => {
  it(`${TOTAL} messages each way through two socket cuts and two restarts: 0 lost, 0 repeated, for @parley/client, Apollo Client 4 + createParleyLink and urql 6 + parleyExchange`, {
    timeout: 240_000,
  }, async () => {
    await runChatLoop(
      { total: TOTAL, dirPrefix: 'parley-chat-resume-', shownWithinMs: 60_000 },
      {
        '@parley/client': application(parleyOnly),
        'Apollo Client 4 + createParleyLink': application(apollo),
        'urql 6 + parleyExchange': application(urql),
      },
    );
  });
});
