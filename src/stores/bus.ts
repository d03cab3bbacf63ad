import { DomainError } from '../errors.js';
import { type Hubs, joinHub, type Listener, leaveHub, localHubs } from './bus-hubs.js';
import { keptPage, type Page } from './bus-replays.js';
import { compareIds, type EventId } from './event-id.js';

export interface ChannelEvent {
  /** Monotonic within the channel (`<ms>-<seq>`). */
  id: EventId;
  channel: string;
  event: string;
  data: unknown;
  /** ISO-8601 time of publication. */
  at: string;
}

/** The event a resuming subscriber gets when events after its `since` were already dropped. */
export const HISTORY_GAP = 'history.gap';

/**
 * The first event of a subscription without `since`: its id is the channel's current position,
 * so a client that has seen nothing else yet can still resume with `since` after a drop and
 * miss nothing published meanwhile. It carries no data and is not a published event.
 */
export const SUBSCRIBED = 'subscribed';

/** Undelivered live events one subscription may hold before it is ended as a slow consumer. */
export const DEFAULT_MAX_QUEUED_EVENTS = 500;

/** How many kept events a resuming subscriber reads at a time (bounds the memory of a replay). */
const REPLAY_PAGE = 100;

/**
 * Thrown by a subscription whose consumer fell more than `maxQueued` live events behind: its
 * queue is dropped rather than grown. The client resumes with `since` and reads from history.
 * A RATE_LIMITED DomainError, so adapters report it as such (the WebSocket adapter closes 1013).
 */
export class SlowConsumerError extends DomainError {
  constructor(readonly channel: string) {
    super('RATE_LIMITED', 'Too many undelivered events: this consumer is too slow; resume with since');
    this.name = 'SlowConsumerError';
  }
}

/** A publication that reached the bus after its `notAfter`: not sent. */
export class PublicationTooLate extends Error {
  constructor(readonly channel: string) {
    super(`publication on ${channel} refused: past its deadline`);
    this.name = 'PublicationTooLate';
  }
}

export interface SubscribeOptions {
  since?: EventId;
  signal?: AbortSignal;
  maxQueued?: number;
  replayOnly?: boolean;
}

export interface EventBus {
  /**
   * Appends an event to the channel's history and delivers it live. `ephemeral`: delivered live
   * with an id in the channel's order, but kept out of the history a resume reads (typing
   * indicators: no use after the fact, and a flood of them must not push real events out).
   * `notAfter` (epoch ms): refused (throws PublicationTooLate) when the bus gets to it later —
   * the outbox's lease: a publisher that stalled past it must not send what another has taken over.
   */
  publish(
    channel: string,
    event: string,
    data: unknown,
    opts?: { ephemeral?: boolean; notAfter?: number },
  ): Promise<ChannelEvent>;
  /**
   * Live events of `channel`. With `since`, first the kept events after it, in order, then live
   * ones, with no gap and no duplicate; a `history.gap` event first when some were dropped.
   * Without `since`, first a `subscribed` event whose id is the position to resume from.
   * Ends when `signal` aborts (promptly, even while waiting); throws SlowConsumerError when the
   * consumer lets more than `maxQueued` live events pile up. With `replayOnly`, ends after the
   * kept events (or the `subscribed` event) without listening: the caller listens on its own.
   */
  subscribe(channel: string, opts?: SubscribeOptions): AsyncGenerator<ChannelEvent>;
  close(): Promise<void>;
}

/** What a concrete store provides; the subscribe algorithm above it is shared. */
export interface HistoryBackend {
  append(channel: string, event: string, data: unknown, at: string, ephemeral: boolean): Promise<ChannelEvent>;
  /**
   * Up to `limit` kept events with id > `after`, oldest first, read atomically with whether
   * any event after `after` was dropped (trimmed, expired, or from before this history began).
   */
  page(channel: string, after: EventId, limit: number): Promise<{ events: ChannelEvent[]; lost: boolean }>;
  /**
   * The id of the channel's newest event; for a channel with no history, a position just before
   * now, recorded as its floor so that resuming from it later counts nothing as lost.
   */
  cursor(channel: string): Promise<EventId>;
  /** Starts live delivery of a channel to this instance. */
  listen(channel: string): Promise<void>;
  unlisten(channel: string): Promise<void>;
  close(): Promise<void>;
}

/** What the shared part gives a backend: where live events go, and what was delivered last. */
export interface LocalHubs {
  deliver(event: ChannelEvent): void;
  /** The channels listened to on this instance, with the last event id delivered on each. */
  cursors(): Iterable<[channel: string, lastId: EventId | undefined]>;
}

/**
 * History bookkeeping shared by both stores: each channel remembers its `floor`, the newest id
 * that may have been dropped. A history that starts afresh (first event, or after expiry) puts
 * its floor at its first id, so a `since` from before it counts as lost. Events after `since`
 * are lost exactly when `since < floor`.
 */
export const isLost = (since: EventId, floor: EventId | null | undefined) => !floor || compareIds(since, floor) < 0;

/** What both stores take besides their own settings. */
export interface BusOptions {
  maxQueued?: number;
  /** Called for each read of a channel's kept history that reaches the store (after coalescing). */
  onHistoryRead?: () => void;
}

/**
 * The bus over a store's history backend: the subscribe algorithm both stores share (resume
 * after `since` in pages, then live events without duplicates; one backend listener a channel
 * and instance, bus-hubs.ts; a read of the history shared by a reconnect storm, bus-replays.ts;
 * slow consumers ended). The stores: bus-memory.ts and bus-redis.ts.
 */
export function createBus(
  makeBackend: (hubs: LocalHubs) => HistoryBackend,
  defaults: { maxQueued: number; onHistoryRead?: () => void },
): EventBus {
  const hubs: Hubs = new Map();
  const backend = makeBackend(localHubs(hubs));
  const read = (channel: string, after: EventId): Promise<Page> => {
    defaults.onHistoryRead?.();
    return backend
      .page(channel, after, REPLAY_PAGE)
      .then(({ events, lost }) => ({ events, lost, complete: events.length < REPLAY_PAGE }));
  };
  const history: History = {
    backend,
    page(channel, after) {
      const hub = hubs.get(channel);
      // A hub not yet listening would not tell a kept read that the store moved on.
      return hub?.listening ? keptPage(hub, after, (from) => read(channel, from)) : read(channel, after);
    },
    join: (channel, listener) => joinHub(hubs, backend, channel, listener),
    leave: (channel, listener) => leaveHub(hubs, backend, channel, listener),
  };

  return {
    publish: (channel, event, data, opts) => {
      if (opts?.notAfter !== undefined && Date.now() > opts.notAfter)
        return Promise.reject(new PublicationTooLate(channel));
      return backend.append(channel, event, data, new Date().toISOString(), opts?.ephemeral === true);
    },
    subscribe: (channel, opts = {}) => subscribe(history, channel, opts, defaults.maxQueued),
    close: () => backend.close(),
  };
}

/** What the subscribe algorithm uses of its bus: the store, its pages of history, the channel's local hub. */
interface History {
  readonly backend: HistoryBackend;
  page(channel: string, after: EventId): Promise<Page>;
  join(channel: string, listener: Listener): Promise<void>;
  leave(channel: string, listener: Listener): void;
}

/** `EventBus.subscribe`: listen, then the `subscribed` event or the replay after `since`, then live events. */
async function* subscribe(
  history: History,
  channel: string,
  opts: SubscribeOptions,
  defaultMaxQueued: number,
): AsyncGenerator<ChannelEvent> {
  const { since, signal, maxQueued = defaultMaxQueued, replayOnly = false } = opts;
  const live = liveQueue(maxQueued, signal);
  // Listen before reading history, so nothing published in between is missed.
  if (!replayOnly) await history.join(channel, live.listener);
  try {
    let cursor = since;
    if (!cursor) {
      cursor = await history.backend.cursor(channel);
      yield { id: cursor, channel, event: SUBSCRIBED, data: {}, at: new Date().toISOString() };
    } else {
      // Replay page by page; each page says whether events after the cursor were dropped.
      while (!signal?.aborted) {
        const { events, lost, complete } = await history.page(channel, cursor);
        if (lost) {
          yield { id: cursor, channel, event: HISTORY_GAP, data: { since: cursor }, at: new Date().toISOString() };
        }
        for (const event of events) {
          yield event;
          cursor = event.id;
        }
        if (complete) break;
      }
    }
    while (!signal?.aborted && !replayOnly) {
      if (live.overflowed) throw new SlowConsumerError(channel);
      const event = live.take();
      if (!event) {
        await live.arrival();
        continue;
      }
      if (cursor && compareIds(event.id, cursor) <= 0) continue;
      cursor = event.id;
      yield event;
    }
  } finally {
    live.dispose();
    history.leave(channel, live.listener);
  }
}

/**
 * One subscriber's live events, waiting here until it pulls them; past `maxQueued` the queue is
 * dropped and the subscription ends, so a stalled consumer costs bounded memory.
 */
function liveQueue(maxQueued: number, signal: AbortSignal | undefined) {
  let queue: ChannelEvent[] = [];
  let overflowed = false;
  let wake: (() => void) | undefined;
  const listener: Listener = (event) => {
    if (overflowed) return;
    if (queue.length >= maxQueued) {
      overflowed = true;
      queue = [];
    } else {
      queue.push(event);
    }
    wake?.();
  };
  const onAbort = () => wake?.();
  signal?.addEventListener('abort', onAbort);
  return {
    listener,
    /** True once the queue was dropped: the subscription must end. */
    get overflowed() {
      return overflowed;
    },
    take: () => queue.shift(),
    /** Resolves when an event arrives, the queue overflows or `signal` aborts. */
    arrival: () =>
      new Promise<void>((resolve) => {
        wake = () => {
          wake = undefined;
          resolve();
        };
      }),
    dispose: () => signal?.removeEventListener('abort', onAbort),
  };
}
