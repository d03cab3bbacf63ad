import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpoints } from '../../src/rest/endpoints.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { flatten, itemsOf, pattern, queryOf, schema } from './differential.fixtures.js';

// Issue 28 (1): the same data read through REST and through GraphQL agree field by field.
// Both answers are flattened to leaf paths; key names are normalised (snake_case ↔ camelCase,
// case-insensitive) and so are the documented legacy encodings (0/1 ↔ booleans, numbers ↔
// numeric strings). Every leaf present on both sides must be equal; a leaf on one side only is
// allowed only where the operation's exception table below lists it, with the reason.
// Generated from the declarations: every REST GET route (src/rest/endpoints.ts) and every
// GraphQL Query field (schema.graphql) is either twinned below or listed as having no twin,
// so a newly declared read fails here until it is mapped.

// biome-ignore lint/suspicious/noExplicitAny: the JSON answers of either API, reshaped by the twins.
type Json = any;

/** REST pages `{list, has_next_page, end_cursor}` as GraphQL's connection `{nodes, pageInfo}`. */
const restConnection = (d: Json) => ({
  nodes: d.list,
  pageInfo: { hasNextPage: d.has_next_page, endCursor: d.end_cursor },
});
const restList = (d: Json) => d.list;
/** Cache identities GraphQL adds to every object with an identity (issue 32): not REST fields. */
const CACHE_ID = 'GraphQL cache identity `id` (issue 32), equal to the REST key beside it';
const LABELS_GQL = 'GraphQL resolves a conversation’s labels inline; REST reads them with /agent/label/get';

interface Twin {
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
  /**
   * Fields REST answers in other reads, merged into the REST side before the comparison (so a
   * GraphQL-only field is compared with the value REST holds for it, not listed as an exception).
   */
  /** Why REST leaves out a field GraphQL answers as null: a null GraphQL leaf REST lacks then agrees. */
  absentIsNull?: string;
  restAlso?: (read: (path: string, query?: Record<string, string>) => Promise<Json>) => Promise<Json>;
}

// Set up in beforeAll: ids the twins' requests name.
const ids = { visitor: '', other: '', label: '', webhook: '', agent: '' };

/** The twin table: one REST read ↔ one GraphQL query, per operation. */
const twins = (): Record<string, Twin> => ({
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
    // merchant's; REST answers them in the admin reads. The workbench's agent has no `account`
    // (GraphQL: null outside the admin operations; REST: the admin agents list has it).
    restAlso: async (read) => {
      const [agents, settings] = await Promise.all([read('/agent/admin/agents'), read('/agent/admin/settings')]);
      const me = (agents as Json[]).find((a) => a.agent_id === ids.agent);
      return { max_concurrent_chats: me.capacity ?? settings.max_concurrent_chats, agent: { account: null } };
    },
    onlyGql: { 'agent.id': CACHE_ID },
  },
  'agent chat list (paged)': {
    as: 'agent',
    rest: '/agent/chat/list',
    restQuery: { scope: 'all', limit: '1' },
    gql: 'conversations',
    gqlArgs: 'scope: all, first: 1',
    count: 1,
    restPick: restConnection,
    onlyGql: {
      'nodes[].id': CACHE_ID,
      'nodes[].agent.id': CACHE_ID,
      'nodes[].labels': LABELS_GQL,
      'nodes[].labels[].id': LABELS_GQL,
      'nodes[].labels[].name': LABELS_GQL,
      'nodes[].labels[].color': LABELS_GQL,
      'nodes[].labels[].createdat': LABELS_GQL,
    },
  },
  'agent chat list (label filter)': {
    as: 'agent',
    rest: '/agent/chat/list',
    restQuery: { scope: 'all', label_id: ids.label },
    gql: 'conversations',
    gqlArgs: `scope: all, labelId: "${ids.label}"`,
    count: 1,
    restPick: restConnection,
    onlyGql: {
      'nodes[].id': CACHE_ID,
      'nodes[].agent.id': CACHE_ID,
      'nodes[].labels': LABELS_GQL,
      'nodes[].labels[].id': LABELS_GQL,
      'nodes[].labels[].name': LABELS_GQL,
      'nodes[].labels[].color': LABELS_GQL,
      'nodes[].labels[].createdat': LABELS_GQL,
    },
  },
  'agent message list (paged)': {
    as: 'agent',
    rest: '/agent/message/list',
    restQuery: { visitor_id: ids.visitor, limit: '2' },
    gql: 'messages',
    gqlArgs: `visitorId: "${ids.visitor}", first: 2`,
    count: 2,
  },
  'agent message list (before filter)': {
    as: 'agent',
    rest: '/agent/message/list',
    restQuery: { visitor_id: ids.visitor, before: '3', limit: '10' },
    gql: 'messages',
    gqlArgs: `visitorId: "${ids.visitor}", before: "3", first: 10`,
  },
  'agent conversation': {
    as: 'agent',
    rest: '/agent/chat/get',
    restQuery: { visitor_id: ids.visitor },
    gql: 'conversation',
    gqlArgs: `visitorId: "${ids.visitor}"`,
    onlyGql: {
      id: CACHE_ID,
      'agent.id': CACHE_ID,
      'labels[].id': LABELS_GQL,
      'labels[].name': LABELS_GQL,
      'labels[].color': LABELS_GQL,
      'labels[].createdat': LABELS_GQL,
    },
  },
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
  'API conversation list (label filter)': {
    as: 'apiKey',
    rest: '/api/conversation/list',
    restQuery: { scope: 'all', label_id: ids.label },
    gql: 'conversations',
    gqlArgs: `scope: all, labelId: "${ids.label}"`,
    count: 1,
    restPick: restConnection,
    onlyGql: {
      'nodes[].id': CACHE_ID,
      'nodes[].agent.id': CACHE_ID,
      'nodes[].labels': LABELS_GQL,
      'nodes[].labels[].id': LABELS_GQL,
      'nodes[].labels[].name': LABELS_GQL,
      'nodes[].labels[].color': LABELS_GQL,
      'nodes[].labels[].createdat': LABELS_GQL,
    },
  },
  'API conversation': {
    as: 'apiKey',
    rest: '/api/conversation/get',
    restQuery: { visitor_id: ids.visitor },
    gql: 'conversation',
    gqlArgs: `visitorId: "${ids.visitor}"`,
    onlyGql: {
      id: CACHE_ID,
      'agent.id': CACHE_ID,
      'labels[].id': LABELS_GQL,
      'labels[].name': LABELS_GQL,
      'labels[].color': LABELS_GQL,
      'labels[].createdat': LABELS_GQL,
    },
  },
  'API message list (paged)': {
    as: 'apiKey',
    rest: '/api/message/list',
    restQuery: { visitor_id: ids.visitor, limit: '2' },
    gql: 'messages',
    gqlArgs: `visitorId: "${ids.visitor}", first: 2`,
    count: 2,
  },
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
const restWithoutTwin: Record<string, string> = {
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
const graphqlWithoutTwin: Record<string, string> = {
  currentAgent: 'REST answers the agent inside /agent/data/get (the agent workbench twin compares it)',
  mySessions: 'REST lists sessions by agent_id (/agent/session/list, twinned with agentSessions)',
};

/** `extra`'s fields laid over `base`, objects merged key by key. */
const deepMerge = (base: Json, extra: Json): Json => {
  if (extra === null || typeof extra !== 'object' || Array.isArray(extra)) return extra;
  const out = { ...(base ?? {}) };
  for (const [k, v] of Object.entries(extra)) out[k] = deepMerge(out[k], v);
  return out;
};

let t: TestApp;
let agent: HttpClient;
let agentToken = '';
let visitor: HttpClient;
let visitorBearer = '';
let apiKey = '';
const answers = new Map<string, { rest: unknown; gql: unknown }>();

beforeAll(async () => {
  t = await startTestApp({ env: { WEBHOOK_ALLOW_PRIVATE: 'on' } });
  ({ client: agent, token: agentToken } = await agentSession(t.url, 'ada'));
  const me = await agent.json('/agent/data/get');
  ids.agent = me.body.data.agent?.id ?? me.body.data.agent?.agent_id ?? me.body.data.user?.id;
  const bearerOf = async () => {
    const { token } = await visitorToken(t.url);
    const client = new HttpClient(t.url);
    const auth = { authorization: `Bearer ${token}` };
    const boot = await client.json('/visitor/data/get', { headers: auth });
    await client.json('/visitor/chat/assign', { method: 'POST', form: {}, headers: auth });
    return { client, token, auth, uid: boot.body.data.visitor.uid as string };
  };
  const main = await bearerOf();
  const other = await bearerOf();
  visitor = main.client;
  visitorBearer = main.token;
  ids.visitor = main.uid;
  ids.other = other.uid;
  for (const v of [main, other]) {
    const claim = await agent.json('/agent/chat/claim', { method: 'POST', form: { visitor_id: v.uid } });
    expect(claim.body.code).toBe(0);
  }
  for (let i = 1; i <= 3; i++) {
    const sent = await visitor.json('/visitor/message/send', {
      method: 'POST',
      form: { client_msg_id: `m${i}`, type: 'text', content: `hello ${i}` },
      headers: main.auth,
    });
    expect(sent.body.code).toBe(0);
  }
  const ok = async (path: string, form: Record<string, string>) => {
    const r = await agent.json(path, { method: 'POST', form });
    expect([path, r.body.code, r.body.msg]).toEqual([path, 0, expect.anything()]);
    return r.body.data;
  };
  await ok('/agent/message/send', { visitor_id: ids.visitor, client_msg_id: 'a1', type: 'text', content: 'hi there' });
  const label = await ok('/agent/label/create', { name: 'vip', color: '#ff0000' });
  ids.label = label.id;
  await ok('/agent/label/add', { visitor_id: ids.visitor, label_id: ids.label });
  await ok('/agent/note/add', { visitor_id: ids.visitor, content: 'a note' });
  await ok('/agent/canned/create', { shortcut: 'thx', content: 'Thank you', scope: 'merchant' });
  const hook = await ok('/agent/webhook/create', { url: 'http://127.0.0.1:9/hook', events: 'message.created' });
  ids.webhook = hook.endpoint.id;
  const okJson = async (path: string, json: unknown) => {
    const r = await agent.json(path, { method: 'POST', json });
    expect([path, r.body.code, r.body.msg]).toEqual([path, 0, expect.anything()]);
    return r.body.data;
  };
  // Values the workbench answers from the merchant's and the agent's settings, none a default.
  await okJson('/agent/admin/settings/update', { max_concurrent_chats: 7, history_only_mine: true });
  await okJson('/agent/admin/agent/update', { agent_id: ids.agent, capacity: 4 });
  await okJson('/agent/admin/routing-rules', {
    rules: [
      { attribute: 'plan', equals: 'vip', priority: 10 },
      { page_contains: '/checkout', skill: 'billing' },
    ],
  });
  await okJson('/agent/settings/contact-fields', { fields: ['email', 'name'] });
  // A third visitor, whom nobody claims: a message left, with a message and contact details.
  const left = await bearerOf();
  const wrote = await left.client.json('/visitor/message/send', {
    method: 'POST',
    form: { client_msg_id: 'l1', type: 'text', content: 'call me back' },
    headers: left.auth,
  });
  expect(wrote.body.code).toBe(0);
  const contact = await left.client.json('/visitor/chat/contact', {
    method: 'POST',
    form: { email: 'lily@example.com', name: 'Lily' },
    headers: left.auth,
  });
  expect(contact.body.code).toBe(0);
  // Last: a bot answers new conversations first, and every conversation above is already claimed.
  await ok('/agent/bot/create', { name: 'Robo' });
  apiKey = (await ok('/agent/apikey/create', { name: 'differential', scopes: 'conversations:read' })).key;

  for (const [name, twin] of Object.entries(twins())) {
    const headers: Record<string, string> =
      twin.as === 'visitor'
        ? { authorization: `Bearer ${visitorBearer}` }
        : twin.as === 'apiKey'
          ? { authorization: `Bearer ${apiKey}` }
          : { token: agentToken };
    const qs = twin.restQuery ? `?${new URLSearchParams(twin.restQuery)}` : '';
    const rest = await new HttpClient(t.url).json(twin.rest + qs, { headers });
    expect([name, rest.body.code, rest.body.msg]).toEqual([name, 0, 'ok']);
    const gql = await new HttpClient(t.url).graphql(queryOf(twin.gql, twin.gqlArgs), {}, headers);
    expect([name, gql.body.errors]).toEqual([name, undefined]);
    const read = async (path: string, query?: Record<string, string>) => {
      const r = await new HttpClient(t.url).json(path + (query ? `?${new URLSearchParams(query)}` : ''), { headers });
      expect([name, path, r.body.code]).toEqual([name, path, 0]);
      return r.body.data;
    };
    const picked = twin.restPick ? twin.restPick(rest.body.data) : rest.body.data;
    const restData = twin.restAlso ? deepMerge(picked, await twin.restAlso(read)) : picked;
    const gqlData = twin.gqlPick ? twin.gqlPick(gql.body.data?.[twin.gql]) : gql.body.data?.[twin.gql];
    answers.set(name, { rest: restData, gql: gqlData });
  }
}, 120_000);
afterAll(() => t?.stop());

describe('REST and GraphQL agree field by field (issue 28)', () => {
  it('every REST GET route and every GraphQL Query field is twinned or listed as having no twin', () => {
    const table = twins();
    const twinnedRest = new Set(Object.values(table).map((tw) => tw.rest));
    const twinnedGql = new Set(Object.values(table).map((tw) => tw.gql));
    const unmappedRest = endpoints
      .filter((e) => e.method === 'get')
      .map((e) => e.path)
      .filter((p) => !twinnedRest.has(p) && !(p in restWithoutTwin));
    const unmappedGql = Object.keys(schema.getQueryType()?.getFields() ?? {}).filter(
      (f) => !twinnedGql.has(f) && !(f in graphqlWithoutTwin),
    );
    expect({ unmappedRest, unmappedGql }).toEqual({ unmappedRest: [], unmappedGql: [] });
    // Neither list names an operation that no longer exists, nor one that is twinned.
    const gets = new Set(endpoints.filter((e) => e.method === 'get').map((e) => e.path));
    for (const p of Object.keys(restWithoutTwin)) expect([p, gets.has(p) && !twinnedRest.has(p)]).toEqual([p, true]);
    const fields = new Set(Object.keys(schema.getQueryType()?.getFields() ?? {}));
    for (const f of Object.keys(graphqlWithoutTwin))
      expect([f, fields.has(f) && !twinnedGql.has(f)]).toEqual([f, true]);
  });

  it.each(Object.keys(twins()))('%s', (name) => {
    const twin = twins()[name] as Twin;
    const answer = answers.get(name);
    const rest = flatten(answer?.rest);
    const gql = flatten(answer?.gql);
    const mismatched: string[] = [];
    for (const [path, value] of rest) {
      if (gql.has(path) && gql.get(path) !== value)
        mismatched.push(`${path}: REST ${JSON.stringify(value)} ≠ GraphQL ${JSON.stringify(gql.get(path))}`);
    }
    const onlyRest = [...new Set([...rest.keys()].filter((p) => !gql.has(p)).map(pattern))].filter(
      (p) => !(twin.onlyRest && p in twin.onlyRest),
    );
    const onlyGql = [
      ...new Set(
        [...gql.keys()].filter((p) => !rest.has(p) && !(twin.absentIsNull && gql.get(p) === null)).map(pattern),
      ),
    ].filter((p) => !(twin.onlyGql && p in twin.onlyGql));
    const shared = [...rest.keys()].filter((p) => gql.has(p));
    expect(shared.length).toBeGreaterThan(0);
    if (twin.count !== undefined) {
      expect(itemsOf(answer?.rest)).toHaveLength(twin.count);
      expect(itemsOf(answer?.gql)).toHaveLength(twin.count);
    }
    expect({ mismatched, onlyRest, onlyGql }).toEqual({ mismatched: [], onlyRest: [], onlyGql: [] });
  });
});
