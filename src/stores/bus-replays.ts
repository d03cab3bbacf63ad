import type { ChannelEvent } from './bus.js';
import { compareIds, type EventId } from './event-id.js';

/**
 * Reads of a channel's history shared by the resumes of a reconnect storm, apart from the
 * subscribe algorithm (bus.ts) that asks for them: every tab of a conversation resumes from the
 * same position, or from one a little later, within a few seconds.
 */

/** How long a read of a channel's history serves later resumes (the span of a reconnect storm). */
const KEEP_REPLAY_MS = 30_000;
/** Reads kept per channel: one per position its subscribers resume from, newest kept. */
const MAX_KEPT_REPLAYS = 4;

/**
 * A page of a channel's history, read from the store or taken from a read kept on its hub.
 * `complete`: no kept event after the last one (the subscriber's replay is over).
 */
export type Page = { events: ChannelEvent[]; lost: boolean; complete: boolean };

/**
 * A read of a channel's history after `after`, begun while the channel's hub listened, kept for
 * the resumes that follow it. It is the store's answer for as long as no event has reached the
 * hub since the read began: an event the read did not see was appended after it, so it reaches
 * the hub later (pub/sub, or the catch-up after a Redis reconnect) — the first one drops every
 * kept read. A subscriber that takes a kept read already listens on the hub, so what reaches the
 * hub from then on reaches it too: the kept events and its live ones leave no gap between them.
 */
export interface KeptReplay {
  after: EventId;
  page: Promise<Page>;
  until: number;
}

/**
 * The page after `after` for a subscriber that already listens on this instance (its own hub
 * listener, or the fan-out's), from the reads kept on the channel's listening hub, or read with
 * `read` and kept there (see KeptReplay for why that answer stays exact).
 */
export function keptPage(
  hub: { replays: KeptReplay[] },
  after: EventId,
  read: (after: EventId) => Promise<Page>,
): Promise<Page> {
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
        : read(after),
    );
  }
  const replay: KeptReplay = { after, page: read(after), until: now + KEEP_REPLAY_MS };
  replay.page.catch(() => {
    hub.replays = hub.replays.filter((kept) => kept !== replay);
  });
  hub.replays.push(replay);
  if (hub.replays.length > MAX_KEPT_REPLAYS) hub.replays.shift();
  return replay.page;
}
