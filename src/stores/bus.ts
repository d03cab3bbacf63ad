import { DomainError } from '../errors.js';
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
  subscribe(
    channel: string,
    opts?: { since?: EventId; signal?: AbortSignal; maxQueued?: number; replayOnly?: boolean },
  ): AsyncGenerator<ChannelEvent>;
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

type Listener = (event: ChannelEvent) => void;

/** What both stores take besides their own settings. */
export interface BusOptions {
  maxQueued?: number;
  /** Called for each read of a channel's kept history that reaches the store (after coalescing). */
  onHistoryRead?: () => void;
}

/** How long a read of a channel's history serves later resumes (the span of a reconnect storm). */
const KEEP_REPLAY_MS = 30_000;
/** Reads kept per channel: one per position its subscribers resume from, newest kept. */
const MAX_KEPT_REPLAYS = 4;

/**
 * A read of a channel's history after `after`, begun while the channel's hub listened, kept for
 * the resumes that follow it. It is the store's answer for as long as no event has reached the
 * hub since the read began: an event the read did not see was appended after it, so it reaches
 * the hub later (pub/sub, or the catch-up after a Redis reconnect) — the first one drops every
 * kept read. A subscriber that takes a kept read already listens on the hub, so what reaches the
 * hub from then on reaches it too: the kept events and its live ones leave no gap between them.
 */
interface KeptReplay {
  after: EventId;
  page: Promise<{ events: ChannelEvent[]; lost: boolean; complete: boolean }>;
  until: number;
}

interface Hub {
  listeners: Set<Listener>;
  lastId?: EventId;
  ready: Promise<void>;
  /** Set once `ready` resolved: live events reach the hub from then on. */
  listening: boolean;
  replays: KeptReplay[];
}

/**
 * The bus over a store's history backend: the subscribe algorithm both stores share (resume
 * after `since` in pages, then live events without duplicates; one backend listener a channel
 * and instance; slow consumers ended). The stores: bus-memory.ts and bus-redis.ts.
 */
export function createBus(
  makeBackend: (hubs: LocalHubs) => HistoryBackend,
  defaults: { maxQueued: number; onHistoryRead?: () => void },
): EventBus {
  // One hub a channel with local listeners; `lastId` drops duplicates (replays after reconnects).
  const hubs = new Map<string, Hub>();
  const deliver = (event: ChannelEvent) => {
    const hub = hubs.get(event.channel);
    if (!hub) return;
    // Any event reaching the channel may be one a kept read did not see: later resumes read anew.
    if (hub.replays.length > 0) hub.replays = [];
    if (hub.lastId && compareIds(event.id, hub.lastId) <= 0) return;
    hub.lastId = event.id;
    for (const listener of hub.listeners) listener(event);
  };
  const backend = makeBackend({
    deliver,
    *cursors() {
      for (const [channel, hub] of hubs) yield [channel, hub.lastId];
    },
  });

  /**
   * A page of a channel's history, read from the store or taken from a read kept on its hub.
   * `complete`: no kept event after the last one (the subscriber's replay is over).
   */
  type Page = { events: ChannelEvent[]; lost: boolean; complete: boolean };
  const read = (channel: string, after: EventId): Promise<Page> => {
    defaults.onHistoryRead?.();
    return backend
      .page(channel, after, REPLAY_PAGE)
      .then(({ events, lost }) => ({ events, lost, complete: events.length < REPLAY_PAGE }));
  };

  /**
   * The page after `after` for a subscriber that already listens on this instance (its own hub
   * listener, or the fan-out's). In a reconnect storm every tab of a conversation resumes from
   * the same position, or from one a little later, within a few seconds: they share one read
   * of the store, kept on the channel's hub (see KeptReplay for why that answer stays exact).
   */
  function page(channel: string, after: EventId): Promise<Page> {
    const hub = hubs.get(channel);
    if (!hub?.listening) return read(channel, after); // nothing would tell us the store moved on
    const now = Date.now();
    hub.replays = hub.replays.filter((kept) => kept.until > now);
    const same = hub.replays.find((kept) => kept.after === after);
    if (same) return same.page;
    const earlier = hub.replays.find((kept) => compareIds(kept.after, after) < 0);
    if (earlier) {
      // Holds for a later position too, when it saw every kept event and none was dropped: the
      // store would answer the events after `after` among them, and no gap (its floor ≤ kept.after).
      return earlier.page.then((kept) =>
        kept.complete && !kept.lost
          ? { events: kept.events.filter((event) => compareIds(event.id, after) > 0), lost: false, complete: true }
          : read(channel, after),
      );
    }
    const replay: KeptReplay = { after, page: read(channel, after), until: now + KEEP_REPLAY_MS };
    replay.page.catch(() => {
      hub.replays = hub.replays.filter((kept) => kept !== replay);
    });
    hub.replays.push(replay);
    if (hub.replays.length > MAX_KEPT_REPLAYS) hub.replays.shift();
    return replay.page;
  }

  async function join(channel: string, listener: Listener) {
    let hub = hubs.get(channel);
    if (!hub) {
      const created: Hub = { listeners: new Set(), ready: backend.listen(channel), listening: false, replays: [] };
      hub = created;
      hubs.set(channel, created);
      created.ready.then(
        () => {
          created.listening = true;
        },
        () => {
          if (hubs.get(channel) === created) hubs.delete(channel);
        },
      );
    }
    hub.listeners.add(listener);
    try {
      await hub.ready;
    } catch (error) {
      hub.listeners.delete(listener);
      throw error;
    }
  }

  function leave(channel: string, listener: Listener) {
    const hub = hubs.get(channel);
    if (!hub?.listeners.delete(listener)) return;
    if (hub.listeners.size === 0) {
      hubs.delete(channel);
      backend.unlisten(channel).catch(() => {});
    }
  }

  return {
    publish: (channel, event, data, opts) => {
      if (opts?.notAfter !== undefined && Date.now() > opts.notAfter)
        return Promise.reject(new PublicationTooLate(channel));
      return backend.append(channel, event, data, new Date().toISOString(), opts?.ephemeral === true);
    },

    async *subscribe(channel, { since, signal, maxQueued = defaults.maxQueued, replayOnly = false } = {}) {
      // Live events wait here until the consumer pulls them; past `maxQueued` the queue is
      // dropped and the subscription ends, so a stalled consumer costs bounded memory.
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
      // Listen before reading history, so nothing published in between is missed.
      if (!replayOnly) await join(channel, listener);
      try {
        let cursor = since;
        if (!cursor) {
          cursor = await backend.cursor(channel);
          yield { id: cursor, channel, event: SUBSCRIBED, data: {}, at: new Date().toISOString() };
        } else {
          // Replay page by page; each page says whether events after the cursor were dropped.
          while (!signal?.aborted) {
            const { events, lost, complete } = await page(channel, cursor);
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
          if (overflowed) throw new SlowConsumerError(channel);
          const event = queue.shift();
          if (!event) {
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
            wake = undefined;
            continue;
          }
          if (cursor && compareIds(event.id, cursor) <= 0) continue;
          cursor = event.id;
          yield event;
        }
      } finally {
        signal?.removeEventListener('abort', onAbort);
        leave(channel, listener);
      }
    },

    close: () => backend.close(),
  };
}
