import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpoints } from '../../src/rest/endpoints.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { flatten, itemsOf, pattern, queryOf, schema } from './differential.fixtures.js';
import { graphqlWithoutTwin, ids, type Json, restWithoutTwin, type Twin, twins } from './differential.twins.js';

// Issue 28 (1): the same data read through REST and through GraphQL agree field by field.
// Both answers are flattened to leaf paths; key names are normalised (snake_case ↔ camelCase,
// case-insensitive) and so are the documented legacy encodings (0/1 ↔ booleans, numbers ↔
// numeric strings). Every leaf present on both sides must be equal; a leaf on one side only is
// allowed only where the operation's exception table lists it, with the reason.
// Generated from the declarations: every REST GET route (src/rest/endpoints.ts) and every
// GraphQL Query field (schema.graphql) is either twinned or listed as having no twin in the table
// (differential.twins.ts), so a newly declared read fails here until it is mapped.

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
  /** Posts as the agent (a form, or a JSON body: `{ json }`) and returns the answer's data, which must be a success. */
  const ok = async (path: string, body: Record<string, string> | { json: unknown }) => {
    const r = await agent.json(path, { method: 'POST', ...('json' in body ? body : { form: body }) });
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
  // Values the workbench answers from the merchant's and the agent's settings, none a default.
  await ok('/agent/admin/settings/update', { json: { max_concurrent_chats: 7, history_only_mine: true } });
  await ok('/agent/admin/agent/update', { json: { agent_id: ids.agent, capacity: 4 } });
  await ok('/agent/admin/routing-rules', {
    json: {
      rules: [
        { attribute: 'plan', equals: 'vip', priority: 10 },
        { page_contains: '/checkout', skill: 'billing' },
      ],
    },
  });
  await ok('/agent/settings/contact-fields', { json: { fields: ['email', 'name'] } });
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
