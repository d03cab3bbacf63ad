import { eq } from 'drizzle-orm';
import { merchants } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { badInput, DomainError } from '../errors.js';
import type { ChannelEvent } from '../stores/bus.js';
import { eventNames, isReservedEventName } from './event-catalog.js';
import { agentChannel, globalChannel, publishSessionEnded, SESSION_ENDED, sessionFingerprint } from './events.js';
import type { SessionPort } from './session.js';
import { type AgentViewer, requireAgent, requireOnlineReception, type VisitorViewer } from './viewer.js';

export type ChannelViewer = AgentViewer | VisitorViewer;

/**
 * Who may listen where: a visitor to its own generated channel only; an agent (not a ticket
 * agent) to `agent-{its id}` and `global-{its merchant's bid}` only.
 */
export function authorizeChannel(viewer: ChannelViewer, name: string): void {
  if (viewer.kind === 'visitor') {
    if (name === viewer.channel) return;
  } else {
    requireOnlineReception(viewer);
    if (name === agentChannel(viewer.agentId) || name === globalChannel(viewer.bid)) return;
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

/**
 * An async iterator over `run(signal)` whose `return()` takes effect at once: it aborts
 * `signal`, which wakes the generator wherever it waits. (A bare async generator's `return()`
 * waits for its next `yield`, so a subscription to a quiet channel would never be released
 * when its client leaves.)
 */
function abortable<T>(run: (signal: AbortSignal) => AsyncGenerator<T>, outer?: AbortSignal): AsyncGenerator<T> {
  const stop = new AbortController();
  const onOuterAbort = () => stop.abort();
  outer?.addEventListener('abort', onOuterAbort, { once: true });
  const inner = run(stop.signal);
  const release = () => {
    outer?.removeEventListener('abort', onOuterAbort);
    stop.abort();
  };
  const iterator: AsyncGenerator<T> = {
    next: () => inner.next(),
    return(value) {
      release();
      return inner.return(value as T);
    },
    throw(error) {
      release();
      return inner.throw(error);
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}

/**
 * The events of an authorized channel (replaying from `since` first). An agent's subscription
 * ends with a final `session.ended` event when its Session is ended anywhere (logout, disable,
 * expiry), so the client knows to log in again. Authorization is checked before this returns,
 * so a refusal is an error of this subscription only.
 */
export function subscribeChannel(
  deps: Deps,
  viewer: ChannelViewer,
  name: string,
  opts: { since?: string; signal?: AbortSignal } = {},
): AsyncGenerator<ChannelEvent> {
  authorizeChannel(viewer, name);
  return abortable(async function* (signal) {
    if (viewer.kind === 'visitor') {
      yield* deps.bus.subscribe(name, { since: opts.since, signal });
      return;
    }
    if (name === agentChannel(viewer.agentId)) {
      for await (const event of deps.bus.subscribe(name, { since: opts.since, signal })) {
        if (event.event !== SESSION_ENDED) {
          yield event;
        } else if (endsSession(event, viewer)) {
          yield event;
          return;
        } // another Session of the same agent ended: not this subscriber's business
      }
      return;
    }
    // Any other channel: watch the agent channel beside it for the end of this Session.
    const watch = new AbortController();
    const onAbort = () => watch.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    let ended: ChannelEvent | undefined;
    void deps.realtime.sessionEnds.watch(viewer, watch.signal).then((event) => {
      ended = event && { ...event, channel: name };
      watch.abort();
    });
    try {
      yield* deps.bus.subscribe(name, { since: opts.since, signal: watch.signal });
      if (ended) yield ended;
    } finally {
      signal.removeEventListener('abort', onAbort);
      watch.abort();
    }
  }, opts.signal);
}

const endsSession = (event: ChannelEvent, viewer: AgentViewer) =>
  event.event === SESSION_ENDED &&
  ((event.data as { sessions?: string[] }).sessions ?? []).includes(sessionFingerprint(viewer.session.id));

/** Someone waiting for the end of one Session. */
interface SessionEndWaiter {
  viewer: AgentViewer;
  settle(event: ChannelEvent | undefined): void;
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
   * aborts first (or the watch fails, or the watches are stopped).
   */
  watch(viewer: AgentViewer, signal: AbortSignal): Promise<ChannelEvent | undefined>;
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
        if (event.event !== SESSION_ENDED) continue;
        for (const waiter of watch.waiters) if (endsSession(event, waiter.viewer)) waiter.settle(event);
      }
    } catch (error) {
      deps.log.warn({ err: (error as Error).message }, 'session watch stopped');
    }
  }

  return {
    watch(viewer, signal) {
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
