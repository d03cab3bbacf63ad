import { and, desc, eq, sql } from 'drizzle-orm';
import { preparedQuery } from '../db/prepared.js';
import { type Agent, conversations, visitors, type WorkbenchExtensions } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import type { LastMessageItem } from './chat-rows.js';
import { unreadForAgent } from './conversations/view.js';
import { merchantConfig, type VisitorAttributeDef } from './merchant.js';
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
  /** Whether this agent's history of the visitor is limited to the conversations it was assigned (README "Chat"). */
  historyOnlyMine: boolean;
  /** The last message, as one summary item (README "Chat"); empty before the first message. */
  items: LastMessageItem[];
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
  /** The agent's capacity: active conversations routing gives it at most (its own maximum, else the merchant's). */
  maxConcurrentChats: number;
  visitorAttributeConfig: { attributes: VisitorAttributeDef[] };
  extensions: WorkbenchExtensions;
}

const openConversationsOf = preparedQuery((db) =>
  db
    .select({ c: conversations, name: visitors.nickname, unread: unreadForAgent })
    .from(conversations)
    // Both sides scoped by the agent's merchant: a row pointing across tenants shows nothing.
    .innerJoin(
      visitors,
      and(eq(visitors.id, conversations.visitorId), eq(visitors.merchantId, sql.placeholder('merchantId'))),
    )
    .where(
      and(
        eq(conversations.agentId, sql.placeholder('agentId')),
        eq(conversations.merchantId, sql.placeholder('merchantId')),
        eq(conversations.state, 'active'),
      ),
    )
    .orderBy(desc(conversations.pinnedAt), desc(conversations.timestamp))
    .prepare('open_conversations_of'),
);

/**
 * The agent workbench bootstrap: ongoing conversations, the agent, groups, settings, attribute
 * configuration and extensions, all scoped to the agent's own merchant.
 */
export async function loadWorkbench(deps: Deps, viewer: AgentViewer, opts: { wsAddress: string }): Promise<Workbench> {
  requireOnlineReception(viewer);
  const { merchantId, agent } = viewer;
  // The merchant's configuration (row, groups, attribute definitions) comes from memory.
  const [config, chats, profile] = await Promise.all([
    merchantConfig(deps, merchantId),
    openConversationsOf(deps.db).execute({ merchantId, agentId: agent.id }),
    loadAgentProfile(deps, agent),
  ]);
  if (!config) throw new DomainError('SESSION_MISMATCH', 'Invalid parameter: merchant not found, please log in again');
  const { merchant, groups, attributeDefs: defs } = config;

  const onlyMine = viewer.level !== 'admin' && merchant.workbenchSettings.history_only_mine === true;
  return {
    chatting: chats.map(({ c, name, unread }) => ({
      key: `visitor${c.visitorId}`,
      id: c.visitorId,
      name,
      type: 'visitor',
      timestamp: c.timestamp,
      pinnedAt: c.pinnedAt,
      unreadCount: Number(unread),
      bot: c.bot,
      accountState: c.accountState,
      historyOnlyMine: onlyMine,
      items: c.items as LastMessageItem[],
    })),
    agent: profile,
    maxConcurrentChats: agent.maxConcurrentChats ?? merchant.maxConcurrentChats,
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
