import type { AgentAccount } from '../resolvers/desk/agents.js';
import { loadWorkbench, type Workbench } from '../resolvers/workbench.js';
import { builder } from './builder.js';

export const AgentStateEnum = builder.enumType('AgentState', {
  description:
    'online while one of the agent sockets is connected (on any instance), offline after a grace period once the last closes; busy and away are chosen by the agent and override it.',
  values: {
    online: { description: 'Connected and available.' },
    offline: { description: 'No live connection.' },
    busy: { description: 'Chosen by the agent: connected but not taking new conversations.' },
    away: { description: 'Chosen by the agent: temporarily away.' },
  } as const,
});

const AgentAccountRef = builder.objectRef<AgentAccount>('AgentAccount').implement({
  description: 'An agent’s account as its merchant’s admins manage it.',
  fields: (t) => ({
    username: t.exposeString('username', { description: 'Login name.' }),
    disabled: t.exposeBoolean('disabled', { description: 'A disabled agent cannot log in.' }),
    capacity: t.exposeInt('capacity', {
      nullable: true,
      description: 'Its own capacity (active conversations at most); null: the merchant’s `maxConcurrentChats`.',
    }),
    groupIds: t.exposeStringList('groupIds', {
      description: 'Its groups (one at most today); empty: the merchant’s default group.',
    }),
    skills: t.exposeStringList('skills', {
      description: 'What it can handle: under the SKILLS policy it takes conversations requiring only these.',
    }),
    createdAt: t.string({ resolve: (a) => a.createdAt.toISOString(), description: 'When it was created (ISO 8601).' }),
  }),
});

export const AgentRef = builder.objectRef<Workbench['agent'] & { account?: AgentAccount }>('Agent').implement({
  description: 'An agent (customer-service staff member).',
  fields: (t) => ({
    id: t.exposeID('agentId', { description: 'Agent id (the same as `agentId`).' }),
    agentId: t.exposeString('agentId', { description: 'Agent id; its channel is `agent-{agentId}`.' }),
    nickname: t.exposeString('nickname', { description: 'Nickname.' }),
    avatar: t.exposeString('avatar', { description: 'Avatar URL or path.' }),
    level: t.exposeString('level', { description: 'Role: `agent`, `admin` or `ticket_agent`.' }),
    state: t.expose('state', { type: AgentStateEnum, description: 'Current state.' }),
    account: t.field({
      type: AgentAccountRef,
      nullable: true,
      resolve: (a) => a.account ?? null,
      description: 'The account (username, disabled, capacity, groups): given by the admin operations; null elsewhere.',
    }),
  }),
});

const ChattingEntry = builder.objectRef<Workbench['chatting'][number]>('ChattingEntry').implement({
  description: 'An ongoing conversation (an entry of the legacy `chatting` dictionary).',
  fields: (t) => ({
    key: t.exposeString('key', { description: 'The legacy dictionary key: `visitor` followed by the visitor uid.' }),
    id: t.exposeString('id', { description: 'Visitor uid.' }),
    name: t.exposeString('name', { description: 'Visitor nickname.' }),
    type: t.exposeString('type', { description: 'Kind of party; always `visitor`.' }),
    timestamp: t.exposeFloat('timestamp', { description: 'Last activity, Unix seconds.' }),
    pinnedAt: t.exposeFloat('pinnedAt', { description: 'Pin time in Unix seconds; 0 when not pinned.' }),
    unreadCount: t.exposeInt('unreadCount', { description: 'Unread messages for the current agent.' }),
    bot: t.exposeInt('bot', { description: 'Bot indicator: 1 while a bot handles the conversation, else 0.' }),
    accountState: t.exposeString('accountState', { description: 'Visitor account state: `normal` or `blocked`.' }),
    historyOnlyMine: t.exposeBoolean('historyOnlyMine', {
      description: 'Whether the agent sees only the history of its own sessions with this visitor.',
    }),
    items: t.expose('items', {
      type: ['JSON'],
      description: 'Summary of the last message(s); the element shape is not fixed by the spec.',
    }),
  }),
});

const AgentGroup = builder.objectRef<Workbench['agentGroups'][number]>('AgentGroup').implement({
  description: 'An agent group of the merchant.',
  fields: (t) => ({
    id: t.exposeString('id', { description: 'Group id.' }),
    name: t.exposeString('name', { description: 'Group name.' }),
    isDefault: t.exposeBoolean('isDefault', { description: 'The merchant default group.' }),
  }),
});

const WorkbenchSetting = builder.objectRef<Workbench['setting']>('WorkbenchSetting').implement({
  description: 'Merchant and real-time configuration of the workbench.',
  fields: (t) => ({
    bid: t.exposeString('bid', { description: 'Merchant business id; its channel is `global-{bid}`.' }),
    appname: t.exposeString('appname', { description: 'Merchant display name.' }),
    appkey: t.exposeString('appkey', { description: 'Application key of the real-time connection.' }),
    wsAddress: t.exposeString('wsAddress', { description: 'WebSocket address of the real-time connection.' }),
    extra: t.expose('extra', {
      type: 'JSON',
      description:
        'Further merchant settings (a free-form object; the legacy `setting` spreads it alongside the fields above).',
    }),
  }),
});

export const VisitorAttributeDef = builder
  .objectRef<Workbench['visitorAttributeConfig']['attributes'][number]>('VisitorAttributeDef')
  .implement({
    description: 'A configured visitor attribute.',
    fields: (t) => ({
      key: t.exposeString('key', { description: 'Machine name.' }),
      label: t.exposeString('label', { description: 'Display name.' }),
      type: t.exposeString('type', { description: 'Attribute type: `text`, `number`, `boolean`, `url` or `image`.' }),
      editable: t.exposeBoolean('editable', { description: 'Editable in the workbench; never for images.' }),
    }),
  });

const VisitorAttributeConfig = builder
  .objectRef<Workbench['visitorAttributeConfig']>('VisitorAttributeConfig')
  .implement({
    description: 'The merchant preset of visitor attributes.',
    fields: (t) => ({
      attributes: t.field({
        type: [VisitorAttributeDef],
        resolve: (c) => c.attributes,
        description: 'In display order.',
      }),
    }),
  });

const WorkbenchExtensions = builder.objectRef<Workbench['extensions']>('WorkbenchExtensions').implement({
  description: 'Workbench extension data; the element shapes are merchant-defined.',
  fields: (t) => ({
    nav: t.expose('nav', { type: ['JSON'], description: 'Navigation entries.' }),
    chatActions: t.expose('chat_actions', { type: ['JSON'], description: 'Actions offered on a conversation.' }),
    sideIframes: t.expose('side_iframes', { type: ['JSON'], description: 'Side panels embedded as iframes.' }),
    flags: t.expose('flags', { type: 'JSON', description: 'Feature flags (an object).' }),
    accountLevelOptions: t.expose('account_level_options', {
      type: 'JSON',
      description: 'Account level options (an object, e.g. role name to label).',
    }),
  }),
});

const WorkbenchType = builder.objectRef<Workbench>('Workbench').implement({
  description: 'Everything the agent workbench needs first (legacy GET /agent/data/get).',
  fields: (t) => ({
    chatting: t.field({
      type: [ChattingEntry],
      resolve: (w) => w.chatting,
      description: 'Ongoing conversations, pinned first.',
    }),
    agent: t.field({ type: AgentRef, resolve: (w) => w.agent, description: 'The logged-in agent.' }),
    maxConcurrentChats: t.exposeInt('maxConcurrentChats', {
      description:
        'The agent’s capacity: at most this many active conversations are routed to it (its own maximum, else the merchant’s default).',
    }),
    agentGroups: t.field({ type: [AgentGroup], resolve: (w) => w.agentGroups, description: 'Groups, default first.' }),
    setting: t.field({
      type: WorkbenchSetting,
      resolve: (w) => w.setting,
      description: 'Merchant and real-time settings.',
    }),
    visitorAttributeConfig: t.field({
      type: VisitorAttributeConfig,
      resolve: (w) => w.visitorAttributeConfig,
      description: 'Visitor attribute preset.',
    }),
    extensions: t.field({ type: WorkbenchExtensions, resolve: (w) => w.extensions, description: 'Extension data.' }),
  }),
});

builder.queryField('agentWorkbench', (t) =>
  t.field({
    type: WorkbenchType,
    description: 'The agent workbench bootstrap. Requires the agent Session; refused (FORBIDDEN) to ticket agents.',
    resolve: async (_root, _args, ctx) => loadWorkbench(ctx.deps, await ctx.agent(), { wsAddress: ctx.wsAddress }),
  }),
);
