import { eq } from 'drizzle-orm';
import { merchants } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { badInput, DomainError } from '../errors.js';
import type { ChannelEvent } from '../stores/bus.js';
import { eventNames, isReservedEventName } from './event-catalog.js';
import {
  AGENT_LEVEL_CHANGED,
  adminChannel,
  agentChannel,
  globalChannel,
  publishSessionEnded,
  SESSION_ENDED,
  sessionFingerprint,
} from './events.js';
import type { SessionPort } from './session.js';
import { ADMIN, type HeldAgentViewer, requireAgent, requireOnlineReception, type VisitorViewer } from './viewer.js';

/** A viewer as channels judge it; a full AgentViewer is one, and connections keep only `heldViewer`'s part. */
export type ChannelViewer = HeldAgentViewer | VisitorViewer;

/**
 * Who may listen where: a visitor to its own generated channel only; an agent (not a ticket
 * agent) to `agent-{its id}` and `global-{its merchant's bid}` only; an admin also to
 * `admin-{its merchant's bid}` (every message of the merchant).
 */
export function authorizeChannel(viewer: ChannelViewer, name: string): void {
  if (viewer.kind === 'visitor') {
    if (name === viewer.channel) return;
  } else {
    requireOnlineReception(viewer);
    if (name === agentChannel(viewer.agentId) || name === globalChannel(viewer.bid)) return;
    if (viewer.level === ADMIN && name === adminChannel(viewer.bid)) return;
  }
  throw new DomainError('FORBIDDEN', `Not allowed to subscribe to channel ${JSON.stringify(name.slice(0, 100))}`);
}

/**
 * A real-time connection names its merchant by `appkey` (spec: "`ws_address` and `appkey`");
 * it must be the merchant of the identity it presents, so an identity cannot listen under
 * another merchant's application.
 */
export async function requireOwnAppkey(deps: Deps, viewer: ChannelViewer, appkey: string): Promise<void> {
  const [merchant] = await deps.db
    .select({ appkey: merchants.appkey })
    .from(merchants)
    .where(eq(merchants.id, viewer.merchantId))
    .limit(1);
  if (merchant?.appkey !== appkey) {
    throw new DomainError('FORBIDDEN', "appkey is not the merchant's of this identity");
  }
}

/** What a channel subscription does with an event of its channel. */
type EventFate = 'deliver' | 'skip' | 'last';

/**
 * The per-subscriber rule of a channel, applied by the delivery path (src/subscriptions/fanout.ts)
 * to every event, replayed or live. An agent's own channel carries the `session.ended` events of
 * all its Sessions: the one of this subscriber's Session is its last event (the client knows to
 * log in again), another Session's is not its business. On any other channel of an agent the
 * end of its Session is watched beside it (`SessionEndWatches`) and delivered there as last.
 */
export function eventFate(viewer: ChannelViewer, name: string, event: ChannelEvent): EventFate {
  if (viewer.kind === 'visitor' || event.event !== SESSION_ENDED || name !== agentChannel(viewer.agentId)) {
    return 'deliver';
  }
  return endsSession(event, viewer) ? 'last' : 'skip';
}

/** Whether `event` is the `session.ended` of the viewer's own Session. */
export const endsSession = (event: ChannelEvent, viewer: HeldAgentViewer) =>
  event.event === SESSION_ENDED &&
  ((event.data as { sessions?: string[] }).sessions ?? []).includes(sessionFingerprint(viewer.session.id));

/** Someone waiting for the end of one Session. */
interface SessionEndWaiter {
  viewer: HeldAgentViewer;
  settle(event: ChannelEvent | undefined): void;
  /** Told each `agent.level_changed` of the agent while it waits. */
  onLevel?: (level: string) => void;
}

/** One bus subscription to an agent channel, shared by everyone on this instance waiting for a Session end there. */
interface AgentChannelWatch {
  waiters: Set<SessionEndWaiter>;
  stop: AbortController;
}

/** The instance's waits for Session ends (owned by the real-time service, src/resolvers/realtime.ts). */
export interface SessionEndWatches {
  /**
   * Resolves with the `session.ended` event of the viewer's Session, or undefined when `signal`
   * aborts first (or the watch fails, or the watches are stopped). Meanwhile `onLevel` is told
   * the new level of each `agent.level_changed` of the agent (an admin changed it).
   */
  watch(
    viewer: HeldAgentViewer,
    signal: AbortSignal,
    onLevel?: (level: string) => void,
  ): Promise<ChannelEvent | undefined>;
  /** Settles every wait with undefined and releases the bus subscriptions (graceful shutdown). */
  stop(): void;
}

/**
 * Waits for Session ends. Transports use them to close a connection whose Session ended; every
 * agent socket and channel subscription waits on one, so the waits on an agent channel share
 * one bus subscription per instance instead of costing one each. `deps.bus` is read when a
 * watch starts (the composition root may wrap the bus after the deps are built).
 */
export function createSessionEndWatches(deps: Pick<Deps, 'bus' | 'log'>): SessionEndWatches {
  const watches = new Map<string, AgentChannelWatch>();

  async function follow(channel: string, watch: AgentChannelWatch) {
    try {
      for await (const event of deps.bus.subscribe(channel, { signal: watch.stop.signal })) {
        if (event.event === AGENT_LEVEL_CHANGED) {
          const { level } = event.data as { level?: unknown };
          if (typeof level === 'string') for (const waiter of [...watch.waiters]) waiter.onLevel?.(level);
          continue;
        }
        if (event.event !== SESSION_ENDED) continue;
        for (const waiter of watch.waiters) if (endsSession(event, waiter.viewer)) waiter.settle(event);
      }
    } catch (error) {
      deps.log.warn({ err: (error as Error).message }, 'session watch stopped');
    }
  }

  return {
    watch(viewer, signal, onLevel) {
      if (signal.aborted) return Promise.resolve(undefined);
      const channel = agentChannel(viewer.agentId);
      let watch = watches.get(channel);
      if (!watch) {
        const started: AgentChannelWatch = { waiters: new Set(), stop: new AbortController() };
        watches.set(channel, started);
        void follow(channel, started).finally(() => {
          if (watches.get(channel) === started) watches.delete(channel);
          for (const waiter of started.waiters) waiter.settle(undefined);
        });
        watch = started;
      }
      const shared = watch;
      return new Promise((resolve) => {
        const onAbort = () => waiter.settle(undefined);
        const waiter: SessionEndWaiter = {
          viewer,
          onLevel,
          settle(event) {
            signal.removeEventListener('abort', onAbort);
            if (!shared.waiters.delete(waiter)) return;
            if (shared.waiters.size === 0) {
              // The last one left: nobody else can join this watch any more.
              if (watches.get(channel) === shared) watches.delete(channel);
              shared.stop.abort();
            }
            resolve(event);
          },
        };
        shared.waiters.add(waiter);
        signal.addEventListener('abort', onAbort, { once: true });
      });
    },
    stop() {
      for (const watch of [...watches.values()]) for (const waiter of [...watch.waiters]) waiter.settle(undefined);
      watches.clear();
    },
  };
}

/**
 * Re-checks the Session behind a long-lived connection. False when it is over: expired, logged
 * out, or its agent disabled or moved. An idle expiry happens silently in the session store, so
 * it is published here as `session.ended` (reason `expired`) and every connection of that
 * Session, on any instance, ends as on logout. A store outage counts as still valid (retry later).
 */
export async function revalidateAgentSession(
  deps: Deps,
  session: SessionPort | undefined,
  ended: { agentId: string; sessionId: string },
): Promise<boolean> {
  try {
    await requireAgent(deps, session);
    return true;
  } catch (error) {
    if (!(error instanceof DomainError)) return true;
    // requireAgent publishes the end itself for a disable, a mismatch or the absolute lifetime.
    if (!session?.state.agent) await publishSessionEnded(deps, ended.agentId, [ended.sessionId], 'expired');
    return false;
  }
}

/**
 * The namespaces of the gateway's own events, derived from the event catalog (`agent.login` ->
 * `agent.`), and the Pusher protocol's (`pusher:`, `pusher_internal:`).
 */
const RESERVED_PREFIXES = [
  ...new Set(eventNames.filter((n) => n.includes('.')).map((n) => n.slice(0, n.indexOf('.') + 1))),
  'pusher:',
  'pusher_internal:',
];

/**
 * Whether `event` is the gateway's to publish: a catalogued event (`session.ended`,
 * `history.gap`, `subscribed`, `typing`, …) or any name in one of their namespaces (`agent.*`,
 * `message.*`, `conversation.*`, `session.*`, `visitor.*`, `history.*`), compared
 * case-insensitively. Clients act on these (a forged `session.ended` would end their
 * subscriptions), so the internal publish API may not send them.
 */
export function isGatewayEventName(event: string): boolean {
  const name = event.toLowerCase();
  return isReservedEventName(name) || RESERVED_PREFIXES.some((prefix) => name.startsWith(prefix));
}

/** The internal publish API: other services post their own events here (never the gateway's names). */
export async function publishEvent(deps: Deps, input: { channel: string; event: string; data: unknown }) {
  if (isGatewayEventName(input.event)) {
    throw badInput(`event ${input.event} is reserved: the gateway publishes its own events`);
  }
  return deps.bus.publish(input.channel, input.event, input.data);
}
