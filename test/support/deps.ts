import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, inject } from 'vitest';
import { buildDeps } from '../../src/compose.js';
import { type Config, loadConfig } from '../../src/config.js';
import type { Database } from '../../src/db/client.js';
import { agents, merchants } from '../../src/db/schema.js';
import type { Deps } from '../../src/deps.js';
import { DomainError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { createAgent, createMerchant } from '../../src/resolvers/admin.js';
import { openConversation } from '../../src/resolvers/chat-rows.js';
import { assignMany } from '../../src/resolvers/conversations/assignment.js';
import { assignAgent, groupFor, openNewConversation } from '../../src/resolvers/conversations/routing.js';
import { visitorKey } from '../../src/resolvers/outbox/enqueue.js';
import { publishOutbox } from '../../src/resolvers/outbox/publish.js';
import { createPresenceTracker, type PresenceTracker } from '../../src/resolvers/presence.js';
import type { SessionPort } from '../../src/resolvers/session.js';
import { type AgentViewer, requireVisitor, type VisitorViewer } from '../../src/resolvers/viewer.js';
import { issueVisitorToken } from '../../src/resolvers/visitor.js';
import type { ChannelEvent } from '../../src/stores/bus.js';
import { memoryPresenceStore, type PresenceStore, redisPresenceStore } from '../../src/stores/presence-store.js';
import { createObjectStorage, type ObjectStorage } from '../../src/stores/storage/index.js';
import { freshStores, type TestStores, templateDatabase } from './stores.js';
import { WAIT_MS } from './wait.js';

/**
 * The domain-level harness: real stores (PGlite in memory, or a fresh PostgreSQL database when
 * DATABASE_URL is set; in-process stores, or Redis under a private prefix when REDIS_URL is set),
 * migrated once per worker, and factories built on the admin functions. Every test
 * makes its own merchant, so tests never see each other's rows. No HTTP server.
 */

export type TestDeps = Deps & { close(): Promise<void> };

/** A worker's stores: opened on first use and kept for the rest of the run (test/global-setup.ts drops them at its end). */
interface WorkerStores {
  stores: TestStores;
  /** The embedded database, opened from the migrated template; undefined on PostgreSQL (each deps connects). */
  database: Database | undefined;
}

let workerStores: Promise<WorkerStores> | undefined;
/** The deps of the current run, and which run that is (see `currentRun`). */
let current: { run: unknown; deps: Promise<TestDeps> } | undefined;

/** Options that change the deps' config (e.g. a shorter channel history). */
function testConfig(stores: TestStores, env: Record<string, string> = {}): Config {
  return loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    PGLITE_DIR: stores.pgliteDir,
    ...(stores.databaseUrl ? { DATABASE_URL: stores.databaseUrl } : {}),
    ...(stores.redisUrl ? { REDIS_URL: stores.redisUrl } : {}),
    REDIS_PREFIX: stores.redisPrefix,
    // Whether an instance is busy depends on the machine (CI runs beside a busy loop): the fair
    // share is off unless a test turns it on (CHAT_FAIR_SHARE_LOOP_DELAY_MS 0, always busy).
    CHAT_FAIR_SHARE_LOOP_DELAY_MS: '60000',
    ...env,
  });
}

const quietLog = () =>
  createLogger(
    'warn',
    new Writable({
      write(_chunk, _enc, done) {
        done();
      },
    }),
  );

async function openStores(): Promise<WorkerStores> {
  const stores = await freshStores();
  return { stores, database: await templateDatabase(stores, 'migrated') };
}

/** Deps over `stores`, migrated; closing them leaves a kept database open. */
async function depsOver({ stores, database }: WorkerStores): Promise<TestDeps> {
  const kept = database && { ...database, close: async () => {} };
  const deps = await buildDeps(testConfig(stores), quietLog(), { database: kept });
  await deps.database.migrate();
  return deps;
}

/**
 * Which run the deps are for. vitest.mutation.config.ts keeps a worker thread for many runs, one
 * per mutant, and a deps object holds services built by code under mutation (the realtime
 * service, the config cache, the bus): each mutant's run builds its own, over the worker's
 * database. Outside Stryker there is one run per worker.
 */
const currentRun = () => (inject as (key: string) => unknown)('activeMutant');

/**
 * The worker's deps, built and migrated on first use and kept for the rest of the run: files share
 * them (each test makes its own merchant), so a worker opens one database, not one per file.
 */
export function testDeps(): Promise<TestDeps> {
  const run = currentRun();
  if (!current || current.run !== run) {
    const previous = current?.deps;
    workerStores ??= openStores();
    const stores = workerStores;
    current = {
      run,
      deps: (async () => {
        // The previous run's deps close under this run's mutant: one that breaks closing must not
        // keep this run's tests from running (they would be skipped, and the mutant "survive").
        await previous?.then((deps) => deps.close()).catch(() => {});
        return depsOver(await stores);
      })(),
    };
  }
  return current.deps;
}

/** Deps on a database of their own, for a test that needs it empty; the caller closes them. */
export async function privateTestDeps(): Promise<TestDeps> {
  const own = await openStores();
  const deps = await depsOver(own);
  const close = deps.close;
  deps.close = async () => {
    await close();
    await own.database?.close();
    await own.stores.drop();
  };
  return deps;
}

/**
 * A second instance on the same stores (database, Redis prefix): for exactly-once checks across
 * instances. With the embedded defaults (PGlite, in-process stores) nothing can be shared, so it
 * is undefined there.
 */
export async function secondInstance(): Promise<TestDeps | undefined> {
  await testDeps();
  const { stores } = await (workerStores as Promise<WorkerStores>);
  if (!stores.databaseUrl) return undefined;
  return buildDeps(testConfig(stores), quietLog());
}

const stubSession = (state: SessionPort['state']): SessionPort => ({
  id: `test-${randomBytes(6).toString('hex')}`,
  state,
  regenerate: async () => {},
  save: async () => {},
  destroy: async () => {},
});

/**
 * A Session as the HTTP adapter gives it to the domain, kept in memory: `regenerate` issues a new
 * ID with an empty state (as express-session does), and the counters say what the domain did.
 */
export function testSession(state: SessionPort['state'] = {}) {
  let id = `test-${randomBytes(6).toString('hex')}`;
  const session = {
    get id() {
      return id;
    },
    state,
    saves: 0,
    regenerations: 0,
    destroyed: false,
    async regenerate() {
      session.regenerations++;
      id = `test-${randomBytes(6).toString('hex')}`;
      for (const key of Object.keys(session.state)) delete session.state[key as keyof SessionPort['state']];
    },
    async save() {
      session.saves++;
    },
    async destroy() {
      session.destroyed = true;
    },
  };
  return session satisfies SessionPort;
}

export interface TestMerchant {
  merchantId: string;
  bid: string;
  appkey: string;
}

/** The factories of one deps object (`factories(deps)`). */
export type Factories = ReturnType<typeof factories>;

/**
 * The set-up of a domain test file, written once: before its tests, the run's deps
 * (`testDeps()`) and factories over them are handed to `use` (which keeps them in the file's
 * variables); after them, what the factories made is cleaned up.
 */
export function useTestDeps(
  use: (made: { deps: TestDeps; f: Factories }) => unknown,
  opts: { ownPresence?: boolean } = {},
): void {
  let made: { deps: TestDeps; f: Factories } | undefined;
  let presence: ReturnType<typeof ownPresenceStore> | undefined;
  beforeAll(async () => {
    const shared = await testDeps();
    presence = opts.ownPresence ? ownPresenceStore(shared) : undefined;
    const deps = presence ? { ...shared, presence: presence.store } : shared;
    made = { deps, f: factories(deps) };
    use(made);
  });
  afterAll(async () => {
    await made?.f.cleanup();
    presence?.close();
  });
}

/**
 * An empty presence store beside the worker's (a map, or the worker's Redis under a prefix of
 * its own), for `useTestDeps(…, { ownPresence: true })`. A sweep whose clock is moved past the
 * connections' TTL settles every agent the store tracks: on the worker's store that is every
 * agent the worker's earlier files left connected (each an `agent.state` and a re-queue), so such
 * a test's time grew with its place in the run (15–25 s for one test); on its own store it
 * settles its own agents only.
 */
function ownPresenceStore(deps: Deps): { store: PresenceStore; close(): void } {
  if (!deps.redis) return { store: memoryPresenceStore(), close: () => {} };
  const redis = deps.redis.duplicate({
    keyPrefix: `${deps.config.redisPrefix}presence-${randomBytes(4).toString('hex')}:`,
  });
  return { store: redisPresenceStore(redis), close: () => redis.disconnect() };
}

/**
 * `useTestDeps` for the attachment tests: the run's deps with attachments stored in a directory
 * of the file's own (the local driver), handed to `use` with that storage and directory; after
 * the file's tests the storage is closed and the directory removed.
 */
export function useLocalAttachmentDeps(
  use: (made: { deps: TestDeps; f: Factories; storage: ObjectStorage; dir: string }) => unknown,
): void {
  let made: { deps: TestDeps; f: Factories; storage: ObjectStorage; dir: string } | undefined;
  beforeAll(async () => {
    const base = await testDeps();
    const dir = mkdtempSync(join(tmpdir(), 'parley-domain-attachments-'));
    const config = { ...base.config, attachments: { ...base.config.attachments, driver: 'local' as const, dir } };
    const storage = await createObjectStorage(config.attachments);
    const deps = { ...base, config, storage };
    made = { deps, f: factories(deps), storage, dir };
    use(made);
  });
  afterAll(async () => {
    if (!made) return;
    await made.f.cleanup();
    await made.storage.close();
    rmSync(made.dir, { recursive: true, force: true });
  });
}

/** Factories over one deps object; each call makes fresh rows with unique names. */
export function factories(deps: Deps) {
  const unique = () => randomBytes(5).toString('hex');
  const trackers: PresenceTracker[] = [];

  async function merchant(
    opts: { switches?: Record<string, string>; maxConcurrentChats?: number; settings?: Record<string, unknown> } = {},
  ): Promise<TestMerchant> {
    const m = await createMerchant(deps, { bid: `t${unique()}`, appname: 'Test shop' });
    const set: Partial<typeof merchants.$inferInsert> = {};
    if (opts.switches) set.switches = opts.switches;
    if (opts.maxConcurrentChats !== undefined) set.maxConcurrentChats = opts.maxConcurrentChats;
    if (opts.settings) set.workbenchSettings = opts.settings;
    if (Object.keys(set).length) await deps.db.update(merchants).set(set).where(eq(merchants.id, m.merchantId));
    return { merchantId: m.merchantId, bid: m.bid, appkey: m.appkey };
  }

  /** An agent of `m` as the domain sees a logged-in one (its viewer). */
  async function agent(
    m: TestMerchant,
    opts: {
      level?: 'agent' | 'admin' | 'ticket_agent';
      group?: string;
      maxConcurrentChats?: number;
      nickname?: string;
    } = {},
  ): Promise<AgentViewer> {
    const username = `agent-${unique()}`;
    const created = await createAgent(deps, {
      bid: m.bid,
      username,
      password: 'test-password-1',
      nickname: opts.nickname ?? username,
      level: opts.level ?? 'agent',
      ...(opts.group ? { group: opts.group } : {}),
    });
    if (opts.maxConcurrentChats !== undefined)
      await deps.db
        .update(agents)
        .set({ maxConcurrentChats: opts.maxConcurrentChats })
        .where(eq(agents.id, created.agentId));
    return agentViewer(created.agentId);
  }

  async function agentViewer(agentId: string): Promise<AgentViewer> {
    const [row] = await deps.db.select().from(agents).where(eq(agents.id, agentId));
    if (!row) throw new Error(`no agent ${agentId}`);
    const [m] = await deps.db.select().from(merchants).where(eq(merchants.id, row.merchantId));
    const identity = { agentId: row.id, merchantId: row.merchantId, bid: m?.bid ?? '', level: row.level };
    return {
      kind: 'agent',
      agentId: row.id,
      merchantId: row.merchantId,
      bid: identity.bid,
      level: row.level,
      agent: row,
      session: stubSession({ createdAt: Date.now(), agent: identity }),
      clientAddress: null,
    };
  }

  /** A visitor of `m` as the domain sees it (its viewer), through a real visitor token. */
  async function visitor(m: TestMerchant, opts: { nickname?: string } = {}): Promise<VisitorViewer> {
    // As POST /visitor/token issues it; a client address of its own keeps the per-IP limit out of the way.
    const issued = await issueVisitorToken(
      deps,
      { appkey: m.appkey, nickname: opts.nickname ?? `visitor-${unique()}` },
      `test-${unique()}`,
    );
    return requireVisitor(deps, issued.token);
  }

  /**
   * Connects the agent the way a socket does (presence tracker): it goes online on every
   * instance sharing the presence store, which drains its merchant's queue.
   */
  async function online(agentViewer: AgentViewer) {
    const tracker = createPresenceTracker(deps);
    trackers.push(tracker);
    const connection = await tracker.connected(agentViewer);
    return { disconnect: () => tracker.disconnected(connection) };
  }

  /** A visitor with an open conversation (assigned when an agent of its group is online). */
  async function conversation(m: TestMerchant, opts: { nickname?: string } = {}) {
    const v = await visitor(m, opts);
    const assigned = await assignAgent(deps, v);
    return { visitor: v, ...assigned };
  }

  /**
   * A merchant (with `switches`), an online agent and a visitor in an active conversation with
   * that agent: the set-up of most chat rules.
   */
  async function activeChat(
    opts: { switches?: Record<string, string>; agentNickname?: string; visitorNickname?: string } = {},
  ) {
    const m = await merchant(opts.switches ? { switches: opts.switches } : {});
    const a = await agent(m, opts.agentNickname ? { nickname: opts.agentNickname } : {});
    await online(a);
    const v = await visitor(m, opts.visitorNickname ? { nickname: opts.visitorNickname } : {});
    const assigned = await assignAgent(deps, v);
    if (assigned.state !== 'active' || assigned.agent?.agentId !== a.agentId)
      throw new Error(`the visitor was not assigned to the online agent: ${JSON.stringify(assigned)}`);
    return { m, agent: a, visitor: v, conversationId: assigned.conversationId };
  }

  /**
   * What `activeChat` leaves — the same rows, system message and events — written by the
   * conversation's own insert and the assignment's own write (`openNewConversation`, `assignMany`),
   * without routing: no presence, no queue drain, no budget charged. For the rules of the chat
   * itself (messages, notes, publication): routing is then judged by routing's tests, not by every
   * chat test (a routing mutant no test kills ran about 200 of them in the mutation run), and the
   * set-up makes 26 queries, not 56 (docs/testing.md "A chat test's set-up without routing").
   */
  async function assignedChat(
    opts: { switches?: Record<string, string>; agentNickname?: string; visitorNickname?: string } = {},
  ) {
    const m = await merchant(opts.switches ? { switches: opts.switches } : {});
    const a = await agent(m, opts.agentNickname ? { nickname: opts.agentNickname } : {});
    const v = await visitor(m, opts.visitorNickname ? { nickname: opts.visitorNickname } : {});
    const group = await groupFor(deps, m.merchantId, undefined);
    const conversationId = await openNewConversation(deps, m.merchantId, v.visitorId, group);
    const assigned = await deps.db.transaction(async (tx) => {
      const ctx = await openConversation(tx, m.merchantId, v.visitorId);
      return ctx ? assignMany(tx, [{ ctx, agent: a.agent }], deps.now()) : [];
    });
    if (!conversationId || assigned.length !== 1) throw new Error(`no conversation assigned to ${a.agentId}`);
    await publishOutbox(deps, visitorKey(v.visitorId));
    return { m, agent: a, visitor: v, conversationId };
  }

  return {
    merchant,
    agent,
    agentViewer,
    visitor,
    online,
    conversation,
    activeChat,
    assignedChat,
    async cleanup() {
      await Promise.all(trackers.map((t) => t.close()));
    },
  };
}

/** Records the events of channels from now on; `stop` ends the subscriptions. */
export function recordEvents(deps: Deps, channels: string[]) {
  const controller = new AbortController();
  const events: ChannelEvent[] = [];
  const ready: Promise<void>[] = [];
  for (const channel of channels) {
    let resolveReady: () => void = () => {};
    ready.push(new Promise<void>((r) => (resolveReady = r)));
    void (async () => {
      try {
        for await (const event of deps.bus.subscribe(channel, { signal: controller.signal, maxQueued: 100_000 })) {
          if (event.event === 'subscribed') {
            resolveReady();
            continue;
          }
          events.push(event);
        }
      } catch {
        // ended
      }
    })();
  }
  return {
    events,
    /** Resolves once every subscription is live. */
    ready: Promise.all(ready),
    of: (name: string, channel?: string) =>
      events.filter((e) => e.event === name && (channel === undefined || e.channel === channel)),
    /** The first event `name` recorded (on `channel`), once it arrives. */
    first: (name: string, channel?: string) =>
      eventually(
        () => events.find((e) => e.event === name && (channel === undefined || e.channel === channel)),
        `${name} on ${channel ?? channels.join(', ')}`,
      ) as Promise<ChannelEvent>,
    stop: () => controller.abort(),
  };
}

/** Waits until `check` holds, polling; fails with `what` after `ms`. */
export async function eventually<T>(check: () => T | Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The current value of a counter of `deps.metrics` (0 when it was never counted), from its exposition. */
export async function metricValue(deps: Deps, name: string, labels: Record<string, string> = {}): Promise<number> {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of (await deps.metrics.render()).split('\n')) {
    const match = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = match[2]?.split(',') ?? [];
    if (wanted.every((w) => have.includes(w))) return Number(match[3]);
  }
  return 0;
}

/** The domain's error code of a rejected call ('no error' when it resolved); other errors go on. */
export async function codeOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (error) {
    if (error instanceof DomainError) return error.code;
    throw error;
  }
  return 'no error';
}

/**
 * The deps of a request whose next transaction begins only after `meanwhile` ran: what another
 * request, another instance or the idle sweep did between this request's checks and its locked
 * write. A deterministic stand-in for a race the scheduler would only sometimes produce.
 */
export function meanwhileBeforeNextTransaction(deps: Deps, meanwhile: () => Promise<unknown>): Deps {
  let pending: (() => Promise<unknown>) | undefined = meanwhile;
  const db = new Proxy(deps.db, {
    get(target, prop) {
      if (prop === 'transaction')
        return async (...args: Parameters<typeof target.transaction>) => {
          const run = pending;
          pending = undefined;
          if (run) await run();
          return target.transaction(...args);
        };
      const value = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { ...deps, db };
}

/** The error a query built on a handle of `selectsDown` throws while it is down. */
export const DATABASE_DOWN = 'connect ECONNREFUSED 127.0.0.1:5432';

/**
 * A handle on `db` whose `select` throws DATABASE_DOWN (code ECONNREFUSED) until `restore()`: a
 * read started while it is down rejects, as one would against a database that stopped answering.
 */
export function selectsDown(db: Deps['db']): { db: Deps['db']; restore(): void } {
  let down = true;
  const handle = new Proxy(db, {
    get: (target, key) =>
      down && key === 'select'
        ? () => {
            throw Object.assign(new Error(DATABASE_DOWN), { code: 'ECONNREFUSED' });
          }
        : Reflect.get(target, key),
  });
  return { db: handle, restore: () => (down = false) };
}

/** `CODE: message` of the DomainError `work` throws (or a function throws), else 'no error'; other errors go on. */
export async function refusalOf(work: Promise<unknown> | (() => unknown)): Promise<string> {
  try {
    await (typeof work === 'function' ? work() : work);
  } catch (error) {
    if (error instanceof DomainError) return `${error.code}: ${error.message}`;
    throw error;
  }
  return 'no error';
}

/** A client address of its own, so a test's address limits never meet another's. */
export const clientIp = () => `10.${randomBytes(3).join('.')}`;
