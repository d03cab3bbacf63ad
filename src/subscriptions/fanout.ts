import type { WebSocket } from 'ws';
import type { Deps } from '../deps.js';
import { authorizeChannel, type ChannelViewer, endsSession, eventFate } from '../resolvers/channels.js';
import { heldViewer } from '../resolvers/viewer.js';
import { type ChannelEvent, DEFAULT_MAX_QUEUED_EVENTS, SlowConsumerError, SUBSCRIBED } from '../stores/bus.js';
import { compareIds, type EventId } from '../stores/event-id.js';
import type { Connection } from './connection.js';
import { MAX_BUFFERED_BYTES } from './limits.js';

/**
 * The one delivery path of channel events, for both transports (graphql-ws and Pusher). Per
 * instance, one bus subscription per channel takes each event once; each distinct frame format
 * (a graphql-ws document and its variables, a Pusher channel name) serializes it once; then one
 * frame per subscription is written straight to its socket, with the slow-consumer rule checked
 * after each write. A subscription is a small record here, not an iterator chain: a new one first
 * catches up (the `subscribed` event, or the replay after `since`) while live events wait in its
 * record, then those that the catch-up did not already cover, then it is live.
 */

/** A way of writing events shared by every subscription that asked the same (serialized once per event). */
export interface FrameFormat {
  /** Names the format: subscriptions with the same key share one (graphql-ws: document and variables). */
  readonly key: string;
  /** The event serialized for this format; undefined when the protocol does not send it. */
  payload(event: ChannelEvent): string | undefined;
}

/** A socket as the delivery path sees it: where frames go, and who to end when it falls behind. */
export interface FanoutSocket {
  readonly socket: WebSocket;
  readonly connection: Connection;
  /** The close reason of a slow consumer in this protocol. */
  readonly slowReason: string;
  /** Its channel subscriptions (a Session end finishes those of the agent's other channels). */
  readonly subscriptions: Set<ChannelSubscription>;
}

/** Told when a subscription ends (by the hub, the client, or the socket closing). */
export interface SubscriptionOwner {
  /** `error` when the subscription could not be served (e.g. the bus failed while catching up). */
  ended(error?: unknown): void;
}

export interface ChannelSubscription {
  readonly channel: string;
  readonly viewer: ChannelViewer;
  readonly to: FanoutSocket;
  readonly format: FrameFormat;
  /** What the frame holds before and after the shared payload (graphql-ws: the operation id). */
  readonly before: string;
  readonly after: string;
  readonly owner: SubscriptionOwner;
  /** Live events that arrived while catching up (undefined once live). */
  pending: ChannelEvent[] | undefined;
  /**
   * Where the catch-up ended, until the first live event after it: the feed may still be behind
   * the store the catch-up read (events queued or not yet read from Redis), and what it covered
   * must not be delivered again.
   */
  covered: EventId | undefined;
  ended: boolean;
}

/**
 * One serialized event of one format, shared by a walk's subscriptions: its text, its UTF-8 bytes
 * (encoded once, when first needed), and the last WebSocket frame built from it (with the
 * before/after it was built for: subscriptions with the same operation id share the frame).
 */
interface Payload {
  readonly text: string;
  bytes(): Buffer;
  before?: string;
  after?: string;
  frame?: Buffer;
}

function payloadOf(text: string | undefined): Payload | undefined {
  if (text === undefined) return undefined;
  let bytes: Buffer | undefined;
  return { text, bytes: () => (bytes ??= Buffer.from(text)) };
}

/** What the pre-framed write reads of a `ws` WebSocket (ws 8 internals): its TCP socket and its sender's state. */
interface WsInternals {
  _socket?: { write(frame: Buffer): boolean };
  _sender?: { _state: number; _queue: unknown[] };
}
/** ws's Sender state when it is not deflating or reading a Blob (nothing may be queued ahead of a frame). */
const SENDER_IDLE = 0;

/**
 * The TCP socket a pre-built frame may be written to directly: when ws's sender is idle with
 * nothing queued (a frame written past a queued one would overtake it). Undefined otherwise, and
 * on a `ws` whose internals differ (test/unit/fanout-frame.test.ts fails then, rather than every
 * delivery silently taking the slower `send`).
 */
export function frameWriter(socket: unknown): { write(frame: Buffer): boolean } | undefined {
  const raw = socket as WsInternals;
  return raw._socket && raw._sender?._state === SENDER_IDLE && raw._sender._queue.length === 0
    ? raw._socket
    : undefined;
}

/**
 * A final, unmasked text frame (RFC 6455 §5.2) of `before` + payload + `after`, built once and
 * written as is to every socket it suits: one write per socket, where ws's `send` would encode
 * the string, allocate a header and write both (corked) for each socket. Server frames are never
 * masked, so the bytes are the same for every socket.
 */
export function textFrame(before: string, payload: Buffer, after: string): Buffer {
  const beforeBytes = Buffer.byteLength(before);
  const length = beforeBytes + payload.length + Buffer.byteLength(after);
  const header = length < 126 ? 2 : length < 65_536 ? 4 : 10;
  const frame = Buffer.allocUnsafe(header + length);
  frame[0] = 0x81; // FIN, text
  if (length < 126) frame[1] = length;
  else if (length < 65_536) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 127;
    frame.writeUInt32BE(Math.floor(length / 2 ** 32), 2);
    frame.writeUInt32BE(length >>> 0, 6);
  }
  frame.write(before, header);
  payload.copy(frame, header + beforeBytes);
  frame.write(after, header + beforeBytes + payload.length);
  return frame;
}

/**
 * The viewer a subscription keeps for its life: its socket's when they name the same identity
 * and Session (the usual case: no second copy per subscription), else the held part of its own.
 */
function keptViewer(viewer: ChannelViewer, socket: ChannelViewer | undefined): ChannelViewer {
  if (socket?.kind === 'agent' && viewer.kind === 'agent') {
    if (socket.agentId === viewer.agentId && socket.session.id === viewer.session.id) return socket;
  } else if (socket?.kind === 'visitor' && viewer.kind === 'visitor') {
    if (socket.visitorId === viewer.visitorId && socket.channel === viewer.channel) return socket;
  }
  return heldViewer(viewer);
}

/** Live events the hub's own bus subscription may hold while a walk is running; far above any burst. */
const FEED_MAX_QUEUED = 100_000;

interface Feed {
  subscriptions: Set<ChannelSubscription>;
  /** Resolves once the bus subscription listens (its `subscribed` event). */
  live: Promise<void>;
  /** The last event id the feed took (its `subscribed` position at first): later events come after it. */
  position: EventId | undefined;
  stop: AbortController;
}

export interface Fanout {
  /** Starts a subscription (authorization is the caller's); it catches up, then goes live. */
  subscribe(
    spec: Omit<ChannelSubscription, 'pending' | 'covered' | 'ended'> & { since?: EventId },
  ): ChannelSubscription;
  /** Ends a subscription (idempotent); its owner is told. */
  end(subscription: ChannelSubscription, error?: unknown): void;
  /** The agent Session of a socket ended: its subscriptions to other channels than the agent's get the event as their last. */
  sessionEnded(to: FanoutSocket, event: ChannelEvent): void;
  /**
   * An admin changed the level of agent `agentId`: its subscriptions on this socket take the new
   * level, and those it no longer allows (`authorizeChannel`) end with FORBIDDEN.
   */
  levelChanged(to: FanoutSocket, agentId: string, level: string): void;
  /** The format of `key` shared by every subscription asking it (made once while any uses it). */
  format(key: string, make: () => FrameFormat): FrameFormat;
  /** The visitor channels subscribed on this instance, with their merchant (business-hours events). */
  visitorChannels(): Iterable<{ channel: string; merchantId: string }>;
}

export function createFanout(deps: Pick<Deps, 'bus' | 'metrics' | 'log'>): Fanout {
  const feeds = new Map<string, Feed>();
  const formats = new Map<string, { format: FrameFormat; users: number }>();

  /** Writes one frame; a socket past the buffer limit is ended as a slow consumer. */
  function write(sub: ChannelSubscription, payload: Payload) {
    const { socket } = sub.to;
    if (socket.readyState !== socket.OPEN) return;
    const writer = frameWriter(socket);
    if (writer) {
      if (payload.before !== sub.before || payload.after !== sub.after || !payload.frame) {
        payload.frame = textFrame(sub.before, payload.bytes(), sub.after);
        payload.before = sub.before;
        payload.after = sub.after;
      }
      writer.write(payload.frame);
    } else {
      socket.send(sub.before === '' ? payload.text : sub.before + payload.text + sub.after);
    }
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES) slow(sub.to);
  }

  function slow(to: FanoutSocket) {
    if (to.connection.signal.aborted) return;
    deps.metrics.eventDropped('slow_consumer');
    to.connection.end('slow_consumer', to.slowReason);
  }

  /** Delivers one event to one subscription by the channel's rule; `payloads` shares serializations within a walk. */
  function deliver(sub: ChannelSubscription, event: ChannelEvent, payloads?: Map<FrameFormat, Payload | undefined>) {
    const fate = eventFate(sub.viewer, sub.channel, event);
    if (fate === 'skip') return 0;
    let payload: Payload | undefined;
    if (payloads?.has(sub.format)) payload = payloads.get(sub.format);
    else {
      payload = payloadOf(sub.format.payload(event));
      payloads?.set(sub.format, payload);
    }
    if (payload !== undefined) write(sub, payload);
    if (fate === 'last') end(sub);
    return payload === undefined ? 0 : 1;
  }

  /** One live event to every subscription of its channel on this instance. */
  function walk(feed: Feed, event: ChannelEvent) {
    const payloads = new Map<FrameFormat, Payload | undefined>();
    let delivered = 0;
    for (const sub of feed.subscriptions) {
      if (sub.pending) {
        if (sub.pending.length < DEFAULT_MAX_QUEUED_EVENTS) sub.pending.push(event);
        else slow(sub.to); // fell behind while catching up: it resumes with since
        continue;
      }
      if (sub.covered) {
        if (compareIds(event.id, sub.covered) <= 0) continue;
        sub.covered = undefined;
      }
      delivered += deliver(sub, event, payloads);
    }
    if (delivered > 0) deps.metrics.eventDelivered(delivered);
  }

  function feedOf(channel: string): Feed {
    const existing = feeds.get(channel);
    if (existing) return existing;
    const stop = new AbortController();
    const events = deps.bus.subscribe(channel, { signal: stop.signal, maxQueued: FEED_MAX_QUEUED });
    let listening = () => {};
    const feed: Feed = {
      subscriptions: new Set(),
      live: new Promise<void>((resolve) => {
        listening = resolve;
      }),
      position: undefined,
      stop,
    };
    feeds.set(channel, feed);
    const run = async () => {
      let failure: unknown;
      try {
        for await (const event of events) {
          feed.position = event.id;
          if (event.event === SUBSCRIBED) listening();
          else walk(feed, event);
        }
      } catch (error) {
        failure = error;
      } finally {
        listening(); // wakes the catch-ups waiting on a feed that never listened; they find their end
        if (feeds.get(channel) === feed) feeds.delete(channel);
        // The bus gave up (an outage, or the feed itself fell behind): every subscriber resumes.
        for (const sub of [...feed.subscriptions]) {
          if (failure instanceof SlowConsumerError) slow(sub.to);
          end(sub, failure ?? new Error('channel feed stopped'));
        }
      }
    };
    void run();
    return feed;
  }

  /** The `subscribed` event or the replay after `since`, then the live events that waited meanwhile. */
  async function catchUp(sub: ChannelSubscription, feed: Feed, since: EventId | undefined) {
    try {
      await feed.live;
      if (sub.ended) return;
      let cursor = since;
      for await (const event of deps.bus.subscribe(sub.channel, { since, replayOnly: true })) {
        if (sub.ended) return;
        deliver(sub, event);
        cursor = event.id;
      }
      const waiting = sub.pending ?? [];
      sub.pending = undefined;
      let delivered = 0;
      for (const event of waiting) {
        if (sub.ended) break;
        if (!cursor || compareIds(event.id, cursor) > 0) delivered += deliver(sub, event);
      }
      // Only while the feed is behind what the catch-up read (an idle subscriber keeps nothing).
      if (cursor && (!feed.position || compareIds(cursor, feed.position) > 0)) sub.covered = cursor;
      if (delivered > 0) deps.metrics.eventDelivered(delivered);
    } catch (error) {
      end(sub, error);
    }
  }

  function end(sub: ChannelSubscription, error?: unknown) {
    if (sub.ended) return;
    sub.ended = true;
    sub.pending = undefined;
    sub.to.subscriptions.delete(sub);
    const shared = formats.get(sub.format.key);
    if (shared && --shared.users <= 0) formats.delete(sub.format.key);
    const feed = feeds.get(sub.channel);
    if (feed?.subscriptions.delete(sub) && feed.subscriptions.size === 0) {
      feeds.delete(sub.channel);
      feed.stop.abort();
    }
    deps.metrics.subscriptionEnded();
    sub.owner.ended(error);
  }

  return {
    *visitorChannels() {
      for (const [channel, feed] of feeds) {
        const viewer = feed.subscriptions.values().next().value?.viewer;
        if (viewer?.kind === 'visitor') yield { channel, merchantId: viewer.merchantId };
      }
    },
    subscribe({ since, viewer, ...spec }) {
      const sub: ChannelSubscription = {
        ...spec,
        viewer: keptViewer(viewer, spec.to.connection.viewer),
        pending: [],
        covered: undefined,
        ended: false,
      };
      const shared = formats.get(sub.format.key);
      if (shared) shared.users++;
      const feed = feedOf(sub.channel);
      feed.subscriptions.add(sub);
      sub.to.subscriptions.add(sub);
      deps.metrics.subscriptionStarted();
      void catchUp(sub, feed, since);
      return sub;
    },
    end,
    sessionEnded(to, event) {
      for (const sub of [...to.subscriptions]) {
        if (sub.viewer.kind !== 'agent' || sub.channel === event.channel || !endsSession(event, sub.viewer)) continue;
        const payload = payloadOf(sub.format.payload({ ...event, channel: sub.channel }));
        if (payload !== undefined) write(sub, payload);
        end(sub);
      }
    },
    levelChanged(to, agentId, level) {
      for (const sub of [...to.subscriptions]) {
        const { viewer } = sub;
        if (viewer.kind !== 'agent' || viewer.agentId !== agentId) continue;
        viewer.level = level;
        try {
          authorizeChannel(viewer, sub.channel);
        } catch (error) {
          end(sub, error);
        }
      }
    },
    format(key, make) {
      let shared = formats.get(key);
      if (!shared) {
        shared = { format: make(), users: 0 }; // counted by `subscribe`
        formats.set(key, shared);
      }
      return shared.format;
    },
  };
}
