import type { ChannelEvent, HistoryBackend, LocalHubs } from './bus.js';
import type { KeptReplay } from './bus-replays.js';
import { compareIds, type EventId } from './event-id.js';

/**
 * The bus's local side, apart from the subscribe algorithm (bus.ts): one hub per channel with
 * listeners on this instance, so the store's live delivery is joined once per channel and
 * instance however many subscribers it has; `lastId` drops the duplicates that replays after a
 * reconnect bring.
 */

export type Listener = (event: ChannelEvent) => void;

export interface Hub {
  listeners: Set<Listener>;
  lastId?: EventId;
  ready: Promise<void>;
  /** Set once `ready` resolved: live events reach the hub from then on. */
  listening: boolean;
  replays: KeptReplay[];
}

export type Hubs = Map<string, Hub>;

/** What the backend sees of the hubs: where its live events go, and the last id delivered per channel. */
export function localHubs(hubs: Hubs): LocalHubs {
  return {
    deliver(event) {
      const hub = hubs.get(event.channel);
      if (!hub) return;
      // Any event reaching the channel may be one a kept read did not see: later resumes read anew.
      if (hub.replays.length > 0) hub.replays = [];
      if (hub.lastId && compareIds(event.id, hub.lastId) <= 0) return;
      hub.lastId = event.id;
      for (const listener of hub.listeners) listener(event);
    },
    *cursors() {
      for (const [channel, hub] of hubs) yield [channel, hub.lastId];
    },
  };
}

/** Adds `listener` to the channel's hub (the first one starts the backend's live delivery); resolves once it listens. */
export async function joinHub(hubs: Hubs, backend: HistoryBackend, channel: string, listener: Listener) {
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

/** Removes `listener`; the last one to leave stops the backend's live delivery of the channel. */
export function leaveHub(hubs: Hubs, backend: HistoryBackend, channel: string, listener: Listener) {
  const hub = hubs.get(channel);
  if (!hub?.listeners.delete(listener)) return;
  if (hub.listeners.size === 0) {
    hubs.delete(channel);
    backend.unlisten(channel).catch(() => {});
  }
}
