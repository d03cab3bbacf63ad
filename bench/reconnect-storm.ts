import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import WebSocket from 'ws';
import type { buildDeps } from '../src/compose.js';
import { issueVisitorToken } from '../src/resolvers/visitor.js';
import type { Proc } from './lib.js';

/**
 * Row 11 of `npm run bench` (issue 33, target 5): a reconnect storm. BENCH_STORM_CONVERSATIONS
 * (1,000) visitors in conversation, each with BENCH_STORM_TABS (10) graphql-ws sockets subscribed
 * to its channel (10,000 subscribers). Every socket has seen the same events; all drop at once;
 * while they are away each channel gets 3 more events; all reconnect at once and resume with
 * `since` = the last position they saw. Targets: all back (replay done) within 30 s; every socket
 * gets each missed event once, in order, then a live one (0 gaps, 0 duplicates); the stores see
 * at most one history read per conversation (the gateway's `parley_history_reads_total`) and at
 * most one visitor token check per conversation (PostgreSQL statements counted around the storm).
 * Reported: connections accepted per second (connection_ack), peak RSS of the gateway.
 */

export interface StormContext {
  gateway: Proc;
  deps: Awaited<ReturnType<typeof buildDeps>>;
  dbUrl: string;
  quick: boolean;
  row(cells: string[]): void;
  log(...args: unknown[]): void;
  /** Live heap + external of the gateway after a full collection. */
  heap(): Promise<number>;
}

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const QUERY = 'subscription($name:String!,$since:String){channel(name:$name,since:$since){position event data}}';
const EVENT = 'bench.storm';
/** Sockets opening at once from the bench (the client's own limit, not the gateway's). */
const OPENING = 1000;

interface Tab {
  conversation: number;
  ws?: WebSocket;
  position?: string;
  /** The `n` of every bench event received, in arrival order. */
  got: number[];
  acked: boolean;
}

async function historyReads(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return Number(/^parley_history_reads_total (\d+)/m.exec(text)?.[1] ?? 'NaN');
}

export async function reconnectStorm(ctx: StormContext) {
  const conversations = Number(process.env.BENCH_STORM_CONVERSATIONS ?? (ctx.quick ? 100 : 1000));
  const perConversation = Number(process.env.BENCH_STORM_TABS ?? 10);
  const wsUrl = `${ctx.gateway.url.replace('http', 'ws')}/graphql`;
  const issued: { token: string; uid: string }[] = [];
  for (let i = 0; i < conversations; i++)
    issued.push(await issueVisitorToken(ctx.deps, { appkey: 'demo-appkey' }, `10.79.${i >> 8}.${i & 255}`));
  const db = postgres(ctx.dbUrl, { max: 1, onnotice: () => {} });
  const channels = new Map(
    (await db`select id, channel from visitors where id in ${db(issued.map((v) => v.uid))}`).map((r) => [
      r.id as string,
      r.channel as string,
    ]),
  );
  await db.end();
  const visitors = issued.map((v) => ({ token: v.token, channel: channels.get(v.uid) as string }));
  const tabs: Tab[] = [];
  for (let c = 0; c < conversations; c++)
    for (let t = 0; t < perConversation; t++) tabs.push({ conversation: c, got: [], acked: false });

  /** Opens a tab's socket and subscribes (with `since` when it has a position); resolves on connection_ack. */
  const open = (tab: Tab) =>
    new Promise<void>((resolve, reject) => {
      const v = visitors[tab.conversation] as { token: string; channel: string };
      const ws = new WebSocket(wsUrl, 'graphql-transport-ws');
      tab.ws = ws;
      tab.acked = false;
      ws.once('error', reject);
      ws.once('close', (code) => {
        if (!tab.acked) reject(new Error(`closed ${code} before connection_ack`));
      });
      ws.once('open', () =>
        ws.send(
          JSON.stringify({
            type: 'connection_init',
            payload: { appkey: 'demo-appkey', authorization: `Bearer ${v.token}` },
          }),
        ),
      );
      ws.on('message', (raw) => {
        const text = raw.toString();
        if (!tab.acked) {
          if (!text.includes('connection_ack')) return reject(new Error(`not acked: ${text}`));
          tab.acked = true;
          ws.send(
            JSON.stringify({
              id: 's',
              type: 'subscribe',
              payload: { query: QUERY, variables: { name: v.channel, since: tab.position ?? null } },
            }),
          );
          return resolve();
        }
        if (!text.startsWith('{"id"')) return;
        const frame = JSON.parse(text) as {
          type: string;
          payload?: { data?: { channel?: { position: string; event: string; data: { n?: number } } } };
        };
        const event = frame.payload?.data?.channel;
        if (!event) return;
        tab.position = event.position;
        if (event.event === EVENT && typeof event.data.n === 'number') tab.got.push(event.data.n);
      });
    });

  /**
   * Opens every tab, OPENING at a time. A socket refused or reset before its connection_ack (the
   * listen backlog overflowing when a thousand arrive at once on a busy core) tries again after
   * a short random wait, as a client's reconnect does; the retries are reported.
   */
  let retries = 0;
  const openWithRetry = async (tab: Tab) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await open(tab);
      } catch (error) {
        tab.ws?.terminate();
        if (attempt >= 10) throw error;
        retries++;
        await sleep(100 + Math.random() * 400);
      }
    }
  };
  async function openAll(): Promise<{ seconds: number }> {
    const started = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(OPENING, tabs.length) }, async () => {
        while (next < tabs.length) await openWithRetry(tabs[next++] as Tab);
      }),
    );
    return { seconds: (Date.now() - started) / 1000 };
  }
  const publishRound = async (n: number) => {
    for (let i = 0; i < visitors.length; i += 200)
      await Promise.all(
        visitors
          .slice(i, i + 200)
          .map((v) => ctx.deps.bus.publish(v.channel, EVENT, { n, text: 'while you were away' })),
      );
  };
  const allGot = async (count: number, seconds: number) => {
    const deadline = Date.now() + seconds * 1000;
    while (tabs.some((t) => t.got.length < count)) {
      if (Date.now() > deadline) return false;
      await sleep(20);
    }
    return true;
  };

  // Everyone subscribed and has seen events 0 and 1. A socket's subscription is live once its
  // `subscribed` event came (it sets the position): events published before that are not its.
  await openAll();
  const deadline = Date.now() + 60_000;
  while (tabs.some((t) => t.position === undefined)) {
    if (Date.now() > deadline) throw new Error('storm: not every socket was subscribed within 60 s');
    await sleep(20);
  }
  await publishRound(0);
  await publishRound(1);
  if (!(await allGot(2, 60))) throw new Error('storm: the first events did not reach every socket');

  // The drop: every socket at once. Three events each while they are away.
  for (const tab of tabs) tab.ws?.terminate();
  await sleep(500);
  for (const n of [2, 3, 4]) await publishRound(n);

  const readsBefore = await historyReads(ctx.gateway.url);
  const pg = postgres(ctx.dbUrl, { max: 1, onnotice: () => {} });
  const statements = async () =>
    Number(
      (await pg`select xact_commit + xact_rollback as n from pg_stat_database where datname = current_database()`)[0]
        ?.n ?? 0,
    );
  await pg`select pg_stat_clear_snapshot()`;
  const pgBefore = await statements();
  let peakRss = ctx.gateway.rss();
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, ctx.gateway.rss());
  }, 50);
  const stormStarted = Date.now();
  const retriesBefore = retries;
  const reopened = await openAll();
  const stormRetries = retries - retriesBefore;
  const back = await allGot(5, 30 - (Date.now() - stormStarted) / 1000);
  const backSeconds = (Date.now() - stormStarted) / 1000;
  clearInterval(sampler);
  await sleep(1000); // statistics reach pg_stat_database within PGSTAT's flush
  await pg`select pg_stat_clear_snapshot()`;
  const pgStatements = (await statements()) - pgBefore;
  await pg.end();
  const reads = (await historyReads(ctx.gateway.url)) - readsBefore;

  // A live event after the storm, then the check: each socket got 0…5 once, in order.
  await publishRound(5);
  await allGot(6, 30);
  const exact = tabs.filter((t) => t.got.length === 6 && t.got.every((n, i) => n === i)).length;
  const gaps = tabs.filter((t) => [0, 1, 2, 3, 4, 5].some((n) => !t.got.includes(n))).length;
  const duplicates = tabs.filter((t) => new Set(t.got).size !== t.got.length).length;
  const heap = await ctx.heap();
  for (const tab of tabs) tab.ws?.terminate();

  const rate = tabs.length / reopened.seconds;
  const met = back && backSeconds <= 30 && exact === tabs.length && reads <= conversations;
  ctx.row([
    `11 reconnect storm: ${fmt(tabs.length)} subscribers of ${fmt(conversations)} conversations drop at once and resume with since`,
    `all back in ${fmt(backSeconds, 1)} s; ${fmt(rate)} connections/s accepted`,
    '',
    `**${fmt(reads / conversations, 2)}** history reads per conversation`,
    '≤ 30 s; 0 gaps, 0 duplicates; ≤ 1 read per conversation',
    met ? 'met' : '**not met**',
    '',
    '',
    `${exact} of ${tabs.length} sockets got every event once, in order (gaps ${gaps}, duplicates ${duplicates}); ${reads} history reads, ${pgStatements} PostgreSQL statements (token checks, background jobs) during the storm; ${stormRetries} sockets reset or refused before their ack and reopened (${retriesBefore} while subscribing before the storm); peak RSS ${fmt(peakRss / 1048576)} MiB, live heap after ${fmt(heap / 1048576)} MiB`,
  ]);
  ctx.log(
    `11 reconnect storm: ${tabs.length} back in ${fmt(backSeconds, 1)} s, ${fmt(rate)} conn/s, ${reads} history reads, ${pgStatements} pg statements, ${stormRetries} reopened, exact ${exact}, peak RSS ${fmt(peakRss / 1048576)} MiB`,
  );
}
