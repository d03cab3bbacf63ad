import type { WebSocket } from 'ws';
import type { Deps } from '../deps.js';
import { authorizeChannel, type ChannelViewer, endsSession } from '../resolvers/channels.js';
import { heldViewer } from '../resolvers/viewer.js';
import type { ChannelEvent } from '../stores/bus.js';
import type { EventId } from '../stores/event-id.js';
import type { Connection } from './connection.js';
import { catchUp, feedOf, write } from './fanout/delivery.js';
import { payloadOf } from './fanout/frames.js';
import { endSubscription, type FanoutState } from './fanout/state.js';

/**
 * The one delivery path of channel events, for both transports (graphql-ws and Pusher). Per
 * instance, one bus subscription per channel takes each event once; each distinct frame format
 * (a graphql-ws document and its variables, a Pusher channel name) serializes it once; then one
 * frame per subscription is written straight to its socket, with the slow-consumer rule checked
 * after each write. A subscription is a small record here, not an iterator chain: a new one first
 * catches up (the `subscribed` event, or the replay after `since`) while live events wait in its
 * record, then those that the catch-up did not already cover, then it is live.
 * This file holds the contract and the operations on subscriptions; fanout/ the rest by concern:
 * delivery.ts (feeds, walks and catch-ups), frames.ts (the bytes), state.ts (what they share).
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
  const state: FanoutState = { deps, feeds: new Map(), formats: new Map() };
  return {
    visitorChannels: () => visitorChannels(state),
    subscribe: (spec) => subscribe(state, spec),
    end: (sub, error) => endSubscription(state, sub, error),
    sessionEnded: (to, event) => sessionEnded(state, to, event),
    levelChanged: (to, agentId, level) => levelChanged(state, to, agentId, level),
    format: (key, make) => format(state, key, make),
  };
}

/** Counts the subscription in its format and its channel's feed, then starts its catch-up. */
function subscribe(
  state: FanoutState,
  { since, viewer, ...spec }: Parameters<Fanout['subscribe']>[0],
): ChannelSubscription {
  const sub: ChannelSubscription = {
    ...spec,
    viewer: keptViewer(viewer, spec.to.connection.viewer),
    pending: [],
    covered: undefined,
    ended: false,
  };
  const shared = state.formats.get(sub.format.key);
  if (shared) shared.users++;
  const feed = feedOf(state, sub.channel);
  feed.subscriptions.add(sub);
  sub.to.subscriptions.add(sub);
  state.deps.metrics.subscriptionStarted();
  void catchUp(state, sub, feed, since);
  return sub;
}

function format(state: FanoutState, key: string, make: () => FrameFormat): FrameFormat {
  let shared = state.formats.get(key);
  if (!shared) {
    shared = { format: make(), users: 0 }; // counted by `subscribe`
    state.formats.set(key, shared);
  }
  return shared.format;
}

function* visitorChannels(state: FanoutState) {
  for (const [channel, feed] of state.feeds) {
    const viewer = feed.subscriptions.values().next().value?.viewer;
    if (viewer?.kind === 'visitor') yield { channel, merchantId: viewer.merchantId };
  }
}

/** A socket's agent Session ended: the event goes out as the last of each subscription it ends on another channel. */
function sessionEnded(state: FanoutState, to: FanoutSocket, event: ChannelEvent) {
  for (const sub of [...to.subscriptions]) {
    if (sub.viewer.kind !== 'agent' || sub.channel === event.channel || !endsSession(event, sub.viewer)) continue;
    const payload = payloadOf(sub.format.payload({ ...event, channel: sub.channel }));
    if (payload !== undefined) write(state, sub, payload);
    endSubscription(state, sub);
  }
}

/** An agent's level changed: its subscriptions on the socket take it, and those it no longer allows end. */
function levelChanged(state: FanoutState, to: FanoutSocket, agentId: string, level: string) {
  for (const sub of [...to.subscriptions]) {
    const { viewer } = sub;
    if (viewer.kind !== 'agent' || viewer.agentId !== agentId) continue;
    viewer.level = level;
    try {
      authorizeChannel(viewer, sub.channel);
    } catch (error) {
      endSubscription(state, sub, error);
    }
  }
}
