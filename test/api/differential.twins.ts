// The twin table of the REST ↔ GraphQL differential test (differential.test.ts, docs/testing.md):
// one REST read ↔ one GraphQL query per operation, with the leaves only one side has and why.

// biome-ignore lint/suspicious/noExplicitAny: the JSON answers of either API, reshaped by the twins.
export type Json = any;

/** REST pages `{list, has_next_page, end_cursor}` as GraphQL's connection `{nodes, pageInfo}`. */
const restConnection = (d: Json) => ({
  nodes: d.list,
  pageInfo: { hasNextPage: d.has_next_page, endCursor: d.end_cursor },
});
const restList = (d: Json) => d.list;
/** Cache identities GraphQL adds to every object with an identity (issue 32): not REST fields. */
const CACHE_ID = 'GraphQL cache identity `id` (issue 32), equal to the REST key beside it';
const LABELS_GQL = 'GraphQL resolves a conversation’s labels inline; REST reads them with /agent/label/get';
/** What GraphQL's conversation adds: cache identities and its labels. */
const CONVERSATION_GQL_ONLY = {
  id: CACHE_ID,
  'agent.id': CACHE_ID,
  'labels[].id': LABELS_GQL,
  'labels[].name': LABELS_GQL,
  'labels[].color': LABELS_GQL,
  'labels[].createdat': LABELS_GQL,
};
/** The same for each conversation of a page. */
const CONVERSATION_PAGE_GQL_ONLY = {
  'nodes[].id': CACHE_ID,
  'nodes[].agent.id': CACHE_ID,
  'nodes[].labels': LABELS_GQL,
  'nodes[].labels[].id': LABELS_GQL,
  'nodes[].labels[].name': LABELS_GQL,
  'nodes[].labels[].color': LABELS_GQL,
  'nodes[].labels[].createdat': LABELS_GQL,
};

export interface Twin {
  rest: string;
  /** Query string (GET) of the REST request. */
  restQuery?: Record<string, string>;
  /** The REST envelope's `data` part compared (a path into it), if not the whole. */
  restPick?: (data: Json) => unknown;
  gql: string;
  gqlArgs?: string;
  gqlPick?: (data: Json) => unknown;
  /** Who reads: the agent `ada` (Session), the visitor (bearer) or an API key of ada's merchant. */
  as: 'agent' | 'visitor' | 'apiKey';
  /** Normalised leaf patterns only one side has, each with why. */
  onlyRest?: Record<string, string>;
  onlyGql?: Record<string, string>;
  /** For a list: how many items the answer must have (paging checked through both). */
  count?: number;
  /** Why REST leaves out a field GraphQL answers as null: a null GraphQL leaf REST lacks then agrees. */
  absentIsNull?: string;
  /**
   * Fields REST answers in other reads, merged into the REST side before the comparison (so a
   * GraphQL-only field is compared with the value REST holds for it, not listed as an exception).
   */
  restAlso?: (read: (path: string, query?: Record<string, string>) => Promise<Json>) => Promise<Json>;
}

// Set up in beforeAll: ids the twins' requests name.
export const ids = { visitor: '', other: '', label: '', webhook: '', agent: '' };

// The conversation reads an agent makes (/agent/*) and an API key makes (/api/*, issue 30):
// the same GraphQL fields and the same legacy shapes, so one twin each, named by its reader.

/** The conversations carrying the label made in the setup (one). */
const conversationsByLabel = (as: Twin['as'], rest: string): Twin => ({
  as,
  rest,
  restQuery: { scope: 'all', label_id: ids.label },
  gql: 'conversations',
  gqlArgs: `scope: all, labelId: "${ids.label}"`,
  count: 1,
  restPick: restConnection,
  onlyGql: CONVERSATION_PAGE_GQL_ONLY,
});
/** The main visitor's conversation. */
const conversationOfVisitor = (as: Twin['as'], rest: string): Twin => ({
  as,
  rest,
  restQuery: { visitor_id: ids.visitor },
  gql: 'conversation',
  gqlArgs: `visitorId: "${ids.visitor}"`,
  onlyGql: CONVERSATION_GQL_ONLY,
});
/** The main visitor's messages, two a page. */
const messagePage = (as: Twin['as'], rest: string): Twin => ({
  as,
  rest,
  restQuery: { visitor_id: ids.visitor, limit: '2' },
  gql: 'messages',
  gqlArgs: `visitorId: "${ids.visitor}", first: 2`,
  count: 2,
});

/** The twin table: one REST read ↔ one GraphQL query, per operation. */
export const twins = (): Record<string, Twin> => ({
  'visitor bootstrap': {
    as: 'visitor',
    rest: '/visitor/data/get',
    gql: 'visitorBootstrap',
    // REST nests business_hours in `setting` (legacy widget shape); GraphQL answers it beside it.
    gqlPick: ({ businessHours, ...d }: Json) => ({ ...d, setting: { ...d.setting, businessHours } }),
    onlyGql: { 'visitor.id': CACHE_ID },
  },
  'visitor message list (paged)': {
    as: 'visitor',
    rest: '/visitor/message/list',
    restQuery: { limit: '2' },
    gql: 'messages',
    gqlArgs: 'first: 2',
    count: 2,
  },
  'visitor conversation': {
    as: 'visitor',
    rest: '/visitor/chat/get',
    gql: 'conversation',
    onlyGql: { id: CACHE_ID, 'agent.id': CACHE_ID, labels: LABELS_GQL },
  },
  'agent workbench': {
    as: 'agent',
    rest: '/agent/data/get',
    gql: 'agentWorkbench',
    // REST keys `chatting` by visitor id (legacy map); GraphQL lists them with that `key`.
    restPick: (d: Json) => ({
      ...d,
      chatting: Object.keys(d.chatting)
        .sort()
        .map((key) => ({ key, ...d.chatting[key] })),
    }),
    // GraphQL answers the further settings as `setting.extra`; REST spreads them into `setting`.
    gqlPick: ({ setting: { extra, ...setting }, ...d }: Json) => ({
      ...d,
      setting: { ...setting, ...extra },
      chatting: [...d.chatting].sort((a, b) => a.key.localeCompare(b.key)),
    }),
    // The chat cap GraphQL answers is the agent's own capacity (set in the setup), else the
    // merchant's; REST answers them in the admin reads.
    restAlso: async (read) => {
      const [agents, settings] = await Promise.all([read('/agent/admin/agents'), read('/agent/admin/settings')]);
      const me = (agents as Json[]).find((a) => a.agent_id === ids.agent);
      return { max_concurrent_chats: me.capacity ?? settings.max_concurrent_chats };
    },
    onlyGql: {
      'agent.id': CACHE_ID,
      // By design (schema: `Agent.account`): the legacy workbench has no account, and GraphQL
      // answers it null outside the admin operations (the admin agents twin compares it). Only
      // the null leaf is excepted: an account answered here would add `agent.account.*` and fail.
      'agent.account': 'null outside the admin operations; the legacy workbench agent has no account',
    },
  },
  'agent chat list (paged)': {
    as: 'agent',
    rest: '/agent/chat/list',
    restQuery: { scope: 'all', limit: '1' },
    gql: 'conversations',
    gqlArgs: 'scope: all, first: 1',
    count: 1,
    restPick: restConnection,
    onlyGql: CONVERSATION_PAGE_GQL_ONLY,
  },
  'agent chat list (label filter)': conversationsByLabel('agent', '/agent/chat/list'),
  'agent message list (paged)': messagePage('agent', '/agent/message/list'),
  'agent message list (before filter)': {
    as: 'agent',
    rest: '/agent/message/list',
    restQuery: { visitor_id: ids.visitor, before: '3', limit: '10' },
    gql: 'messages',
    gqlArgs: `visitorId: "${ids.visitor}", before: "3", first: 10`,
  },
  'agent conversation': conversationOfVisitor('agent', '/agent/chat/get'),
  'canned responses (scope filter)': {
    as: 'agent',
    rest: '/agent/canned/list',
    restQuery: { scope: 'merchant' },
    gql: 'cannedResponses',
    gqlArgs: 'scope: merchant',
    restPick: restList,
  },
  'canned responses (search filter)': {
    as: 'agent',
    rest: '/agent/canned/list',
    restQuery: { search: 'thx' },
    gql: 'cannedResponses',
    gqlArgs: 'search: "thx"',
    restPick: restList,
    count: 1,
  },
  labels: { as: 'agent', rest: '/agent/label/list', gql: 'labels', restPick: restList },
  notes: {
    as: 'agent',
    rest: '/agent/note/list',
    restQuery: { visitor_id: ids.visitor },
    gql: 'notes',
    gqlArgs: `visitorId: "${ids.visitor}"`,
    restPick: restList,
  },
  'business hours': { as: 'agent', rest: '/agent/business-hours/get', gql: 'businessHours' },
  'webhook endpoints': { as: 'agent', rest: '/agent/webhook/list', gql: 'webhookEndpoints' },
  'webhook deliveries': {
    as: 'agent',
    rest: '/agent/webhook/deliveries',
    restQuery: { endpoint_id: ids.webhook, first: '5' },
    gql: 'webhookDeliveries',
    gqlArgs: `endpointId: "${ids.webhook}", first: 5`,
  },
  'admin agents': {
    as: 'agent',
    rest: '/agent/admin/agents',
    gql: 'agents',
    // GraphQL groups the admin-only account fields under `account`; REST answers them flat.
    gqlPick: (list: Json[]) => list.map(({ account, ...a }) => ({ ...a, ...account })),
  },
  'admin groups': { as: 'agent', rest: '/agent/admin/groups', gql: 'agentGroupDetails' },
  'audit log (paged)': {
    as: 'agent',
    rest: '/agent/admin/audit',
    restQuery: { first: '2' },
    gql: 'auditLog',
    gqlArgs: 'first: 2',
  },
  'agent sessions': {
    as: 'agent',
    rest: '/agent/session/list',
    restQuery: { agent_id: ids.agent },
    gql: 'agentSessions',
    gqlArgs: `agentId: "${ids.agent}"`,
  },
  'merchant settings': { as: 'agent', rest: '/agent/admin/settings', gql: 'merchantSettings' },
  'api keys': { as: 'agent', rest: '/agent/apikey/list', gql: 'apiKeys' },
  bots: { as: 'agent', rest: '/agent/bot/list', gql: 'bots', count: 1 },
  'routing rules': {
    as: 'agent',
    rest: '/agent/admin/routing-rules',
    gql: 'routingRules',
    restPick: (d: Json) => d.rules,
    count: 2,
    absentIsNull: 'the legacy rule carries only the keys a rule sets; GraphQL answers the others null',
  },
  // The server-to-server surface (issue 30): the same GraphQL fields, read as an API key.
  'API conversation list (label filter)': conversationsByLabel('apiKey', '/api/conversation/list'),
  'API conversation': conversationOfVisitor('apiKey', '/api/conversation/get'),
  'API message list (paged)': messagePage('apiKey', '/api/message/list'),
  'messages left (paged)': {
    as: 'agent',
    rest: '/agent/messages-left/list',
    restQuery: { limit: '5' },
    gql: 'messagesLeft',
    gqlArgs: 'first: 5',
    restPick: ({ list, ...d }: Json) => ({ ...d, nodes: list }),
    count: 1,
  },
});

/** REST GET routes without a GraphQL twin, and why. */
export const restWithoutTwin: Record<string, string> = {
  '/agent/login/logincaptcha': 'a captcha image (raw), a browser login step, not data',
  '/agent/login/joincaptcha': 'a captcha image (raw), a browser sign-up step, not data',
  '/attachments/:id': 'file bytes (raw); GraphQL answers attachment metadata only',
  '/attachments/:id/thumbnail': 'image bytes (raw)',
  '/healthz': 'operations probe (raw), not merchant data',
  '/readyz': 'operations probe (raw), not merchant data',
  '/metrics': 'Prometheus text (raw), not merchant data',
  '/openapi.json': 'the REST contract itself',
  '/agent/label/get':
    'a visitor’s labels: GraphQL reads them on Conversation.labels (covered by the conversation twin)',
};

/** GraphQL Query fields without a REST twin, and why. */
export const graphqlWithoutTwin: Record<string, string> = {
  currentAgent: 'REST answers the agent inside /agent/data/get (the agent workbench twin compares it)',
  mySessions: 'REST lists sessions by agent_id (/agent/session/list, twinned with agentSessions)',
};
