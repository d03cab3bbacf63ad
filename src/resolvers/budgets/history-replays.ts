import type { Deps } from '../../deps.js';
import type { ChannelViewer } from '../channels.js';

/**
 * History replays (issue 27): a subscription with `since` makes the instance read the channel's
 * kept history (a Redis stream range, or the in-process ring buffer: up to CHANNEL_HISTORY_SIZE
 * events) and write it to the socket. A subscribe/complete loop never holds more than one
 * subscription, so the subscription caps do not bound it; only the per-socket subscribe rate did
 * (30 per 10 s × 20 sockets = 3,600 replays a minute per identity, 36,000 per address). So replays
 * are counted in the shared rate limiter when a subscription asks for one, before any history is
 * read: WS_HISTORY_REPLAYS_PER_MINUTE per identity (agent or visitor) and
 * WS_HISTORY_REPLAYS_PER_ADDRESS_PER_MINUTE per client address (visitor tokens are free: many
 * identities on one address). Past either: RATE_LIMITED on that subscription. The defaults are
 * twice the subscription caps (WS_MAX_SUBSCRIPTIONS_PER_IDENTITY, _PER_ADDRESS), so resuming
 * every subscription the caps allow, twice in a minute, is never refused. A subscription without
 * `since` reads no history and is not counted; the Pusher transport has no resume, so no replay.
 */
export async function chargeHistoryReplay(deps: Deps, viewer: ChannelViewer, address: string): Promise<void> {
  const { perIdentityPerMinute, perAddressPerMinute } = deps.config.historyReplays;
  const identity = viewer.kind === 'agent' ? `a:${viewer.agentId}` : `v:${viewer.visitorId}`;
  const wait = (per: number, holder: string, variable: string) => (seconds: number) =>
    `Too many resumes with since: at most ${per} a minute per ${holder} (${variable}), retry in ${seconds} s`;
  // In this order, stopping at the first refused; one round trip on Redis.
  await deps.rateLimiter.consumeInOrder([
    {
      limit: { name: 'ws-history-replays', points: perIdentityPerMinute, durationSeconds: 60 },
      subject: identity,
      message: wait(perIdentityPerMinute, 'identity', 'WS_HISTORY_REPLAYS_PER_MINUTE'),
    },
    {
      limit: { name: 'ws-history-replays-address', points: perAddressPerMinute, durationSeconds: 60 },
      subject: address,
      message: wait(perAddressPerMinute, 'client address', 'WS_HISTORY_REPLAYS_PER_ADDRESS_PER_MINUTE'),
    },
  ]);
}
