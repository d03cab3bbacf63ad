/**
 * Channel event ids have the Redis Streams form `<ms>-<seq>`, in both stores, so a client's
 * `since` means the same thing whether the gateway runs embedded or on Redis.
 */
export type EventId = string;

const ID = /^(\d{1,16})-(\d{1,16})$/;

export const isEventId = (id: string) => ID.test(id);

/** Negative, zero or positive as `a` is before, equal to or after `b`. */
export function compareIds(a: EventId, b: EventId): number {
  const [, am = '0', as = '0'] = ID.exec(a) ?? [];
  const [, bm = '0', bs = '0'] = ID.exec(b) ?? [];
  return Number(am) - Number(bm) || Number(as) - Number(bs);
}
