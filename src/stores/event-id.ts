/**
 * Channel event ids have the Redis Streams form `<ms>-<seq>`, in both stores, so a client's
 * `since` means the same thing whether the gateway runs embedded or on Redis.
 */
export type EventId = string;

const ID = /^(\d{1,16})-(\d{1,16})$/;

const isEventId = (id: string) => ID.test(id);

/** Negative, zero or positive as `a` is before, equal to or after `b`. */
export function compareIds(a: EventId, b: EventId): number {
  const [, am = '0', as = '0'] = ID.exec(a) ?? [];
  const [, bm = '0', bs = '0'] = ID.exec(b) ?? [];
  return Number(am) - Number(bm) || Number(as) - Number(bs);
}

/** The marker events a subscription gets that are not published ones (bus.ts SUBSCRIBED, HISTORY_GAP). */
const MARKERS = new Set(['subscribed', 'history.gap']);

/**
 * An event's id unique across every channel, for clients that key objects by `id` (Apollo,
 * urql): `<channel>:<position>`; the `subscribed` and `history.gap` markers, which reuse a
 * position, add their name (`<channel>:<position>:subscribed`). The per-channel position stays
 * available on its own (ChannelEvent `position`).
 */
export function globalEventId(event: { channel: string; id: EventId; event: string }): string {
  const base = `${event.channel}:${event.id}`;
  return MARKERS.has(event.event) ? `${base}:${event.event}` : base;
}

const GLOBAL_ID = /^(.*):(\d{1,16}-\d{1,16})(?::(?:subscribed|history\.gap))?$/s;

/**
 * The resume position a client's `since` names: a position (`<ms>-<seq>`) as it is, or the
 * global id of an event of this same `channel`. Undefined for anything else (an id of another
 * channel, or not an id at all).
 */
export function positionOfSince(channel: string, since: string): EventId | undefined {
  if (isEventId(since)) return since;
  const match = GLOBAL_ID.exec(since);
  return match && match[1] === channel ? match[2] : undefined;
}
