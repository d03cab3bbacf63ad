import type { Deps } from '../../deps.js';
import type { EventId } from '../../stores/event-id.js';
import type { ChannelSubscription, FanoutSocket, FrameFormat } from '../fanout.js';

/**
 * The fan-out's state on one instance, and the two ways a subscription leaves it (ended, or its
 * socket ended as a slow consumer): shared by delivery (delivery.ts) and by the fan-out's
 * operations (fanout.ts), each of which may end a subscription.
 */

/** One bus subscription of a channel, shared by every subscription to that channel on the instance. */
export interface Feed {
  subscriptions: Set<ChannelSubscription>;
  /** Resolves once the bus subscription listens (its `subscribed` event). */
  live: Promise<void>;
  /** The last event id the feed took (its `subscribed` position at first): later events come after it. */
  position: EventId | undefined;
  stop: AbortController;
}

export interface FanoutState {
  readonly deps: Pick<Deps, 'bus' | 'metrics' | 'log'>;
  /** One feed per channel with subscriptions on this instance. */
  readonly feeds: Map<string, Feed>;
  /** One format per key while any subscription uses it (serialized once per event). */
  readonly formats: Map<string, { format: FrameFormat; users: number }>;
}

/** Ends a subscription (idempotent): out of its socket, its format and its feed (the feed stops with its last), owner told. */
export function endSubscription(state: FanoutState, sub: ChannelSubscription, error?: unknown) {
  if (sub.ended) return;
  sub.ended = true;
  sub.pending = undefined;
  sub.to.subscriptions.delete(sub);
  const shared = state.formats.get(sub.format.key);
  if (shared && --shared.users <= 0) state.formats.delete(sub.format.key);
  const feed = state.feeds.get(sub.channel);
  if (feed?.subscriptions.delete(sub) && feed.subscriptions.size === 0) {
    state.feeds.delete(sub.channel);
    feed.stop.abort();
  }
  state.deps.metrics.subscriptionEnded();
  sub.owner.ended(error);
}

/** Ends a socket that fell behind (once: a closed socket is not counted again); it reconnects and resumes. */
export function endSlowConsumer(state: FanoutState, to: FanoutSocket) {
  if (to.connection.signal.aborted) return;
  state.deps.metrics.eventDropped('slow_consumer');
  to.connection.end('slow_consumer', to.slowReason);
}
