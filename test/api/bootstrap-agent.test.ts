import { eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversations, merchants, visitors } from '../../src/db/schema.js';
import { LOGIN_REQUIRED_MSG } from '../../src/errors.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { bearer, jsonType, shapeOf } from './bootstrap.fixtures.js';

let t: TestApp;
let alice: Awaited<ReturnType<typeof agentSession>>;
beforeAll(async () => {
  t = await startTestApp();
  alice = await agentSession(t.url, 'alice');
});
afterAll(() => t.stop());

const db = () => t.app.deps.db;
/** A test writing a merchant's configuration directly announces it, as every write path does (docs/operations.md "Configuration cache"). */
const configChanged = (merchantId: string) => t.app.deps.configCache.announceChanged(merchantId);
const workbench = (client: HttpClient, init: Parameters<HttpClient['json']>[1] = {}, path = '/agent/data/get') =>
  client.json(path, init);

describe('Agent workbench bootstrap data (GET /agent/data/get)', () => {
  it('answers {code:0, msg:"ok", data} with chatting, agent, agent_groups, setting, visitor_attribute_config, extensions', async () => {
    const { status, body } = await workbench(alice.client);
    expect(status).toBe(200);
    expect(body.code).toBe(0);
    expect(body.msg).toBe('ok');
    const types = {
      chatting: 'object',
      agent: 'object',
      agent_groups: 'array',
      setting: 'object',
      visitor_attribute_config: 'object',
      extensions: 'object',
    };
    expect(Object.keys(body.data).sort()).toEqual(Object.keys(types).sort());
    for (const [field, type] of Object.entries(types))
      expect([field, jsonType(body.data[field])]).toEqual([field, type]);
  });

  it('chatting: keyed `visitor<uid>`, every entry with the spec fields and types, pinned first', async () => {
    const { chatting } = (await workbench(alice.client)).body.data;
    expect(Object.keys(chatting)).toEqual(['visitorv_demo_lily', 'visitorv_demo_wang']); // Lily is pinned
    const entryTypes = {
      id: 'string',
      name: 'string',
      type: 'string',
      timestamp: 'number',
      pinned_at: 'number',
      unread_count: 'number',
      bot: 'number',
      account_state: 'string',
      history_only_mine: 'boolean',
      items: 'array',
    };
    for (const [key, entry] of Object.entries<Record<string, unknown>>(chatting)) {
      expect(key).toBe(`visitor${entry.id}`);
      expect(Object.keys(entry).sort()).toEqual(Object.keys(entryTypes).sort());
      for (const [field, type] of Object.entries(entryTypes))
        expect([field, jsonType(entry[field])]).toEqual([field, type]);
      expect(entry.type).toBe('visitor');
      expect(entry.account_state).toBe('normal');
      // Unix seconds: ten digits this century, not milliseconds.
      expect(String(entry.timestamp)).toMatch(/^\d{10}$/);
    }
    expect(chatting.visitorv_demo_lily).toMatchObject({ name: 'Lily', unread_count: 0 });
    expect(chatting.visitorv_demo_lily.pinned_at).toBeGreaterThan(0);
    expect(chatting.visitorv_demo_wang).toMatchObject({ name: '王先生', pinned_at: 0, unread_count: 3, bot: 0 });
  });

  it('a pinned conversation comes before a more recent unpinned one; unpinned ones are latest first; closed ones are gone', async () => {
    const now = Math.floor(Date.now() / 1000);
    await db()
      .insert(visitors)
      .values(
        ['a', 'b', 'closed'].map((n) => ({
          id: `v_order_${n}`,
          merchantId: 'm_demo',
          nickname: n,
          channel: `visitor-o-${n}`,
        })),
      );
    await db()
      .insert(conversations)
      .values([
        // Rows as the chat domain leaves them (state active / closed); lifecycle rules are in test/chat-*.
        {
          id: 'c_order_a',
          merchantId: 'm_demo',
          agentId: 'a_alice',
          visitorId: 'v_order_a',
          timestamp: now + 10,
          state: 'active',
        },
        {
          id: 'c_order_b',
          merchantId: 'm_demo',
          agentId: 'a_alice',
          visitorId: 'v_order_b',
          timestamp: now + 5,
          state: 'active',
        },
        {
          id: 'c_order_closed',
          merchantId: 'm_demo',
          agentId: 'a_alice',
          visitorId: 'v_order_closed',
          timestamp: now,
          state: 'closed',
          closedAt: new Date(),
        },
      ]);
    try {
      const keys = Object.keys((await workbench(alice.client)).body.data.chatting);
      expect(keys).toEqual(['visitorv_demo_lily', 'visitorv_order_a', 'visitorv_order_b', 'visitorv_demo_wang']);
    } finally {
      await db()
        .delete(visitors)
        .where(inArray(visitors.id, ['v_order_a', 'v_order_b', 'v_order_closed']));
    }
  });

  it('agent: {agent_id, nickname, avatar, level, state}, the logged-in agent', async () => {
    const { agent } = (await workbench(alice.client)).body.data;
    expect(Object.keys(agent).sort()).toEqual(['agent_id', 'avatar', 'level', 'nickname', 'state']);
    for (const field of Object.keys(agent)) expect([field, jsonType(agent[field])]).toEqual([field, 'string']);
    expect(agent).toMatchObject({ agent_id: 'a_alice', nickname: 'Alice', level: 'agent' });
    expect(['online', 'offline', 'busy', 'away']).toContain(agent.state);
  });

  it("agent_groups: the merchant's groups as {id, name, is_default}, the default group first", async () => {
    const { agent_groups } = (await workbench(alice.client)).body.data;
    expect(agent_groups).toEqual([
      { id: 'g_demo_default', name: 'Default', is_default: true },
      { id: 'g_demo_sales', name: 'Sales', is_default: false },
    ]);
  });

  it("setting: bid, appname, the real-time appkey and ws_address, plus the merchant's own settings, which cannot override them", async () => {
    await db()
      .update(merchants)
      .set({ workbenchSettings: { welcome: 'Hello!', max_chats: 8, bid: 'acme', ws_address: 'ws://evil.example' } })
      .where(eq(merchants.id, 'm_demo'));
    await configChanged('m_demo');
    try {
      const { setting } = (await workbench(alice.client)).body.data;
      expect(setting).toEqual({
        bid: 'demo',
        appname: 'Demo Shop',
        appkey: 'demo-appkey',
        ws_address: `${t.url.replace('http', 'ws')}/graphql`,
        welcome: 'Hello!',
        max_chats: 8,
      });
    } finally {
      await db().update(merchants).set({ workbenchSettings: {} }).where(eq(merchants.id, 'm_demo'));
      await configChanged('m_demo');
    }
  });

  it('visitor_attribute_config: {attributes: [{key, label, type, editable}]} in display order; image attributes never editable', async () => {
    const { visitor_attribute_config } = (await workbench(alice.client)).body.data;
    expect(visitor_attribute_config).toEqual({
      attributes: [
        { key: 'email', label: 'Email', type: 'text', editable: true },
        { key: 'member_card', label: 'Member card', type: 'image', editable: false }, // configured editable
        { key: 'orders', label: 'Orders', type: 'number', editable: false },
      ],
    });
  });

  it('extensions: nav, chat_actions and side_iframes arrays, flags and account_level_options objects', async () => {
    const { extensions } = (await workbench(alice.client)).body.data;
    expect(Object.keys(extensions).sort()).toEqual([
      'account_level_options',
      'chat_actions',
      'flags',
      'nav',
      'side_iframes',
    ]);
    expect(jsonType(extensions.nav)).toBe('array');
    expect(jsonType(extensions.chat_actions)).toBe('array');
    expect(jsonType(extensions.side_iframes)).toBe('array');
    expect(jsonType(extensions.flags)).toBe('object');
    expect(jsonType(extensions.account_level_options)).toBe('object');
  });

  it('keeps the legacy shape: field names and JSON types are frozen (snapshot)', async () => {
    const { body } = await workbench(alice.client);
    const { chatting, extensions, ...rest } = body.data;
    // chatting is a dictionary (its keys are data); the elements of items and of the extension
    // members are merchant-defined ("not shown"): only their container type is the contract.
    const [entry] = Object.values<Record<string, unknown>>(chatting);
    const containers = Object.fromEntries(
      Object.entries<unknown>(extensions).map(([name, value]) => [name, Array.isArray(value) ? [] : {}]),
    );
    const contract = { ...rest, chatting: { 'visitor<uid>': { ...entry, items: [] } }, extensions: containers };
    expect(shapeOf({ ...body, data: contract })).toMatchInlineSnapshot(`
      {
        "code": "number",
        "data": {
          "agent": {
            "agent_id": "string",
            "avatar": "string",
            "level": "string",
            "nickname": "string",
            "state": "string",
          },
          "agent_groups": [
            {
              "id": "string",
              "is_default": "boolean",
              "name": "string",
            },
          ],
          "chatting": {
            "visitor<uid>": {
              "account_state": "string",
              "bot": "number",
              "history_only_mine": "boolean",
              "id": "string",
              "items": [],
              "name": "string",
              "pinned_at": "number",
              "timestamp": "number",
              "type": "string",
              "unread_count": "number",
            },
          },
          "extensions": {
            "account_level_options": {},
            "chat_actions": [],
            "flags": {},
            "nav": [],
            "side_iframes": [],
          },
          "setting": {
            "appkey": "string",
            "appname": "string",
            "bid": "string",
            "ws_address": "string",
          },
          "visitor_attribute_config": {
            "attributes": [
              {
                "editable": "boolean",
                "key": "string",
                "label": "string",
                "type": "string",
              },
            ],
          },
        },
        "msg": "string",
      }
    `);
  });

  it('the Session is found by cookie, `token` header or `token` query parameter alike', async () => {
    const byCookie = (await workbench(alice.client)).body;
    const anonymous = new HttpClient(t.url);
    const byHeader = (await workbench(anonymous, { headers: { token: alice.token } })).body;
    const byQuery = (await workbench(anonymous, {}, `/agent/data/get?token=${alice.token}`)).body;
    expect(byHeader.code).toBe(0);
    expect(byHeader.data).toEqual(byCookie.data);
    expect(byQuery.data).toEqual(byCookie.data);
  });
});

describe('Agent identity (login Session)', () => {
  it('without a Session the code is -1 with the Chinese please-log-in message', async () => {
    const { status, body } = await workbench(new HttpClient(t.url));
    expect(status).toBe(200);
    expect(body).toEqual({ code: -1, msg: LOGIN_REQUIRED_MSG, data: [] });
    const unknown = await workbench(new HttpClient(t.url), { headers: { token: 'no-such-session-id-0123456789' } });
    expect(unknown.body.code).toBe(-1);
  });

  it('a visitor token never opens an agent endpoint: not as a Bearer, a token header or a token query', async () => {
    const { token } = await visitorToken(t.url);
    const anonymous = new HttpClient(t.url);
    for (const response of [
      await workbench(anonymous, { headers: bearer(token) }),
      await workbench(anonymous, { headers: { token } }),
      await workbench(anonymous, {}, `/agent/data/get?token=${token}`),
    ]) {
      expect(response.body).toEqual({ code: -1, msg: LOGIN_REQUIRED_MSG, data: [] });
    }
    const gql = await anonymous.graphql('{ agentWorkbench { agent { agentId } } }', undefined, bearer(token));
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(gql.body.data).toBeNull();
  });

  it('a request presenting a visitor token is a visitor, even with an agent cookie riding along', async () => {
    const { token } = await visitorToken(t.url);
    const gql = await alice.client.graphql('{ agentWorkbench { agent { agentId } } }', undefined, bearer(token));
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(gql.headers.get('set-cookie')).toBeNull();
    // Nor can it log in or out: the agent Session riding along is left as it was.
    for (const mutation of [
      'mutation { login(username: "alice", password: "alice-password", captcha: "x") { token } }',
      'mutation { logout }',
    ]) {
      const refused = await alice.client.graphql(mutation, undefined, bearer(token));
      expect(refused.body.errors?.[0]).toMatchObject({
        message: expect.stringContaining('without a visitor Authorization header'),
        extensions: { code: 'BAD_USER_INPUT' },
      });
    }
    expect((await workbench(alice.client)).body.code).toBe(0);
  });

  it('a ticket_agent (tom) gets HTTP 403 (code 1403) on the workbench, FORBIDDEN in GraphQL', async () => {
    const tom = await agentSession(t.url, 'tom');
    const { status, body } = await workbench(tom.client);
    expect(status).toBe(403);
    expect(body).toEqual({ code: 1403, msg: expect.any(String), data: [] });
    const gql = await tom.client.graphql('{ agentWorkbench { agent { agentId } } }');
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(gql.body.data).toBeNull();
  });
});

describe('Agent workbench: tenant isolation', () => {
  it('an agent of acme (bob) sees nothing of demo', async () => {
    const bob = await agentSession(t.url, 'bob');
    const { body } = await workbench(bob.client);
    expect(body.code).toBe(0);
    expect(body.data.chatting).toEqual({});
    expect(body.data.agent).toMatchObject({ agent_id: 'a_bob', nickname: 'Bob' });
    expect(body.data.agent_groups).toEqual([{ id: 'g_acme_default', name: 'Default', is_default: true }]);
    expect(body.data.setting).toMatchObject({ bid: 'acme', appname: 'Acme Support', appkey: 'acme-appkey' });
    expect(body.data.visitor_attribute_config).toEqual({ attributes: [] });
    const text = JSON.stringify(body);
    for (const demo of ['m_demo', 'demo-appkey', 'Demo Shop', 'g_demo', 'v_demo', 'Lily', 'Member card', '"demo"']) {
      expect(text).not.toContain(demo);
    }
  });

  it('rows that point across merchants stay hidden: a demo conversation given to bob, an acme conversation with a demo visitor', async () => {
    const now = Math.floor(Date.now() / 1000);
    await db()
      .insert(visitors)
      .values({ id: 'v_cross', merchantId: 'm_demo', nickname: 'cross', channel: 'visitor-cross' });
    await db()
      .insert(conversations)
      .values([
        {
          id: 'c_cross_1',
          merchantId: 'm_demo',
          agentId: 'a_bob',
          visitorId: 'v_cross',
          timestamp: now,
          state: 'active',
        },
        {
          id: 'c_cross_2',
          merchantId: 'm_acme',
          agentId: 'a_bob',
          visitorId: 'v_demo_wang',
          timestamp: now,
          state: 'active',
        },
      ]);
    try {
      const bob = await agentSession(t.url, 'bob');
      expect((await workbench(bob.client)).body.data.chatting).toEqual({});
    } finally {
      await db()
        .delete(conversations)
        .where(inArray(conversations.id, ['c_cross_1', 'c_cross_2']));
      await db().delete(visitors).where(eq(visitors.id, 'v_cross'));
    }
  });
});

describe('Agent workbench in GraphQL (Query.agentWorkbench)', () => {
  const QUERY = `{
    agentWorkbench {
      chatting { key id name type timestamp pinnedAt unreadCount bot accountState historyOnlyMine items }
      agent { agentId nickname avatar level state }
      agentGroups { id name isDefault }
      setting { bid appname appkey wsAddress extra }
      visitorAttributeConfig { attributes { key label type editable } }
      extensions { nav chatActions sideIframes flags accountLevelOptions }
    }
  }`;

  it('REST and GraphQL give the same facts for the same agent', async () => {
    const rest = (await workbench(alice.client)).body.data;
    const gql = await alice.client.graphql(QUERY);
    expect(gql.body.errors).toBeUndefined();
    const w = gql.body.data.agentWorkbench;
    expect(
      Object.fromEntries(
        w.chatting.map((c: Record<string, unknown>) => [
          c.key,
          {
            id: c.id,
            name: c.name,
            type: c.type,
            timestamp: c.timestamp,
            pinned_at: c.pinnedAt,
            unread_count: c.unreadCount,
            bot: c.bot,
            account_state: c.accountState,
            history_only_mine: c.historyOnlyMine,
            items: c.items,
          },
        ]),
      ),
    ).toEqual(rest.chatting);
    expect(w.chatting.map((c: { key: string }) => c.key)).toEqual(Object.keys(rest.chatting));
    expect({
      agent_id: w.agent.agentId,
      nickname: w.agent.nickname,
      avatar: w.agent.avatar,
      level: w.agent.level,
      state: w.agent.state,
    }).toEqual(rest.agent);
    expect(
      w.agentGroups.map((g: Record<string, unknown>) => ({ id: g.id, name: g.name, is_default: g.isDefault })),
    ).toEqual(rest.agent_groups);
    expect({
      ...w.setting.extra,
      bid: w.setting.bid,
      appname: w.setting.appname,
      appkey: w.setting.appkey,
      ws_address: w.setting.wsAddress,
    }).toEqual(rest.setting);
    expect(w.visitorAttributeConfig).toEqual(rest.visitor_attribute_config);
    expect({
      nav: w.extensions.nav,
      chat_actions: w.extensions.chatActions,
      side_iframes: w.extensions.sideIframes,
      flags: w.extensions.flags,
      account_level_options: w.extensions.accountLevelOptions,
    }).toEqual(rest.extensions);
  });

  it('unauthenticated: extensions.code UNAUTHENTICATED, no data', async () => {
    const gql = await new HttpClient(t.url).graphql(QUERY);
    expect(gql.body.data).toBeNull();
    expect(gql.body.errors).toEqual([
      expect.objectContaining({ path: ['agentWorkbench'], extensions: { code: 'UNAUTHENTICATED' } }),
    ]);
  });
});
