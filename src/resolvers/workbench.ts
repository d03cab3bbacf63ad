import { and, asc, desc, eq, isNull } from 'drizzle-orm';
import { type Agent, agentGroups, conversations, merchants, visitors, type WorkbenchExtensions } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import { loadAttributeDefs, type VisitorAttributeDef } from './merchant.js';
import { type AgentState, readAgentState } from './presence.js';
import { type AgentViewer, requireOnlineReception } from './viewer.js';

export interface ChattingEntry {
  /** `visitor<uid>`, the key of the legacy `chatting` object. */
  key: string;
  id: string;
  name: string;
  type: 'visitor';
  timestamp: number;
  pinnedAt: number;
  unreadCount: number;
  bot: number;
  accountState: string;
  historyOnlyMine: boolean;
  items: unknown[];
}

export interface AgentProfile {
  agentId: string;
  nickname: string;
  avatar: string;
  level: string;
  state: AgentState;
}

export interface Workbench {
  /** Pinned conversations first (latest pin first), then by latest activity. */
  chatting: ChattingEntry[];
  agent: AgentProfile;
  agentGroups: { id: string; name: string; isDefault: boolean }[];
  setting: { bid: string; appname: string; appkey: string; wsAddress: string; extra: Record<string, unknown> };
  visitorAttributeConfig: { attributes: VisitorAttributeDef[] };
  extensions: WorkbenchExtensions;
}

/**
 * The agent workbench bootstrap: ongoing conversations, the agent, groups, settings, attribute
 * configuration and extensions, all scoped to the agent's own merchant.
 */
export async function loadWorkbench(deps: Deps, viewer: AgentViewer, opts: { wsAddress: string }): Promise<Workbench> {
  requireOnlineReception(viewer);
  const { merchantId, agent } = viewer;
  const [[merchant], groups, chats, defs, profile] = await Promise.all([
    deps.db.select().from(merchants).where(eq(merchants.id, merchantId)).limit(1),
    deps.db
      .select()
      .from(agentGroups)
      .where(eq(agentGroups.merchantId, merchantId))
      .orderBy(desc(agentGroups.isDefault), asc(agentGroups.position), asc(agentGroups.name)),
    deps.db
      .select({ c: conversations, name: visitors.nickname })
      .from(conversations)
      // Both sides scoped by the agent's merchant: a row pointing across tenants shows nothing.
      .innerJoin(visitors, and(eq(visitors.id, conversations.visitorId), eq(visitors.merchantId, merchantId)))
      .where(
        and(
          eq(conversations.agentId, agent.id),
          eq(conversations.merchantId, merchantId),
          isNull(conversations.closedAt),
        ),
      )
      .orderBy(desc(conversations.pinnedAt), desc(conversations.timestamp)),
    loadAttributeDefs(deps, merchantId),
    loadAgentProfile(deps, agent),
  ]);
  if (!merchant)
    throw new DomainError('SESSION_MISMATCH', 'Invalid parameter: merchant not found, please log in again');

  return {
    chatting: chats.map(({ c, name }) => ({
      key: `visitor${c.visitorId}`,
      id: c.visitorId,
      name,
      type: 'visitor',
      timestamp: c.timestamp,
      pinnedAt: c.pinnedAt,
      unreadCount: c.unreadCount,
      bot: c.bot,
      accountState: c.accountState,
      historyOnlyMine: c.historyOnlyMine,
      items: c.items,
    })),
    agent: profile,
    agentGroups: groups.map((g) => ({ id: g.id, name: g.name, isDefault: g.isDefault })),
    setting: {
      bid: merchant.bid,
      appname: merchant.appname,
      appkey: merchant.appkey,
      wsAddress: opts.wsAddress,
      extra: merchant.workbenchSettings,
    },
    visitorAttributeConfig: { attributes: defs },
    extensions: merchant.extensions,
  };
}

/** The public profile of an agent, with its current state. */
export async function loadAgentProfile(deps: Deps, agent: Agent): Promise<AgentProfile> {
  const state = await readAgentState(deps, agent);
  return { agentId: agent.id, nickname: agent.nickname, avatar: agent.avatar, level: agent.level, state };
}
