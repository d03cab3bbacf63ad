import { eventFate } from '../../resolvers/channels.js';
import { type ChannelEvent, DEFAULT_MAX_QUEUED_EVENTS, SlowConsumerError, SUBSCRIBED } from '../../stores/bus.js';
import { compareIds, type EventId } from '../../stores/event-id.js';
import type { ChannelSubscription, FrameFormat } from '../fanout.js';
import { type Payload, payloadOf, writeFrame } from './frames.js';
import { endSlowConsumer, endSubscription, type FanoutState, type Feed } from './state.js';

/**
 * The order of delivery: one feed per channel takes each live event once and walks it to the
 * channel's subscriptions; a new subscription first catches up (the `subscribed` event or the
 * replay after `since`) while its live events wait, then takes those the catch-up did not cover,
 * then goes live. No event twice, none skipped, a slow consumer ended rather than buffered.
 */

/** Live events the hub's own bus subscription may hold while a walk is running; far above any burst. */
const FEED_MAX_QUEUED = 100_000;

/** Writes one frame; a socket past the buffer limit is ended as a slow consumer. */
export function write(state: FanoutState, sub: ChannelSubscription, payload: Payload) {
  if (writeFrame(sub, payload)) endSlowConsumer(state, sub.to);
}

/** Delivers one event to one subscription by the channel's rule; `payloads` shares serializations within a walk. */
function deliver(
  state: FanoutState,
  sub: ChannelSubscription,
  event: ChannelEvent,
  payloads?: Map<FrameFormat, Payload | undefined>,
) {
  const fate = eventFate(sub.viewer, sub.channel, event);
  if (fate === 'skip') return 0;
  let payload: Payload | undefined;
  if (payloads?.has(sub.format)) payload = payloads.get(sub.format);
  else {
    payload = payloadOf(sub.format.payload(event));
    payloads?.set(sub.format, payload);
  }
  if (payload !== undefined) write(state, sub, payload);
  if (fate === 'last') endSubscription(state, sub);
  return payload === undefined ? 0 : 1;
}

/** One live event to every subscription of its channel on this instance. */
function walk(state: FanoutState, feed: Feed, event: ChannelEvent) {
  const payloads = new Map<FrameFormat, Payload | undefined>();
  let delivered = 0;
  for (const sub of feed.subscriptions) {
    if (sub.pending) {
      if (sub.pending.length < DEFAULT_MAX_QUEUED_EVENTS) sub.pending.push(event);
      else endSlowConsumer(state, sub.to); // fell behind while catching up: it resumes with since
      continue;
    }
    if (sub.covered) {
      if (compareIds(event.id, sub.covered) <= 0) continue;
      sub.covered = undefined;
    }
    delivered += deliver(state, sub, event, payloads);
  }
  if (delivered > 0) state.deps.metrics.eventDelivered(delivered);
}

/** The feed of `channel`, started on its first subscription: the bus subscription whose events are walked. */
export function feedOf(state: FanoutState, channel: string): Feed {
  const existing = state.feeds.get(channel);
  if (existing) return existing;
  const stop = new AbortController();
  const events = state.deps.bus.subscribe(channel, { signal: stop.signal, maxQueued: FEED_MAX_QUEUED });
  let listening = () => {};
  const feed: Feed = {
    subscriptions: new Set(),
    live: new Promise<void>((resolve) => {
      listening = resolve;
    }),
    position: undefined,
    stop,
  };
  state.feeds.set(channel, feed);
  const run = async () => {
    let failure: unknown;
    try {
      for await (const event of events) {
        feed.position = event.id;
        if (event.event === SUBSCRIBED) listening();
        else walk(state, feed, event);
      }
    } catch (error) {
      failure = error;
    } finally {
      listening(); // wakes the catch-ups waiting on a feed that never listened; they find their end
      if (state.feeds.get(channel) === feed) state.feeds.delete(channel);
      // The bus gave up (an outage, or the feed itself fell behind): every subscriber resumes.
      for (const sub of [...feed.subscriptions]) {
        if (failure instanceof SlowConsumerError) endSlowConsumer(state, sub.to);
        endSubscription(state, sub, failure ?? new Error('channel feed stopped'));
      }
    }
  };
  void run();
  return feed;
}

/** The `subscribed` event or the replay after `since`, then the live events that waited meanwhile. */
export async function catchUp(state: FanoutState, sub: ChannelSubscription, feed: Feed, since: EventId | undefined) {
  try {
    await feed.live;
    if (sub.ended) return;
    let cursor = since;
    for await (const event of state.deps.bus.subscribe(sub.channel, { since, replayOnly: true })) {
      if (sub.ended) return;
      deliver(state, sub, event);
      cursor = event.id;
    }
    const waiting = sub.pending ?? [];
    sub.pending = undefined;
    let delivered = 0;
    for (const event of waiting) {
      if (sub.ended) break;
      if (!cursor || compareIds(event.id, cursor) > 0) delivered += deliver(state, sub, event);
    }
    // Only while the feed is behind what the catch-up read (an idle subscriber keeps nothing).
    if (cursor && (!feed.position || compareIds(cursor, feed.position) > 0)) sub.covered = cursor;
    if (delivered > 0) state.deps.metrics.eventDelivered(delivered);
  } catch (error) {
    endSubscription(state, sub, error);
  }
}
