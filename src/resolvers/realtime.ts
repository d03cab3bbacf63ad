import type { Deps } from '../deps.js';
import { createSessionEndWatches, type SessionEndWatches } from './channels.js';
import { createPresenceTracker, type PresenceTracker } from './presence.js';

/**
 * The instance's real-time service: what outlives any one connection. Created with the deps
 * (src/deps.ts), started and stopped by the composition root; every transport (graphql-ws,
 * Pusher) reports its connections here, so none keeps timers or registries of its own.
 */
export interface RealtimeService {
  /** Waits for Session ends, one shared bus subscription per agent channel. */
  sessionEnds: SessionEndWatches;
  /** Agents' connections and the presence heartbeat. */
  presence: PresenceTracker;
  /** Starts the heartbeat. Idempotent. */
  start(): void;
  /** Stops the heartbeat and settles every Session-end wait (after the sockets are closed). */
  stop(): Promise<void>;
}

export function createRealtimeService(deps: Deps): RealtimeService {
  const sessionEnds = createSessionEndWatches(deps);
  const presence = createPresenceTracker(deps);
  return {
    sessionEnds,
    presence,
    start: () => presence.start(),
    async stop() {
      sessionEnds.stop();
      await presence.close();
    },
  };
}
