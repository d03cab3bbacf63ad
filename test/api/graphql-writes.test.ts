import { eq } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { visitorAttributeDefs, visitorAttributes, webhookDeliveries } from '../../src/db/schema.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { CAPTCHA, startTestApp, type TestApp } from '../support/test-app.js';
import { closeAllSockets, connectSocket, type TestSocket } from '../support/ws.js';

/**
 * The write differential of the GraphQL adapter (src/schema/): each mutation is called over
 * POST /graphql and what it wrote is read back through the legacy REST routes (or a GraphQL
 * query), compared by value. A wrong argument mapping in src/schema/*.ts writes something else,
 * or nothing, and fails here; the domain rules themselves are tested in test/domain/.
 */

let t: TestApp;
beforeAll(async () => {
  // A webhook endpoint on 127.0.0.1 (never reached: it is disabled before anything is queued).
  t = await startTestApp({ env: { WEBHOOK_ALLOW_PRIVATE: 'on' } });
});
afterEach(() => closeAllSockets());
afterAll(async () => {
  await closeAllSockets();
  await t?.stop();
});

// biome-ignore lint/suspicious/noExplicitAny: JSON answers of either API, compared by value.
type Json = any;

/** REST's snake_case answer in GraphQL's camelCase, so one toEqual compares the two adapters. */
const camel = (v: Json): Json =>
  Array.isArray(v)
    ? v.map(camel)
    : v && typeof v === 'object'
      ? Object.fromEntries(
          Object.entries(v).map(([k, x]) => [k.replace(/_([a-z])/g, (_, c) => c.toUpperCase()), camel(x)]),
        )
      : v;

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** A GraphQL operation that must succeed: its data. */
async function gql(client: HttpClient, query: string, variables?: Record<string, unknown>, headers = {}) {
  const { body } = await client.graphql(query, variables, headers);
  expect(body.errors).toBeUndefined();
  return body.data as Json;
}

/** A GraphQL operation that must fail: its first error. */
async function gqlError(client: HttpClient, query: string, variables?: Record<string, unknown>, headers = {}) {
  const { body } = await client.graphql(query, variables, headers);
  expect(body.errors?.length).toBeGreaterThan(0);
  return body.errors?.[0] as { message: string; extensions?: { code?: string } };
}

/** A REST read or write that must succeed: its `data`. */
async function rest(client: HttpClient, path: string, init: Parameters<HttpClient['json']>[1] = {}) {
  const { body } = await client.json(path, init);
  expect(body.code, `${path}: ${JSON.stringify(body)}`).toBe(0);
  return body.data as Json;
}

/** Runs one operation over a socket (no HTTP request: no visitor token, no Session store). */
async function overSocket(socket: TestSocket, query: string) {
  await socket.acked;
  const results = [];
  for await (const result of socket.client.iterate({ query })) results.push(result);
  expect(results).toHaveLength(1);
  return results[0] as Json;
}

const unique = () => Math.random().toString(36).slice(2, 8);

describe('availability.ts', () => {
  const SETTINGS = 'groupId configured timezone weekly { day start end } holidays exceptions { date start end }';
  const UPDATE = `mutation($input: UpdateBusinessHoursInput!) { updateBusinessHours(input: $input) { ${SETTINGS} } }`;
  const allDay = (day: unknown) => ({ day, start: '00:00', end: '24:00' });
  const restHours = async (ada: HttpClient, groupId?: string) => {
    const { state: _state, ...rest_ } = await rest(
      ada,
      `/agent/business-hours/get${groupId ? `?group_id=${groupId}` : ''}`,
    );
    return camel(rest_);
  };

  it('updateBusinessHours: weekdays as Int, name string and enum literals and variables; what REST reads back', async () => {
    const { client: ada } = await agentSession(t.url, 'ada');
    // Every day open all day, so the merchant stays open for the other tests of the file.
    const { updateBusinessHours: answered } = await gql(
      ada,
      `mutation($thu: Weekday!, $fri: Weekday!) { updateBusinessHours(input: {
        timezone: "UTC",
        weekly: [
          {day: 1, start: "00:00", end: "24:00"}, {day: TUESDAY, start: "00:00", end: "24:00"},
          {day: "wed", start: "00:00", end: "24:00"}, {day: $thu, start: "00:00", end: "24:00"},
          {day: $fri, start: "00:00", end: "24:00"}, {day: "SATURDAY", start: "00:00", end: "24:00"},
          {day: 7, start: "00:00", end: "24:00"}],
        holidays: ["2020-01-01"],
        exceptions: [{date: "2020-01-02", start: "10:00", end: "12:00"}]
      }) { ${SETTINGS} } }`,
      { thu: 4, fri: 'friday' },
    );
    const expected = {
      groupId: null,
      configured: true,
      timezone: 'UTC',
      weekly: [1, 2, 3, 4, 5, 6, 7].map(allDay),
      holidays: ['2020-01-01'],
      exceptions: [{ date: '2020-01-02', start: '10:00', end: '12:00' }],
    };
    expect(answered).toEqual(expected);
    expect(await restHours(ada)).toEqual(expected);

    // holidays/exceptions null and a group named: the group's calendar, with [] and []; the merchant's is untouched.
    const { updateBusinessHours: group } = await gql(ada, UPDATE, {
      input: {
        groupId: 'g_demo_sales',
        timezone: 'Europe/Paris',
        weekly: [allDay(1)],
        holidays: null,
        exceptions: null,
      },
    });
    const groupExpected = {
      groupId: 'g_demo_sales',
      configured: true,
      timezone: 'Europe/Paris',
      weekly: [allDay(1)],
      holidays: [],
      exceptions: [],
    };
    expect(group).toEqual(groupExpected);
    expect(await restHours(ada, 'g_demo_sales')).toEqual(groupExpected);
    expect(await restHours(ada)).toEqual(expected);

    // groupId, holidays and exceptions omitted: the merchant's calendar, stored with [] and [].
    const { updateBusinessHours: bare } = await gql(ada, UPDATE, {
      input: { timezone: 'UTC', weekly: [1, 2, 3, 4, 5, 6, 7].map(allDay) },
    });
    const bareExpected = { ...expected, holidays: [], exceptions: [] };
    expect(bare).toEqual(bareExpected);
    expect(await restHours(ada)).toEqual(bareExpected);
  });

  it('updateBusinessHours: a weekday that is no Int nor name is refused by the scalar, and nothing is written', async () => {
    const { client: ada } = await agentSession(t.url, 'ada');
    const before = await restHours(ada);
    // A literal of another kind: parseLiteral refuses it while the document is validated.
    const literal = await gqlError(
      ada,
      'mutation { updateBusinessHours(input: {timezone: "UTC", weekly: [{day: 1.5, start: "09:00", end: "17:00"}]}) { timezone } }',
    );
    expect(literal.message).toContain('a weekday is an Int or a name');
    expect(literal.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    // Variables of another type: parseValue refuses them before the resolver runs.
    for (const day of [1.5, true, { d: 1 }]) {
      const variable = await gqlError(ada, UPDATE, {
        input: { timezone: 'UTC', weekly: [{ day, start: '09:00', end: '17:00' }] },
      });
      expect([day, variable.message]).toEqual([day, expect.stringContaining('a weekday is 1 (Monday)')]);
      expect(variable.extensions?.code).toBe('BAD_USER_INPUT');
    }
    // A name that is no weekday passes the scalar and is refused by the domain.
    const name = await gqlError(ada, UPDATE, {
      input: { timezone: 'UTC', weekly: [{ day: 'funday', start: '09:00', end: '17:00' }] },
    });
    expect(name.extensions?.code).toBe('BAD_USER_INPUT');
    expect(name.message).not.toContain('a weekday is 1 (Monday)');
    expect(await restHours(ada)).toEqual(before);
  });

  it('updateContactFields and leaveContactDetails (as the visitor): given, null and omitted arguments', async () => {
    const { client: ada } = await agentSession(t.url, 'ada');
    const { updateContactFields } = await gql(
      ada,
      'mutation { updateContactFields(fields: ["phone", "name", "email"]) }',
    );
    expect(updateContactFields).toEqual(['phone', 'name', 'email']);
    const v = await visitorToken(t.url);
    const visitor = new HttpClient(t.url);
    const boot = await rest(visitor, '/visitor/data/get', { headers: bearer(v.token) });
    expect(boot.setting.contact_fields).toEqual(['phone', 'name', 'email']);

    // A conversation nobody answers (no agent online): a message left, which REST lists with its contact.
    await rest(visitor, '/visitor/message/send', {
      method: 'POST',
      json: { client_msg_id: 'c-1', content: 'Call me back' },
      headers: bearer(v.token),
    });
    const LEAVE =
      'mutation($n: String, $e: String, $p: String) { leaveContactDetails(name: $n, email: $e, phone: $p) }';
    // name given, email null, phone omitted.
    const first = await gql(visitor, LEAVE, { n: 'Lily', e: null }, bearer(v.token));
    expect(first.leaveContactDetails).toEqual({ name: 'Lily' });
    // phone given, name omitted: merged with what was left.
    const second = await gql(visitor, LEAVE, { p: '+33 1 23 45 67 89' }, bearer(v.token));
    expect(second.leaveContactDetails).toEqual({ name: 'Lily', phone: '+33 1 23 45 67 89' });
    const third = await gql(
      visitor,
      'mutation { leaveContactDetails(email: "lily@example.com") }',
      {},
      bearer(v.token),
    );
    const stored = { name: 'Lily', phone: '+33 1 23 45 67 89', email: 'lily@example.com' };
    expect(third.leaveContactDetails).toEqual(stored);
    const left = await rest(ada, '/agent/messages-left/list?limit=100');
    expect(left.list.find((m: Json) => m.visitor_id === v.uid)?.contact).toEqual(stored);
  });

  it('updateRoutingRules: null fields are dropped, an absent priority answers null, a priority answers itself', async () => {
    const { client: ada } = await agentSession(t.url, 'ada');
    const rules = `rules: [
      {attribute: "plan", equals: "never-set", pageContains: null, skill: null, priority: 10},
      {pageContains: "/never-visited", attribute: null, equals: null, skill: "billing", priority: null}]`;
    const FIELDS = 'attribute equals pageContains skill priority';
    const expected = [
      { attribute: 'plan', equals: 'never-set', pageContains: null, skill: null, priority: 10 },
      { attribute: null, equals: null, pageContains: '/never-visited', skill: 'billing', priority: null },
    ];
    const { updateRoutingRules } = await gql(ada, `mutation { updateRoutingRules(${rules}) { ${FIELDS} } }`);
    expect(updateRoutingRules).toEqual(expected);
    expect(await gql(ada, `{ routingRules { ${FIELDS} } }`)).toEqual({ routingRules: expected });
    expect(await rest(ada, '/agent/admin/routing-rules')).toEqual({
      rules: [
        { attribute: 'plan', equals: 'never-set', priority: 10 },
        { page_contains: '/never-visited', skill: 'billing' },
      ],
    });
  });
});

describe('visitor.ts', () => {
  it('visitorBootstrap: attribute values (string, number, boolean) as REST reads them; another value is refused', async () => {
    const { db, configCache } = t.app.deps;
    await db
      .insert(visitorAttributeDefs)
      .values({ merchantId: 'm_demo', key: 'vip', label: 'VIP', type: 'boolean', editable: true, position: 10 })
      .onConflictDoNothing();
    await configCache.announceChanged('m_demo');
    const v = await visitorToken(t.url);
    await db.insert(visitorAttributes).values([
      { visitorId: v.uid, key: 'email', value: 'v@example.com' },
      { visitorId: v.uid, key: 'orders', value: 7 },
      { visitorId: v.uid, key: 'vip', value: true },
    ]);
    const visitor = new HttpClient(t.url);
    const QUERY =
      '{ visitorBootstrap { visitor { attributes { key label type value editable } } setting { wsAddress } } }';
    const { visitorBootstrap } = await gql(visitor, QUERY, {}, bearer(v.token));
    const boot = await rest(visitor, '/visitor/data/get', { headers: bearer(v.token) });
    expect(visitorBootstrap.visitor.attributes).toEqual(boot.visitor.attributes);
    expect(visitorBootstrap.visitor.attributes.map((a: Json) => a.value)).toEqual(['v@example.com', 7, true]);
    expect(visitorBootstrap.setting.wsAddress).toBe(boot.setting.ws_address);
    expect(visitorBootstrap.setting.wsAddress).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\//);

    // A value of another JSON type (an object) is no AttributeValue: that field errs, its siblings stay.
    // The column's type forbids it, its jsonb holds it (a row written by another system).
    const w = await visitorToken(t.url);
    await db.insert(visitorAttributes).values([
      { visitorId: w.uid, key: 'email', value: { not: 'a scalar' } as unknown as string },
      { visitorId: w.uid, key: 'orders', value: 3 },
    ]);
    const { body } = await visitor.graphql(QUERY, {}, bearer(w.token));
    // The scalar's refusal is the server's fault, not the client's: masked.
    expect(body.errors?.[0]).toMatchObject({
      message: 'Internal error',
      extensions: { code: 'INTERNAL_SERVER_ERROR' },
    });
    expect(t.rawLogs()).toContain('an attribute value is a string, a finite number or a boolean');
    expect(body.errors?.[0]?.path).toEqual(['visitorBootstrap', 'visitor', 'attributes', 0, 'value']);
    expect(body.data?.visitorBootstrap.visitor.attributes.map((a: Json) => [a.key, a.value])).toEqual([
      ['email', null],
      ['orders', 3],
    ]);
  });

  it('revokeVisitorToken: over HTTP the bearer is revoked for REST too; over a socket it is refused and stays', async () => {
    const v = await visitorToken(t.url);
    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', authorization: `Bearer ${v.token}` });
    const refused = await overSocket(socket, 'mutation { revokeVisitorToken }');
    expect(refused.errors?.[0]).toMatchObject({
      message: 'Revoke a visitor token over HTTP',
      extensions: { code: 'BAD_USER_INPUT' },
    });
    const visitor = new HttpClient(t.url);
    expect((await visitor.json('/visitor/data/get', { headers: bearer(v.token) })).body.code).toBe(0);
    expect(await gql(visitor, 'mutation { revokeVisitorToken }', {}, bearer(v.token))).toEqual({
      revokeVisitorToken: true,
    });
    expect((await visitor.json('/visitor/data/get', { headers: bearer(v.token) })).body.code).toBe(1401);
  });
});

describe('desk', () => {
  it('canned responses: updateCannedResponse (one field or both) and deleteCannedResponse, as REST lists them', async () => {
    const { client: alice } = await agentSession(t.url, 'alice');
    const created = await rest(alice, '/agent/canned/create', {
      method: 'POST',
      json: { shortcut: `hi${unique()}`, content: 'Hello!' },
    });
    const listed = async () =>
      camel((await rest(alice, '/agent/canned/list?scope=personal')).list.find((c: Json) => c.id === created.id));
    const FIELDS = 'id scope agentId shortcut content createdAt updatedAt';
    const { updateCannedResponse: contentOnly } = await gql(
      alice,
      `mutation($input: UpdateCannedResponseInput!) { updateCannedResponse(input: $input) { ${FIELDS} } }`,
      { input: { id: created.id, content: 'Hello there!', shortcut: null } },
    );
    expect(contentOnly).toMatchObject({ id: created.id, shortcut: created.shortcut, content: 'Hello there!' });
    expect(await listed()).toEqual(contentOnly);
    const { updateCannedResponse: both } = await gql(
      alice,
      `mutation { updateCannedResponse(input: {id: "${created.id}", shortcut: "bye${unique()}", content: "Bye!"}) { ${FIELDS} } }`,
    );
    expect(both.content).toBe('Bye!');
    expect(await listed()).toEqual(both);
    const { deleteCannedResponse } = await gql(
      alice,
      `mutation($id: ID!) { deleteCannedResponse(id: $id) { ${FIELDS} } }`,
      { id: created.id },
    );
    expect(deleteCannedResponse).toEqual(both);
    expect(await listed()).toBeUndefined();
  });

  it('labels: createLabel with and without color, label and unlabel conversations, labels of several conversations in one query', async () => {
    const { client: alice } = await agentSession(t.url, 'alice');
    const LABEL = 'id name color createdAt';
    const name = `vip-${unique()}`;
    const { createLabel: colored } = await gql(
      alice,
      `mutation($input: CreateLabelInput!) { createLabel(input: $input) { ${LABEL} } }`,
      { input: { name, color: '#ff0000' } },
    );
    const { createLabel: grey } = await gql(
      alice,
      `mutation { createLabel(input: {name: "${name}-grey"}) { ${LABEL} } }`,
    );
    expect([colored.name, colored.color, grey.name]).toEqual([name, '#ff0000', `${name}-grey`]);
    const labels = camel((await rest(alice, '/agent/label/list')).list);
    expect(labels.find((l: Json) => l.id === colored.id)).toEqual(colored);
    expect(labels.find((l: Json) => l.id === grey.id)).toEqual(grey);
    // The default color is the domain's, as REST creates it.
    const restGrey = await rest(alice, '/agent/label/create', { method: 'POST', json: { name: `${name}-rest` } });
    expect(grey.color).toBe(restGrey.color);

    const LABEL_OP = (op: string) =>
      `mutation($v: ID!, $l: ID!) { ${op}(visitorId: $v, labelId: $l) { conversationId visitorId labels { ${LABEL} } } }`;
    await gql(alice, LABEL_OP('labelConversation'), { v: 'v_demo_lily', l: grey.id });
    const { labelConversation } = await gql(alice, LABEL_OP('labelConversation'), { v: 'v_demo_lily', l: colored.id });
    expect(labelConversation.visitorId).toBe('v_demo_lily');
    expect(labelConversation.labels.map((l: Json) => l.id)).toEqual([colored.id, grey.id]);
    expect(camel(await rest(alice, '/agent/label/get?visitor_id=v_demo_lily'))).toEqual(labelConversation);
    const { unlabelConversation } = await gql(alice, LABEL_OP('unlabelConversation'), {
      v: 'v_demo_lily',
      l: grey.id,
    });
    expect(unlabelConversation.labels).toEqual([colored]);
    expect(camel(await rest(alice, '/agent/label/get?visitor_id=v_demo_lily'))).toEqual(unlabelConversation);

    // Both of alice's conversations in one query (one batch): Lily's label, none on Wang's.
    const { conversations } = await gql(alice, `{ conversations { nodes { visitorId labels { ${LABEL} } } } }`);
    const byVisitor = Object.fromEntries(conversations.nodes.map((c: Json) => [c.visitorId, c.labels]));
    expect(byVisitor).toEqual({
      v_demo_lily: camel((await rest(alice, '/agent/label/get?visitor_id=v_demo_lily')).labels),
      v_demo_wang: camel((await rest(alice, '/agent/label/get?visitor_id=v_demo_wang')).labels),
    });
    expect(byVisitor.v_demo_lily).toEqual([colored]);
    expect(byVisitor.v_demo_wang).toEqual([]);
  });

  it('addNote writes the note REST lists', async () => {
    const { client: alice } = await agentSession(t.url, 'alice');
    const content = `note ${unique()}`;
    const { addNote } = await gql(
      alice,
      'mutation($v: ID!, $c: String!) { addNote(visitorId: $v, content: $c) { id conversationId visitorId agentId agentNickname afterSeq content createdAt } }',
      { v: 'v_demo_wang', c: content },
    );
    expect(addNote).toMatchObject({ visitorId: 'v_demo_wang', agentId: 'a_alice', content });
    const { list } = await rest(alice, '/agent/note/list?visitor_id=v_demo_wang');
    expect(camel(list.find((n: Json) => n.id === addNote.id))).toEqual(addNote);
  });

  it('updateAgent: capacity null clears it (back to the merchant default), absent keeps it', async () => {
    const { client: ada } = await agentSession(t.url, 'ada');
    const username = `cap-${unique()}`;
    const created = await rest(ada, '/agent/admin/agent/create', {
      method: 'POST',
      json: { username, nickname: 'Cap', password: 'cap-password', capacity: 3 },
    });
    const capacity = async () =>
      (await rest(ada, '/agent/admin/agents')).find((a: Json) => a.agent_id === created.agent_id)?.capacity;
    expect(await capacity()).toBe(3);
    const UPDATE = `mutation($input: UpdateAgentInput!) { updateAgent(input: $input) { nickname account { capacity } } }`;
    const kept = await gql(ada, UPDATE, { input: { agentId: created.agent_id, nickname: 'Capped' } });
    expect(kept.updateAgent).toEqual({ nickname: 'Capped', account: { capacity: 3 } });
    expect(await capacity()).toBe(3);
    const cleared = await gql(ada, UPDATE, { input: { agentId: created.agent_id, capacity: null } });
    expect(cleared.updateAgent).toEqual({ nickname: 'Capped', account: { capacity: null } });
    expect(await capacity()).toBeNull();
  });

  it('Sessions: mySessions over HTTP is what REST lists; over a socket it is refused (no Session store there)', async () => {
    const alice = await agentSession(t.url, 'alice');
    const { mySessions } = await gql(alice.client, '{ mySessions { id agentId device address current } }');
    const listed = await rest(alice.client, '/agent/session/list');
    expect(mySessions).toEqual(
      listed.map(({ id, agent_id, device, address, current }: Json) => ({
        id,
        agentId: agent_id,
        device,
        address,
        current,
      })),
    );
    expect(mySessions.filter((s: Json) => s.current)).toHaveLength(1);
    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: alice.token });
    const refused = await overSocket(socket, '{ mySessions { id } }');
    expect(refused.errors?.[0]).toMatchObject({
      message: 'Sessions are read and ended over HTTP: send this as POST /graphql',
      extensions: { code: 'BAD_USER_INPUT' },
    });
  });
});

describe('bots.ts', () => {
  it('createBot with and without groupId, setBotDisabled both ways, as REST lists them', async () => {
    const { client: ada } = await agentSession(t.url, 'ada');
    const BOT = 'id name groupId apiKeyId disabled createdAt';
    const CREATE = `mutation($name: String!, $groupId: ID) { createBot(name: $name, groupId: $groupId) { bot { ${BOT} } key } }`;
    const SET = `mutation($id: ID!, $d: Boolean!) { setBotDisabled(botId: $id, disabled: $d) { ${BOT} } }`;
    const listed = async (id: string) => camel((await rest(ada, '/agent/bot/list')).find((b: Json) => b.id === id));

    // The merchant-wide bot would answer every new conversation first: disabled at once.
    const { createBot: all } = await gql(ada, CREATE, { name: 'Robo all' });
    const { setBotDisabled: allOff } = await gql(ada, SET, { id: all.bot.id, d: true });
    expect(allOff).toEqual({ ...all.bot, disabled: true });
    expect(all.bot.groupId).toBeNull();
    expect(await listed(all.bot.id)).toEqual(allOff);

    const { createBot: sales } = await gql(ada, CREATE, { name: 'Robo sales', groupId: 'g_demo_sales' });
    expect(sales.bot).toMatchObject({ name: 'Robo sales', groupId: 'g_demo_sales', disabled: false });
    expect(sales.key).toMatch(/^prly_/);
    expect(await listed(sales.bot.id)).toEqual(sales.bot);
    await gql(ada, SET, { id: sales.bot.id, d: true });
    expect((await listed(sales.bot.id)).disabled).toBe(true);
    const { setBotDisabled: on } = await gql(ada, SET, { id: sales.bot.id, d: false });
    expect(on).toEqual(sales.bot);
    expect(await listed(sales.bot.id)).toEqual(sales.bot);
  });
});

describe('webhooks.ts and args.ts (an API key beside an agent Session)', () => {
  const ENDPOINT =
    'id url description events disabled consecutiveFailures circuitOpenUntil previousSecretUntil createdAt';
  const DELIVERY =
    'id endpointId event state attempts lastStatus lastError lastLatencyMs lastAttemptAt nextAttemptAt createdAt body';

  it('disable, rotate, test, redeliver failed and the log’s `first`, by an agent and by an API key, as REST reads them', async () => {
    const { client: ada } = await agentSession(t.url, 'ada');
    const { key } = await rest(ada, '/agent/apikey/create', {
      method: 'POST',
      json: { name: `hooks-${unique()}`, scopes: ['webhooks:manage', 'conversations:read'] },
    });
    const server = new HttpClient(t.url);
    const asKey = bearer(key);
    // Created by the key, disabled by the agent at once: its deliveries wait, never attempted.
    const { createWebhookEndpoint: created } = await gql(
      server,
      `mutation { createWebhookEndpoint(url: "http://127.0.0.1:9/parley", events: ["message.created"]) { endpoint { id } } }`,
      {},
      asKey,
    );
    const id = created.endpoint.id as string;
    const SET = `mutation($id: ID!, $d: Boolean!) { setWebhookEndpointDisabled(endpointId: $id, disabled: $d) { ${ENDPOINT} } }`;
    const restEndpoint = async () => camel((await rest(ada, '/agent/webhook/list')).find((e: Json) => e.id === id));
    const { setWebhookEndpointDisabled: off } = await gql(ada, SET, { id, d: true });
    expect(off).toMatchObject({ id, disabled: true });
    expect(await restEndpoint()).toEqual(off);
    // The key reads (and writes) its merchant's endpoints: the same as the agent's REST read.
    const { webhookEndpoints } = await gql(server, `{ webhookEndpoints { ${ENDPOINT} } }`, {}, asKey);
    expect(webhookEndpoints).toEqual(camel(await rest(ada, '/agent/webhook/list')));
    const { setWebhookEndpointDisabled: on } = await gql(server, SET, { id, d: false }, asKey);
    expect(on.disabled).toBe(false);
    expect(await restEndpoint()).toEqual(on);
    await gql(ada, SET, { id, d: true });

    const { rotateWebhookSecret: rotated } = await gql(
      ada,
      `mutation($id: ID!) { rotateWebhookSecret(endpointId: $id) { endpoint { ${ENDPOINT} } secret } }`,
      { id },
    );
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.endpoint.previousSecretUntil).toBeGreaterThan(Date.now());
    expect(await restEndpoint()).toEqual(rotated.endpoint);

    const TEST = `mutation($id: ID!) { testWebhookEndpoint(endpointId: $id) { ${DELIVERY} } }`;
    const { testWebhookEndpoint: ping1 } = await gql(ada, TEST, { id });
    const { testWebhookEndpoint: ping2 } = await gql(server, TEST, { id }, asKey);
    expect([ping1.endpointId, ping1.event, ping1.state]).toEqual([id, 'webhook.test', 'pending']);
    const restLog = async () => camel(await rest(ada, `/agent/webhook/deliveries?endpoint_id=${id}`));
    expect(await restLog()).toEqual([ping2, ping1]);
    const LOG = `query($id: ID!, $first: Int) { webhookDeliveries(endpointId: $id, first: $first) { ${DELIVERY} } }`;
    expect((await gql(ada, LOG, { id, first: 1 })).webhookDeliveries).toEqual([ping2]);
    expect((await gql(server, LOG, { id }, asKey)).webhookDeliveries).toEqual([ping2, ping1]);

    // Both pings failed for good (as after their retries), the first a minute earlier: each range
    // [since, until) redelivers exactly the one created in it.
    const now = Date.now();
    const failed = async (deliveryId: string, createdAt: number) =>
      t.app.deps.db
        .update(webhookDeliveries)
        .set({ state: 'failed', createdAt: new Date(createdAt) })
        .where(eq(webhookDeliveries.id, deliveryId));
    await failed(ping1.id, now - 60_000);
    await failed(ping2.id, now);
    const REDELIVER =
      'mutation($id: ID!, $s: Float!, $u: Float!) { redeliverFailedWebhooks(endpointId: $id, since: $s, until: $u) }';
    const states = async () => (await restLog()).map((d: Json) => [d.id, d.state]);
    expect(await gql(ada, REDELIVER, { id, s: now - 30_000, u: now + 1 })).toEqual({ redeliverFailedWebhooks: 1 });
    expect(await states()).toEqual([
      [ping2.id, 'pending'],
      [ping1.id, 'failed'],
    ]);
    expect(await gql(server, REDELIVER, { id, s: now - 90_000, u: now - 30_000 }, asKey)).toEqual({
      redeliverFailedWebhooks: 1,
    });
    expect(await states()).toEqual([
      [ping2.id, 'pending'],
      [ping1.id, 'pending'],
    ]);
  });

  it('readerViewer: a key with conversations:read reads its merchant’s conversations and messages, as REST /api answers them', async () => {
    const { client: ada } = await agentSession(t.url, 'ada');
    const { key } = await rest(ada, '/agent/apikey/create', {
      method: 'POST',
      json: { name: `reader-${unique()}`, scopes: ['conversations:read'] },
    });
    const server = new HttpClient(t.url);
    const asKey = bearer(key);
    const data = await gql(
      server,
      `{ conversations(first: 100) { nodes { conversationId visitorId state } }
         conversation(visitorId: "v_demo_wang") { conversationId visitorId state unreadCount lastSeq }
         messages(visitorId: "v_demo_wang", first: 100) { messages { id seq content } } }`,
      {},
      asKey,
    );
    const pick = (c: Json, keys: string[]) => Object.fromEntries(keys.map((k) => [k, c[k]]));
    const listed = camel(await rest(server, '/api/conversation/list?limit=100', { headers: asKey }));
    expect(data.conversations.nodes).toEqual(
      listed.list.map((c: Json) => pick(c, ['conversationId', 'visitorId', 'state'])),
    );
    expect(data.conversations.nodes.map((c: Json) => c.visitorId)).toEqual(
      expect.arrayContaining(['v_demo_lily', 'v_demo_wang']),
    );
    const one = camel(await rest(server, '/api/conversation/get?visitor_id=v_demo_wang', { headers: asKey }));
    expect(data.conversation).toEqual(pick(one, ['conversationId', 'visitorId', 'state', 'unreadCount', 'lastSeq']));
    const history = camel(await rest(server, '/api/message/list?visitor_id=v_demo_wang&limit=100', { headers: asKey }));
    expect(data.messages.messages).toEqual(history.messages.map((m: Json) => pick(m, ['id', 'seq', 'content'])));
    expect(data.messages.messages.length).toBeGreaterThan(0);
  });
});

describe('auth.ts', () => {
  const LOGIN =
    'mutation($u: String!, $p: String!, $c: String!, $cid: String) { login(username: $u, password: $p, captcha: $c, cid: $cid) { token redirect } }';

  it('login with a cid, with a null cid and without one; logout ends the Session for REST', async () => {
    for (const [cid, stored] of [
      ['push-7', 'push-7'],
      [null, undefined],
      [undefined, undefined],
    ] as const) {
      const client = new HttpClient(t.url);
      await client.captcha('login');
      const { login } = await gql(client, LOGIN, { u: 'alice', p: 'alice-password', c: CAPTCHA, cid });
      expect(login.redirect).toBe('/agent/');
      expect([cid, (await t.app.sessions.storedPort(login.token))?.state.cid]).toEqual([cid, stored]);
      const workbench = await rest(new HttpClient(t.url), '/agent/data/get', { headers: { token: login.token } });
      expect(workbench.agent.agent_id).toBe('a_alice');
      if (cid !== 'push-7') continue;
      expect(await gql(client, 'mutation { logout }')).toEqual({ logout: true });
      const after = await new HttpClient(t.url).json('/agent/data/get', { headers: { token: login.token } });
      expect(after.body.code).toBe(-1);
    }
  });

  it('login and logout are refused beside a visitor Authorization: Bearer, and the Session stays', async () => {
    const alice = await agentSession(t.url, 'alice');
    const v = await visitorToken(t.url);
    await alice.client.captcha('login');
    for (const query of ['mutation { logout }', LOGIN]) {
      const error = await gqlError(
        alice.client,
        query,
        { u: 'alice', p: 'alice-password', c: CAPTCHA },
        bearer(v.token),
      );
      expect(error).toMatchObject({
        message: 'login and logout are agent operations: send them without a visitor Authorization header',
        extensions: { code: 'BAD_USER_INPUT' },
      });
    }
    expect((await rest(alice.client, '/agent/data/get')).agent.agent_id).toBe('a_alice');
  });
});
