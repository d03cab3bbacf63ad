import { createHash } from 'node:crypto';
import type { Deps } from '../deps.js';

/** Channel names of the spec: `agent-{agent_id}` and `global-{bid}`; a visitor's is generated. */
export const agentChannel = (agentId: string) => `agent-${agentId}`;
export const globalChannel = (bid: string) => `global-${bid}`;

/** The final event of an agent's subscriptions when its Session ends (see README "Real-time"). */
export const SESSION_ENDED = 'session.ended';

/**
 * A short public fingerprint of a Session ID: lets a `session.ended` event name the Session it
 * ends without putting the secret ID on a channel.
 */
export const sessionFingerprint = (sessionId: string) =>
  createHash('sha256').update(sessionId).digest('base64url').slice(0, 16);

/** Publishes a gateway event on the merchant's `global-{bid}` channel; a failure is logged, not thrown. */
export async function publishAgentEvent(deps: Deps, merchant: { bid: string }, event: string, data: object) {
  await publishQuietly(deps, globalChannel(merchant.bid), event, data);
}

/** An agent's presence changed (see presence.ts); published once per change on `global-{bid}`. */
export async function publishAgentState(deps: Deps, bid: string, agentId: string, state: string, reason: string) {
  await publishQuietly(deps, globalChannel(bid), 'agent.state', { agent_id: agentId, state, reason });
}

/** The agent's Session(s) ended: subscribers under those Sessions stop and log in again. */
export async function publishSessionEnded(deps: Deps, agentId: string, sessionIds: string[], reason: string) {
  await publishQuietly(deps, agentChannel(agentId), SESSION_ENDED, {
    reason,
    sessions: sessionIds.map(sessionFingerprint),
  });
}

async function publishQuietly(deps: Deps, channel: string, event: string, data: object) {
  try {
    await deps.bus.publish(channel, event, data);
  } catch (error) {
    deps.metrics.eventDropped('publish_failed');
    deps.log.warn({ channel, event, err: (error as Error).message }, 'event not published');
  }
}
