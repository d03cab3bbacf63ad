import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { agentSession, HttpClient, visitorToken } from './clients.js';
import { chatWindow, type WireMessage } from './resume.js';
import { tcpProxy } from './tcp-proxy.js';
import { freshStores, startTestApp, type TestApp } from './test-app.js';
import { eventually } from './ws.js';

/**
 * The chat loop every real-time client kind is judged by (issue 32, "Done when"): a visitor and
 * the agent alice exchange `total` messages each way over REST while the network under their
 * real-time clients is cut twice (a TCP proxy drops every connection) and the gateway restarts
 * twice (stop, start on the same port and stores), messages still being sent while the clients
 * are away. Each window must then show every message once: none lost, none delivered twice live.
 *
 * The client kind under test is set up by `follow`, which gets what the application has — the
 * proxied socket address, the visitor's headers and channel, an agent identity of its own for
 * the real-time client (logged in again when a restart forgets it), the two windows and their
 * history reloads — and answers whether its clients are connected. Several kinds can follow one
 * loop side by side (a record of named `follow`s): each gets its own windows and real-time
 * identity and is judged on its own, through the same cuts, restarts and messages.
 */
export interface ChatParties {
  wsAddress: string;
  /** The gateway's address now (the same port after each restart). */
  url(): string;
  http(): HttpClient;
  visitorHeaders: { authorization: string };
  visitorChannel: string;
  /** The real-time client's agent Session: its token now, and a new login when it is gone. */
  realtime: { token(): string; relogin(): Promise<void> };
  visitorWindow: ReturnType<typeof chatWindow>;
  agentWindow: ReturnType<typeof chatWindow>;
  reloadVisitor(): Promise<void>;
  reloadAgent(): Promise<void>;
}

export interface FollowedChat {
  connected(): boolean;
  /** What to print beside a failure. */
  diagnostics?(): Record<string, unknown>;
  /** Checks of the client kind once every message is shown (`redis`: Sessions and histories survived). */
  afterwards?(redis: boolean): void;
  stop?(): Promise<void> | void;
}

interface HistoryPage {
  messages: WireMessage[];
  has_more: boolean;
}

/**
 * What the docs tell an application to do when a channel is back (subscribed again, or a
 * `history.gap`): reload the history after the last `seq` it shows, page by page — here the last
 * one up to which it shows every message, so a reload cut short by a restart leaves no hole
 * behind the live events that came meanwhile. The whole gap is filled however long the client
 * was away (the newest page alone reaches 100 messages back: a client back late lost the rest).
 */
async function reloadAfter(
  window: ReturnType<typeof chatWindow>,
  page: (after: number) => Promise<{ body: { code: number; data: HistoryPage } }>,
) {
  let after = window.completeUpTo();
  for (;;) {
    const { body } = await page(after);
    if (body.code !== 0) throw new Error(`history reload answered ${body.code}`);
    window.merge(body.data.messages);
    const last = body.data.messages.at(-1);
    if (!body.data.has_more || !last) return;
    after = last.seq;
  }
}

export type Follow = (chat: ChatParties) => Promise<FollowedChat>;

/** One client kind in the loop: what it was given and what it answered. */
interface Follower {
  name: string;
  parties: ChatParties;
  followed: FollowedChat;
  relogins(): number;
}

export async function runChatLoop(
  options: { total: number; dirPrefix: string; shownWithinMs: number },
  follow: Follow | Record<string, Follow>,
) {
  const { total } = options;
  const follows = typeof follow === 'function' ? { client: follow } : follow;
  const dir = await mkdtemp(join(tmpdir(), options.dirPrefix));
  const stores = { ...(await freshStores()), pgliteDir: dir };
  // 200 messages in a few seconds: above the chat's per-sender burst (a budget tested elsewhere).
  const env = { CHAT_MESSAGE_BURST: '1000' };
  let server: TestApp = await startTestApp({ stores, env });
  const port = Number(new URL(server.url).port);
  const proxy = await tcpProxy(() => port);
  const http = () => new HttpClient(server.url);
  const followers: Follower[] = [];
  try {
    // The visitor: its token survives restarts (stored); its channel is a capability.
    const { token: bearer } = await visitorToken(server.url);
    const visitorHeaders = { authorization: `Bearer ${bearer}` };
    const boot = await http().json<{ visitor: { channel: string; uid: string } }>('/visitor/data/get', {
      headers: visitorHeaders,
    });
    const visitorId = boot.body.data.visitor.uid;
    // The agent's REST calls and each real-time client kind have a Session each; an embedded
    // restart forgets them all (REST answers code -1 and logs in again; a client says so to `realtime`).
    let agentToken = (await agentSession(server.url, 'alice')).token;
    const asAgent = async <T>(request: () => Promise<{ body: { code: number; data: T } }>) => {
      const first = await request();
      if (first.body.code !== -1) return first;
      agentToken = (await agentSession(server.url, 'alice')).token;
      return request();
    };
    for (const [name, followKind] of Object.entries(follows)) {
      let realtimeToken = (await agentSession(server.url, 'alice')).token;
      let relogins = 0;
      const visitorWindow = chatWindow();
      const agentWindow = chatWindow();
      const parties: ChatParties = {
        wsAddress: `ws://127.0.0.1:${proxy.port}/graphql`,
        url: () => server.url,
        http,
        visitorHeaders,
        visitorChannel: boot.body.data.visitor.channel,
        realtime: {
          token: () => realtimeToken,
          async relogin() {
            relogins += 1;
            realtimeToken = (await agentSession(server.url, 'alice')).token;
          },
        },
        visitorWindow,
        agentWindow,
        async reloadVisitor() {
          await reloadAfter(visitorWindow, (after) =>
            http().json<HistoryPage>(`/visitor/message/list?after=${after}&limit=100`, { headers: visitorHeaders }),
          );
        },
        async reloadAgent() {
          await reloadAfter(agentWindow, (after) =>
            asAgent(() =>
              http().json<HistoryPage>(`/agent/message/list?visitor_id=${visitorId}&after=${after}&limit=100`, {
                headers: { token: agentToken },
              }),
            ),
          );
        },
      };
      followers.push({ name, parties, followed: await followKind(parties), relogins: () => relogins });
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
    // Messages keep flowing while the clients are away: the next ones are sent at once, so only
    // the client's recovery (resume, or the reload it triggers) can show them.
    const restart = async () => {
      await server.app.stop();
      server = await startTestApp({ stores, env: { ...env, PORT: String(port) } });
    };
    const cutAt = [Math.floor(total / 5), Math.floor((3 * total) / 5)];
    const restartAt = [Math.floor((2 * total) / 5), Math.floor((4 * total) / 5)];
    for (let n = 0; n < total; n++) {
      if (cutAt.includes(n)) {
        // Connected by each client's account and by the proxy's (a client may not yet have seen its
        // socket close): then the cut drops them all, two per kind.
        const sockets = 2 * followers.length;
        await eventually(
          () => followers.every((f) => f.followed.connected()) && proxy.open() >= sockets,
          'every client connected before the cut',
          30_000,
        );
        expect(proxy.cut(1000)).toBeGreaterThanOrEqual(sockets);
      }
      if (restartAt.includes(n)) await restart();
      await send(n);
    }

    const all = (prefix: string) => Array.from({ length: total }, (_, n) => `${prefix}${n}`);
    const shown = ({ parties }: Follower) => [
      parties.visitorWindow.contents('agent').length,
      parties.agentWindow.contents('visitor').length,
    ];
    await eventually(
      () => followers.every((f) => shown(f).every((count) => count === total)),
      'every message shown',
      options.shownWithinMs,
    ).catch((error) => {
      const state = followers.map((f) => ({
        kind: f.name,
        relogins: f.relogins(),
        shown: shown(f),
        ...(f.followed.diagnostics?.() ?? {}),
      }));
      throw new Error(`${error.message}: ${JSON.stringify(state)}`);
    });
    for (const { name, parties, followed, relogins } of followers) {
      expect(parties.visitorWindow.contents('agent'), name).toEqual(all('a'));
      expect(parties.agentWindow.contents('visitor'), name).toEqual(all('v'));
      expect([parties.visitorWindow.repeatedLive(), parties.agentWindow.repeatedLive()], name).toEqual([0, 0]);
      // Sessions survive a restart on Redis; the embedded store forgets them at each restart.
      if (stores.redisUrl) expect(relogins(), name).toBe(0);
      else expect(relogins(), name).toBeGreaterThanOrEqual(2);
      followed.afterwards?.(Boolean(stores.redisUrl));
    }
  } finally {
    for (const { followed } of followers) await followed.stop?.();
    await server.app.stop();
    await proxy.close();
    await stores.drop();
    await rm(dir, { recursive: true, force: true });
  }
}
