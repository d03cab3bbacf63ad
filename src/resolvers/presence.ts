import { randomUUID } from 'node:crypto';
import { and, eq } from 'drizzle-orm';
import { type Agent, agents } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { badInput, DomainError } from '../errors.js';
import { drainQueueQuietly } from './conversations/queue.js';
import { requeueOfflineAgent } from './conversations/requeue.js';
import { publishAgentState } from './events.js';
import { type AgentViewer, requireOnlineReception, TICKET_AGENT } from './viewer.js';

export type AgentState = 'online' | 'offline' | 'busy' | 'away';

/** States an agent may choose; they apply while it is connected (it is offline otherwise). */
export const MANUAL_STATES = ['busy', 'away'] as const;
export type ManualState = (typeof MANUAL_STATES)[number];

/** Why `agent.state` changed: a socket connected, the last one closed (or expired), the agent chose. */
export type PresenceReason = 'connected' | 'disconnected' | 'manual';

/**
 * A connection counts as alive this long after its last heartbeat: an instance that crashes
 * stops refreshing its connections, and their agents go offline once it has passed.
 */
export const CONNECTION_TTL_MS = 30_000;
/** How often an instance refreshes its own connections and re-checks the agents shown online. */
export const HEARTBEAT_MS = 10_000;

const isManual = (state: string | null | undefined): state is ManualState =>
  (MANUAL_STATES as readonly string[]).includes(state ?? '');

/** The state of a connected agent: its manual state when it chose one, else online. */
const connectedState = (manual: string | null | undefined): AgentState => (isManual(manual) ? manual : 'online');

/**
 * An agent's state: offline unless one of its sockets is connected on some instance (or closed
 * less than PRESENCE_GRACE_SECONDS ago); when connected, the manual state it chose (busy, away)
 * or else online. This reads the state last settled — the one the latest `agent.state` event
 * announced — so the workbench bootstrap and the events always agree.
 */
export async function readAgentState(deps: Deps, agent: Agent): Promise<AgentState> {
  if (agent.level === TICKET_AGENT) return 'offline';
  return (await deps.presence.stateOf(agent.id)) as AgentState;
}

/**
 * Re-derives an agent's state and, when it changed, publishes `agent.state` on `global-{bid}`;
 * the store's atomic settle makes exactly one instance publish each change.
 * `manual` undefined: keep whatever state a connected agent has now.
 */
async function settleAgent(
  deps: Deps,
  agentId: string,
  bid: string,
  reason: PresenceReason,
  manual?: string | null,
): Promise<AgentState> {
  const ifOnline = manual === undefined ? null : connectedState(manual);
  const { before, after } = await deps.presence.settle(agentId, bid, deps.now(), ifOnline);
  if (before !== after) await publishAgentState(deps, bid, agentId, after, reason);
  // Capacity appeared (came online, or back from busy/away): serve the merchant's chat queue.
  if (after === 'online' && before !== 'online') await drainQueueQuietly(deps, { bid });
  // Offline beyond the grace: its active conversations go back to the queue, at the front.
  if (after === 'offline' && before !== 'offline') await requeueQuietly(deps, agentId);
  return after as AgentState;
}

async function requeueQuietly(deps: Deps, agentId: string) {
  try {
    await requeueOfflineAgent(deps, agentId);
  } catch (error) {
    deps.log.warn({ err: (error as Error).message }, 'chat: re-queueing an offline agent’s conversations failed');
  }
}

/**
 * Sets (busy, away) or clears (null, `online`) the agent's manual state; `offline` cannot be
 * chosen, it is computed from connections. Publishes the resulting change, if any.
 */
export async function setAgentState(deps: Deps, viewer: AgentViewer, state: string | null | undefined): Promise<Agent> {
  requireOnlineReception(viewer);
  if (state === 'offline') throw badInput('state offline cannot be chosen: it follows from having no connection');
  if (state != null && state !== 'online' && !isManual(state)) throw badInput('state must be busy, away or online');
  const manual = isManual(state) ? state : null;
  const [agent] = await deps.db
    .update(agents)
    .set({ manualState: manual })
    .where(and(eq(agents.id, viewer.agentId), eq(agents.merchantId, viewer.merchantId)))
    .returning();
  if (!agent) throw new DomainError('SESSION_MISMATCH', 'Invalid parameter: agent not found, please log in again');
  await settleAgent(deps, agent.id, viewer.bid, 'manual', manual);
  return agent;
}

/**
 * Re-checks every agent shown online anywhere: those whose connections all expired (closed past
 * the grace period, or left behind by a crashed instance) go offline. Every instance runs it.
 */
export async function settleExpiredPresence(deps: Deps): Promise<void> {
  const now = deps.now();
  for (const { agentId, bid } of await deps.presence.tracked()) {
    if (!(await deps.presence.isOnline(agentId, now))) await settleAgent(deps, agentId, bid, 'disconnected');
  }
}

/** What a transport reports about its agent connections; the presence rules stay here. */
export interface PresenceTracker {
  /** An agent's socket was accepted; returns the connection's id (undefined when not tracked). */
  connected(viewer: AgentViewer): Promise<string | undefined>;
  /** That socket closed: the agent stays online for the grace period, then may go offline. */
  disconnected(connection: string | undefined): Promise<void>;
  /** Starts the heartbeat (the real-time service starts it with the instance). */
  start(): void;
  /** Stops the timers (graceful shutdown); connections not reported closed simply expire. */
  close(): Promise<void>;
}

/**
 * Presence for one instance: records its agents' connections, refreshes them every
 * HEARTBEAT_MS once started, settles an agent when its grace period ends, and sweeps expired
 * agents. One per instance, owned by the real-time service (src/resolvers/realtime.ts).
 */
export function createPresenceTracker(deps: Deps): PresenceTracker {
  const graceMs = deps.config.presenceGraceSeconds * 1000;
  const local = new Map<string, { agentId: string; bid: string }>();
  const graceTimers = new Set<NodeJS.Timeout>();
  const pending = new Set<Promise<unknown>>();
  // Presence is best effort: a store outage must not break sockets; the heartbeat repairs it.
  const quietly = (what: string, work: () => Promise<unknown>) => {
    const run = work()
      .catch((error: unknown) => deps.log.warn({ err: (error as Error).message }, `presence: ${what} failed`))
      .finally(() => pending.delete(run));
    pending.add(run);
    return run;
  };

  let heartbeat: NodeJS.Timeout | undefined;
  const beat = () => {
    void quietly('heartbeat', async () => {
      const until = deps.now() + CONNECTION_TTL_MS;
      for (const [connection, { agentId, bid }] of local) {
        // A connection dropped as expired (e.g. the event loop stalled) comes back: re-settle.
        if (await deps.presence.touch(agentId, connection, until)) {
          const [agent] = await deps.db.select().from(agents).where(eq(agents.id, agentId)).limit(1);
          await settleAgent(deps, agentId, bid, 'connected', agent?.manualState ?? null);
        }
      }
      await settleExpiredPresence(deps);
    });
  };

  return {
    start() {
      if (heartbeat) return;
      heartbeat = setInterval(beat, HEARTBEAT_MS);
      heartbeat.unref();
    },
    async connected(viewer) {
      if (viewer.level === TICKET_AGENT) return undefined; // no online reception, no presence
      const connection = randomUUID();
      const entry = { agentId: viewer.agentId, bid: viewer.bid };
      local.set(connection, entry);
      await quietly('connect', async () => {
        await deps.presence.touch(entry.agentId, connection, deps.now() + CONNECTION_TTL_MS);
        await settleAgent(deps, entry.agentId, entry.bid, 'connected', viewer.agent.manualState);
      });
      return connection;
    },
    async disconnected(connection) {
      const entry = connection ? local.get(connection) : undefined;
      if (!connection || !entry) return;
      local.delete(connection);
      // The connection lingers for the grace period, so a reload or a brief drop does not flap.
      await quietly('disconnect', () => deps.presence.touch(entry.agentId, connection, deps.now() + graceMs));
      const timer = setTimeout(() => {
        graceTimers.delete(timer);
        void quietly('grace', () => settleAgent(deps, entry.agentId, entry.bid, 'disconnected'));
      }, graceMs + 20);
      graceTimers.add(timer);
    },
    async close() {
      clearInterval(heartbeat);
      heartbeat = undefined;
      for (const timer of graceTimers) clearTimeout(timer);
      graceTimers.clear();
      await Promise.allSettled([...pending]);
    },
  };
}
