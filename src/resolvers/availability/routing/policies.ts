import type { Agent } from '../../../db/schema.js';

/**
 * Routing policies: pure functions over the eligible agents of a group (online, enabled, under
 * capacity), called inside the assignment transaction that holds those agents' rows, so every
 * instance decides on the same committed state (docs/availability.md "Routing").
 */

export const ROUTING_POLICIES = ['LEAST_BUSY', 'ROUND_ROBIN', 'SKILLS', 'LAST_AGENT'] as const;
export type RoutingPolicy = (typeof ROUTING_POLICIES)[number];

export interface RoutingChoice {
  policy: RoutingPolicy;
  /** Active conversations per agent id (counted in the transaction). */
  active: Map<string, number>;
  /** Round robin: the agent the group's last conversation went to (the group row's cursor). */
  cursor: string | null;
  /** Last agent: the agent of the visitor's previous conversation. */
  lastAgentId: string | null;
}

/** The least busy; ties: assigned longest ago, then by id. */
export function leastBusy(eligible: Agent[], active: Map<string, number>): Agent | undefined {
  return [...eligible].sort(
    (a, b) =>
      (active.get(a.id) ?? 0) - (active.get(b.id) ?? 0) ||
      (a.lastAssignedAt?.getTime() ?? 0) - (b.lastAssignedAt?.getTime() ?? 0) ||
      a.id.localeCompare(b.id),
  )[0];
}

/** The next agent after the cursor in id order (wrapping), skipping those at capacity. */
export function roundRobin(eligible: Agent[], cursor: string | null): Agent | undefined {
  const ordered = [...eligible].sort((a, b) => a.id.localeCompare(b.id));
  return (cursor === null ? undefined : ordered.find((a) => a.id > cursor)) ?? ordered[0];
}

/** The agent a queued conversation goes to under the group's policy, among eligible agents. */
export function chooseAgent(eligible: Agent[], c: RoutingChoice): Agent | undefined {
  if (eligible.length === 0) return undefined;
  switch (c.policy) {
    case 'ROUND_ROBIN':
      return roundRobin(eligible, c.cursor);
    case 'LAST_AGENT':
      return eligible.find((a) => a.id === c.lastAgentId) ?? leastBusy(eligible, c.active);
    default:
      // SKILLS: the eligible agents are already those holding the conversation's required skills.
      return leastBusy(eligible, c.active);
  }
}
