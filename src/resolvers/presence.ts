import type { Agent } from '../db/schema.js';
import type { Deps } from '../deps.js';

export type AgentState = 'online' | 'offline' | 'busy' | 'away';

/**
 * An agent's state: the manual state it chose (busy, away) when set, else online while at
 * least one of its sockets is connected on any instance.
 * TODO(real-time issue): computed from live connections; until then, the manual state or offline.
 */
export async function readAgentState(deps: Deps, agent: Agent): Promise<AgentState> {
  void deps;
  return (agent.manualState as AgentState | null) ?? 'offline';
}
