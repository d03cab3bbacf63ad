import { createHash } from 'node:crypto';
import type { Deps } from '../deps.js';
import { type EventData, type EventName, toWire } from './event-catalog.js';

/** Channel names of the spec: `agent-{agent_id}` and `global-{bid}`; a visitor's is generated. */
export const agentChannel = (agentId: string) => `agent-${agentId}`;
export const globalChannel = (bid: string) => `global-${bid}`;
/** The merchant's admin channel (issue 32): every `message.created` of the merchant, for its admins only. */
export const adminChannel = (bid: string) => `admin-${bid}`;

/** The final event of an agent's subscriptions when its Session ends (see docs/realtime.md). */
export const SESSION_ENDED = 'session.ended' satisfies EventName;
export const AGENT_LEVEL_CHANGED = 'agent.level_changed' satisfies EventName;

/**
 * A short public fingerprint of a Session ID: lets a `session.ended` event name the Session it
 * ends without putting the secret ID on a channel.
 */
export const sessionFingerprint = (sessionId: string) =>
  createHash('sha256').update(sessionId).digest('base64url').slice(0, 16);

/**
 * Publishes a catalogued event on `channel`, its payload mapped to the wire shape by the
 * catalog; throws when the bus is unavailable. `ephemeral`: delivered live, kept out of the
 * channel's resumable history (typing).
 */
export function publish<N extends EventName>(
  deps: Deps,
  channel: string,
  name: N,
  data: EventData<N>,
  opts?: { ephemeral?: boolean },
) {
  return deps.bus.publish(channel, name, toWire(name, data), opts);
}

/** As `publish`, for events that must not fail the operation: a failure is counted and logged. */
export async function publishQuietly<N extends EventName>(deps: Deps, channel: string, name: N, data: EventData<N>) {
  try {
    await publish(deps, channel, name, data);
  } catch (error) {
    deps.metrics.eventDropped('publish_failed');
    deps.log.warn({ channel, event: name, err: (error as Error).message }, 'event not published');
  }
}

/** An agent's presence changed (see presence.ts); published once per change on `global-{bid}`. */
export async function publishAgentState(deps: Deps, bid: string, agentId: string, state: string, reason: string) {
  await publishQuietly(deps, globalChannel(bid), 'agent.state', { agentId, state, reason });
}

/** The agent's Session(s) ended: subscribers under those Sessions stop and log in again. */
export async function publishSessionEnded(deps: Deps, agentId: string, sessionIds: string[], reason: string) {
  await publishQuietly(deps, agentChannel(agentId), SESSION_ENDED, {
    reason,
    sessions: sessionIds.map(sessionFingerprint),
  });
}

/**
 * An agent's level changed: every instance judges that agent's open subscriptions again by the
 * new level (the real-time service follows `agent-{id}` for each agent socket, channels.ts).
 */
export async function publishAgentLevelChanged(deps: Deps, agentId: string, level: string) {
  await publishQuietly(deps, agentChannel(agentId), AGENT_LEVEL_CHANGED, { agentId, level });
}
