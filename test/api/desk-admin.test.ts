import { setTimeout as sleep } from 'node:timers/promises';
import { and, desc, eq } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { agents, auditLog, merchants } from '../../src/db/schema.js';
import { restErrorTable } from '../../src/errors.js';
import { createAgent } from '../../src/resolvers/admin.js';
import { registerMerchant } from '../../src/resolvers/desk/registration.js';
import { endpoints } from '../../src/rest/endpoints.js';
import { HttpClient } from '../support/clients.js';
import { codeOf, testSession } from '../support/deps.js';
import { describeWhen, realServices } from '../support/required.js';
import { CAPTCHA, freshStores, startTestApp, type TestApp, type TestStores } from '../support/test-app.js';
import { closeAllSockets, connectSocket } from '../support/ws.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ env: { TRUST_PROXY: 'on', REGISTRATION: 'on' } });
  // A second merchant's admin, to show it sees nothing of demo.
  await createAgent(t.app.deps, {
    bid: 'acme',
    username: 'acme-admin',
    password: 'acme-admin-password',
    level: 'admin',
  });
});
afterAll(() => t?.stop());
afterEach(() => closeAllSockets());

let lastIp = 0;
/** A browser-like client from an address of its own (X-Forwarded-For, TRUST_PROXY on). */
function clientFrom(ip = `10.7.${Math.floor(++lastIp / 250)}.${(lastIp % 250) + 1}`) {
  const client = new HttpClient(t.url);
  const request = client.request.bind(client);
  client.request = (path, init = {}) => {
    const headers = new Headers(init.headers);
    if (!headers.has('x-forwarded-for')) headers.set('x-forwarded-for', ip);
    if (!headers.has('user-agent')) headers.set('user-agent', `desk-test/${ip}`);
    return request(path, { ...init, headers });
  };
  return Object.assign(client, { ip });
}

async function loggedIn(username: string, password = `${username}-password`) {
  const client = clientFrom();
  const { body } = await client.login(username, password);
  if (body.code !== 0) throw new Error(`login as ${username}: ${JSON.stringify(body)}`);
  return Object.assign(client, { token: body.data.token as string });
}

const unique = () => Math.random().toString(36).slice(2, 8);
const lastAudit = async (merchantId: string, action: string) =>
  (
    await t.app.deps.db
      .select()
      .from(auditLog)
      .where(and(eq(auditLog.merchantId, merchantId), eq(auditLog.action, action)))
      .orderBy(desc(auditLog.id))
      .limit(1)
  )[0];

const CREATE_AGENT = `mutation($input: CreateAgentInput!) { createAgent(input: $input) {
  id agentId nickname level account { username disabled capacity groupIds } } }`;

describe('Demo data — the demo admin', () => {
  it('ada / ada-password logs in to the demo merchant as level admin', async () => {
    const client = new HttpClient(t.url);
    const { body } = await client.login('ada');
    expect(body).toMatchObject({ code: 0, data: { redirect: '/agent/' } });
    const { body: me } = await client.graphql('{ currentAgent { id agentId nickname level avatar } }');
    expect(me).toEqual({
      data: {
        currentAgent: {
          id: 'a_ada',
          agentId: 'a_ada',
          nickname: 'Ada',
          level: 'admin',
          avatar: '/assets/avatar-ada.svg',
        },
      },
    });
  });
});

describe('Admin surface — agents', () => {
  it('an admin creates an agent (GraphQL), audited with the address; the agent logs in with its password', async () => {
    const ada = await loggedIn('ada');
    const username = `carol-${unique()}`;
    const { body } = await ada.graphql(CREATE_AGENT, {
      input: {
        username,
        nickname: 'Carol',
        password: 'carol-password',
        level: 'agent',
        capacity: 2,
        groupIds: ['g_demo_sales'],
      },
    });
    expect(body.errors).toBeUndefined();
    const created = body.data.createAgent;
    expect(created).toMatchObject({
      nickname: 'Carol',
      level: 'agent',
      account: { username, disabled: false, capacity: 2, groupIds: ['g_demo_sales'] },
    });
    expect(created.id).toBe(created.agentId);
    const [row] = await t.app.deps.db.select().from(agents).where(eq(agents.id, created.id));
    expect(row).toMatchObject({
      merchantId: 'm_demo',
      username,
      level: 'agent',
      maxConcurrentChats: 2,
      groupId: 'g_demo_sales',
    });
    const audit = await lastAudit('m_demo', 'agent.created');
    expect(audit).toMatchObject({
      actorKind: 'agent',
      actorId: 'a_ada',
      actorName: 'Ada',
      targetType: 'agent',
      targetId: created.id,
      before: null,
      after: { username, nickname: 'Carol', level: 'agent', disabled: false, capacity: 2, groupIds: ['g_demo_sales'] },
      clientAddress: ada.ip,
    });
    expect(JSON.stringify(audit)).not.toContain('carol-password');
    expect((await clientFrom().login(username, 'carol-password')).body.code).toBe(0);
  });

  it('REST twins: create, update (level, capacity, password), disable ends its Sessions and sockets (4401), enable', async () => {
    const ada = await loggedIn('ada');
    const username = `dan-${unique()}`;
    const { body: created } = await ada.json('/agent/admin/agent/create', {
      method: 'POST',
      json: { username, nickname: 'Dan', password: 'dan-password', group_ids: [] },
    });
    expect(created).toMatchObject({
      code: 0,
      data: { username, nickname: 'Dan', level: 'agent', capacity: null, group_ids: [] },
    });
    const id = created.data.agent_id as string;

    const { body: updated } = await ada.json('/agent/admin/agent/update', {
      method: 'POST',
      json: { agent_id: id, level: 'ticket_agent', capacity: 4 },
    });
    expect(updated.data).toMatchObject({ level: 'ticket_agent', capacity: 4 });
    expect(await lastAudit('m_demo', 'agent.updated')).toMatchObject({
      targetId: id,
      before: { level: 'agent', capacity: null },
      after: { level: 'ticket_agent', capacity: 4 },
    });

    const dan = await loggedIn(username, 'dan-password');
    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: dan.token });
    await socket.acked;
    const { body: disabled } = await ada.json('/agent/admin/agent/disable', { method: 'POST', form: { agent_id: id } });
    expect(disabled.data.disabled).toBe(true);
    expect((await socket.closed).code).toBe(4401);
    expect((await dan.json('/agent/session/list')).body.code).toBe(-1);
    expect((await clientFrom().login(username, 'dan-password')).body.code).toBe(1003);
    expect(await lastAudit('m_demo', 'agent.disabled')).toMatchObject({
      targetId: id,
      before: { disabled: false },
      after: { disabled: true },
    });

    const { body: enabled } = await ada.json('/agent/admin/agent/enable', { method: 'POST', json: { agent_id: id } });
    expect(enabled.data.disabled).toBe(false);
    await ada.json('/agent/admin/agent/update', {
      method: 'POST',
      json: { agent_id: id, password: 'dan-new-password' },
    });
    expect((await clientFrom().login(username, 'dan-password')).body.code).toBe(1002);
    expect((await clientFrom().login(username, 'dan-new-password')).body.code).toBe(0);
    expect((await lastAudit('m_demo', 'agent.updated'))?.after).toMatchObject({ passwordChanged: true });
  });

  it('the last enabled admin cannot be demoted or disabled (1012 / LAST_ADMIN)', async () => {
    // A merchant of its own with one admin: registration makes exactly that.
    const admin = await register();
    const { body } = await admin.client.json('/agent/admin/agent/update', {
      method: 'POST',
      json: { agent_id: admin.agentId, level: 'agent' },
    });
    expect(body.code).toBe(1012);
    const gql = await admin.client.graphql('mutation($id: ID!) { disableAgent(agentId: $id) { id } }', {
      id: admin.agentId,
    });
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('LAST_ADMIN');
    const [row] = await t.app.deps.db.select().from(agents).where(eq(agents.id, admin.agentId));
    expect(row).toMatchObject({ level: 'admin', disabled: false });
  });
});

describe('Admin surface — refusals', () => {
  it('a non-admin is refused every admin operation: 1403 / HTTP 403 (REST) and FORBIDDEN (GraphQL)', async () => {
    const alice = await loggedIn('alice');
    for (const [path, init] of [
      ['/agent/admin/agents', {}],
      ['/agent/admin/groups', {}],
      ['/agent/admin/settings', {}],
      ['/agent/admin/audit', {}],
      [
        '/agent/admin/agent/create',
        { method: 'POST', json: { username: `x-${unique()}`, nickname: 'X', password: 'x-password' } },
      ],
      ['/agent/admin/agent/disable', { method: 'POST', json: { agent_id: 'a_tom' } }],
      ['/agent/admin/group/create', { method: 'POST', json: { name: `G ${unique()}` } }],
      ['/agent/admin/settings/update', { method: 'POST', json: { switches: { voice: 'off' } } }],
      ['/agent/session/list', { method: 'GET' }],
    ] as const) {
      const path2 = path === '/agent/session/list' ? `${path}?agent_id=a_tom` : path;
      const { status, body } = await alice.json(path2, init as never);
      expect([path, status, body.code]).toEqual([path, 403, 1403]);
    }
    for (const query of [
      '{ agents { id } }',
      '{ agentGroupDetails { id } }',
      '{ merchantSettings { appname } }',
      '{ auditLog { entries { id } } }',
      '{ agentSessions(agentId: "a_tom") { id } }',
      'mutation { enableAgent(agentId: "a_dave") { id } }',
      'mutation { createAgentGroup(input: {name: "Nope"}) { id } }',
      'mutation { updateMerchantSettings(input: {historyOnlyMine: true}) { historyOnlyMine } }',
    ]) {
      const { body } = await alice.graphql(query);
      expect([query, body.errors?.[0]?.extensions?.code]).toEqual([query, 'FORBIDDEN']);
    }
    const [dave] = await t.app.deps.db.select().from(agents).where(eq(agents.id, 'a_dave'));
    expect(dave?.disabled).toBe(true);
  });

  it('every declared /agent/admin/* endpoint and admin GraphQL operation refuses an agent and a ticket agent, changing nothing', async () => {
    const adminRoutes = endpoints.filter((r) => r.path.startsWith('/agent/admin/'));
    expect(adminRoutes.length).toBeGreaterThanOrEqual(13);
    const auditRows = async () => (await t.app.deps.db.select({ id: auditLog.id }).from(auditLog)).length;
    const before = await auditRows();
    for (const who of ['alice', 'tom']) {
      const client = await loggedIn(who);
      for (const route of adminRoutes) {
        const example = (route.requestExample ?? {}) as Record<string, unknown>;
        const { status, body } =
          route.method === 'get'
            ? await client.json(`${route.path}?${new URLSearchParams(example as Record<string, string>)}`)
            : await client.json(route.path, { method: 'POST', json: example });
        expect([who, route.path, status, body.code]).toEqual([who, route.path, 403, 1403]);
      }
      for (const query of [
        '{ agents { id } }',
        '{ agentGroupDetails { id } }',
        '{ merchantSettings { appname } }',
        '{ auditLog(first: 5) { entries { id } } }',
        '{ agentSessions(agentId: "a_ada") { id } }',
        'mutation { createAgent(input: {username: "x-nope", nickname: "X", password: "x-password"}) { id } }',
        'mutation { updateAgent(input: {agentId: "a_alice", level: admin}) { id } }',
        'mutation { disableAgent(agentId: "a_ada") { id } }',
        'mutation { enableAgent(agentId: "a_dave") { id } }',
        'mutation { createAgentGroup(input: {name: "Nope"}) { id } }',
        'mutation { updateAgentGroup(input: {id: "g_demo_sales", name: "Nope"}) { id } }',
        'mutation { updateMerchantSettings(input: {voice: off}) { voice } }',
      ]) {
        const { body } = await client.graphql(query);
        expect([who, query, body.errors?.[0]?.extensions?.code]).toEqual([who, query, 'FORBIDDEN']);
      }
    }
    expect(await auditRows()).toBe(before);
    const [ada] = await t.app.deps.db.select().from(agents).where(eq(agents.id, 'a_ada'));
    expect(ada).toMatchObject({ level: 'admin', disabled: false });
  });

  it('another merchant’s admin sees nothing of demo and cannot touch it', async () => {
    const acme = await loggedIn('acme-admin', 'acme-admin-password');
    const { body: list } = await acme.json('/agent/admin/agents');
    expect(list.data.map((a: { username: string }) => a.username).sort()).toEqual(['acme-admin', 'bob']);
    const { body: groups } = await acme.graphql('{ agentGroupDetails { id } }');
    expect(groups.data.agentGroupDetails.map((g: { id: string }) => g.id)).toEqual(['g_acme_default']);
    const { body: audit } = await acme.graphql('{ auditLog(first: 100) { entries { targetId } } }');
    expect(audit.data.auditLog.entries.every((e: { targetId: string }) => !e.targetId.includes('demo'))).toBe(true);
    for (const [path, json] of [
      ['/agent/admin/agent/update', { agent_id: 'a_alice', nickname: 'Hacked' }],
      ['/agent/admin/agent/disable', { agent_id: 'a_alice' }],
      ['/agent/admin/group/update', { id: 'g_demo_sales', name: 'Hacked' }],
      ['/agent/admin/group/update', { id: 'g_acme_default', member_ids: ['a_alice'] }],
    ] as const) {
      const { body } = await acme.json(path, { method: 'POST', json });
      expect([path, body.code]).toEqual([path, 1404]);
    }
    const { body: sessions } = await acme.json('/agent/session/list?agent_id=a_alice');
    expect(sessions.code).toBe(1404);
    const [alice] = await t.app.deps.db.select().from(agents).where(eq(agents.id, 'a_alice'));
    expect(alice).toMatchObject({ nickname: 'Alice', disabled: false, groupId: 'g_demo_default' });
  });
});

describe('Admin surface — groups and settings', () => {
  it('creates and updates a group (rename, default, members) through GraphQL and REST, each audited', async () => {
    const admin = await register();
    const { body: made } = await admin.client.graphql(
      'mutation($input: CreateAgentGroupInput!) { createAgentGroup(input: $input) { id name isDefault memberIds } }',
      { input: { name: 'Returns', memberIds: [admin.agentId] } },
    );
    expect(made.data.createAgentGroup).toMatchObject({ name: 'Returns', isDefault: false, memberIds: [admin.agentId] });
    const id = made.data.createAgentGroup.id;
    const { body: updated } = await admin.client.json('/agent/admin/group/update', {
      method: 'POST',
      json: { id, name: 'Returns EU', is_default: true, member_ids: [] },
    });
    expect(updated.data).toMatchObject({ id, name: 'Returns EU', is_default: true, member_ids: [] });
    const { body: groups } = await admin.client.json('/agent/admin/groups');
    expect(groups.data.map((g: { name: string; is_default: boolean }) => [g.name, g.is_default])).toEqual([
      ['Returns EU', true],
      ['Default', false],
    ]);
    expect(await lastAudit(admin.merchantId, 'agent_group.updated')).toMatchObject({
      before: { name: 'Returns', isDefault: false, memberIds: [admin.agentId] },
      after: { name: 'Returns EU', isDefault: true, memberIds: [] },
    });
  });

  it('settings change (switch, upload limit, attributes, historyOnlyMine): audited before → after, the visitor bootstrap shows them', async () => {
    const admin = await register();
    const { body } = await admin.client.graphql(
      `mutation($input: MerchantSettingsInput!) { updateMerchantSettings(input: $input) {
        switches { voice uploadImg } uploadLimits { imageMaxBytes } attributes { key type editable } historyOnlyMine idleCloseMinutes } }`,
      {
        input: {
          switches: { voice: 'on', uploadImg: 'off' },
          uploadLimits: { imageMaxBytes: 1048576 },
          attributes: [{ key: 'plan', label: 'Plan', type: 'text', editable: true }],
          historyOnlyMine: true,
          idleCloseMinutes: 0,
        },
      },
    );
    expect(body.data.updateMerchantSettings).toEqual({
      switches: { voice: 'on', uploadImg: 'off' },
      uploadLimits: { imageMaxBytes: 1048576 },
      attributes: [{ key: 'plan', type: 'text', editable: true }],
      historyOnlyMine: true,
      idleCloseMinutes: 0,
    });
    const audit = await lastAudit(admin.merchantId, 'settings.updated');
    expect(audit?.before).toMatchObject({
      uploadLimits: { imageMaxBytes: 20971520 },
      historyOnlyMine: false,
      idleCloseMinutes: 30,
    });
    expect(audit?.after).toMatchObject({
      uploadLimits: { imageMaxBytes: 1048576 },
      historyOnlyMine: true,
      idleCloseMinutes: 0,
    });

    const { body: rest } = await admin.client.json('/agent/admin/settings/update', {
      method: 'POST',
      json: { switches: { upload_file: 'off' }, upload_limits: { file_max_bytes: 2048 } },
    });
    expect(rest.data).toMatchObject({
      switches: { voice: 'on', upload_img: 'off', upload_file: 'off' },
      upload_limits: { file_max_bytes: 2048 },
    });

    const visitor = await new HttpClient(t.url).json('/visitor/token', {
      method: 'POST',
      json: { appkey: admin.appkey },
    });
    const boot = await new HttpClient(t.url).json('/visitor/data/get', {
      headers: { authorization: `Bearer ${visitor.body.data.token}` },
    });
    expect(boot.body.data.setting).toMatchObject({
      voice: 'on',
      upload_img: 'off',
      upload_file: 'off',
      upload_limits: { image_max_bytes: 1048576, file_max_bytes: 2048 },
    });
    const [m] = await t.app.deps.db.select().from(merchants).where(eq(merchants.id, admin.merchantId));
    expect(m?.workbenchSettings.history_only_mine).toBe(true);
  });

  it('switches may be given flat, by their visitor bootstrap names (GraphQL and REST); both places must agree', async () => {
    const admin = await register();
    const { body } = await admin.client.graphql(
      `mutation { updateMerchantSettings(input: {voice: off, sessionInviteRating: on, uploadLimits: {videoMaxBytes: 4096}}) {
        voice sessionInviteRating switches { voice sessionInviteRating } uploadLimits { videoMaxBytes } } }`,
    );
    expect(body).toEqual({
      data: {
        updateMerchantSettings: {
          voice: 'off',
          sessionInviteRating: 'on',
          switches: { voice: 'off', sessionInviteRating: 'on' },
          uploadLimits: { videoMaxBytes: 4096 },
        },
      },
    });
    const { body: rest } = await admin.client.json('/agent/admin/settings/update', {
      method: 'POST',
      json: { upload_img: 'off', emoji: 'off' },
    });
    expect(rest.data).toMatchObject({
      voice: 'off',
      upload_img: 'off',
      emoji: 'off',
      switches: { voice: 'off', upload_img: 'off', emoji: 'off', session_invite_rating: 'on' },
    });
    const { body: visitor } = await new HttpClient(t.url).json('/visitor/token', {
      method: 'POST',
      json: { appkey: admin.appkey },
    });
    const boot = await new HttpClient(t.url).graphql(
      '{ visitorBootstrap { setting { voice uploadImg emoji sessionInviteRating uploadLimits { videoMaxBytes } } } }',
      {},
      { authorization: `Bearer ${visitor.data.token}` },
    );
    expect(boot.body.data.visitorBootstrap.setting).toEqual({
      voice: 'off',
      uploadImg: 'off',
      emoji: 'off',
      sessionInviteRating: 'on',
      uploadLimits: { videoMaxBytes: 4096 },
    });

    const clash = await admin.client.graphql(
      'mutation { updateMerchantSettings(input: {voice: on, switches: {voice: off}}) { voice } }',
    );
    expect(clash.body.errors?.[0]).toMatchObject({
      extensions: { code: 'BAD_USER_INPUT' },
      message: expect.stringContaining('voice'),
    });
    const { body: after } = await admin.client.json('/agent/admin/settings');
    expect(after.data.voice).toBe('off');
  });
});

describe('Sessions', () => {
  it('an agent lists its Sessions (device, address, created, last seen) and ends another one: its socket closes with 4401', async () => {
    const first = await loggedIn('alice');
    const second = await loggedIn('alice');
    const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token: first.token });
    await socket.acked;
    const { body } = await second.json('/agent/session/list');
    const mine = body.data as { id: string; device: string; address: string; current: boolean; created_at: string }[];
    const current = mine.find((s) => s.current);
    const other = mine.find((s) => s.address === first.ip);
    expect(current).toMatchObject({ address: second.ip, device: `desk-test/${second.ip}` });
    expect(other).toMatchObject({ current: false, device: `desk-test/${first.ip}` });
    expect(JSON.stringify(body)).not.toContain(first.token);
    expect(Date.parse(other?.created_at ?? '')).toBeGreaterThan(Date.now() - 60_000);

    const { body: gql } = await second.graphql('mutation($id: ID!) { endSession(id: $id) }', { id: other?.id });
    expect(gql).toEqual({ data: { endSession: true } });
    expect((await socket.closed).code).toBe(4401);
    expect((await first.json('/agent/data/get')).body.code).toBe(-1);
    const { body: after } = await second.graphql('{ mySessions { id current } }');
    expect(after.data.mySessions.map((s: { id: string }) => s.id)).not.toContain(other?.id);
    expect(await lastAudit('m_demo', 'session.ended')).toMatchObject({ actorId: 'a_alice', targetId: other?.id });
  });

  it('an admin lists and ends any agent’s Session of its merchant (REST)', async () => {
    const tom = await loggedIn('tom');
    const ada = await loggedIn('ada');
    const { body } = await ada.json('/agent/session/list?agent_id=a_tom');
    const session = (body.data as { id: string; address: string }[]).find((s) => s.address === tom.ip);
    expect(session).toBeDefined();
    const { body: ended } = await ada.json('/agent/session/end', { method: 'POST', form: { id: session?.id ?? '' } });
    expect(ended).toMatchObject({ code: 0, data: { ended: true } });
    expect((await tom.json('/agent/session/list')).body.code).toBe(-1);
    // An agent cannot end another agent's Session.
    const alice = await loggedIn('alice');
    const { body: list } = await ada.json('/agent/session/list');
    const adaSession = list.data[0].id;
    expect((await alice.json('/agent/session/end', { method: 'POST', json: { id: adaSession } })).body.code).toBe(1403);
  });
});

describe('Audit log — every admin operation, read through the API', () => {
  interface Entry {
    id: string;
    action: string;
    actor: { kind: string; id: string; name: string };
    targetType: string;
    targetId: string;
    before: Record<string, unknown> | null;
    after: Record<string, unknown> | null;
    clientAddress: string | null;
    createdAt: string;
  }
  const ENTRY = 'id action actor { kind id name } targetType targetId before after clientAddress createdAt';

  it('records who, what, when, from where and before → after; admins filter and page it; nothing edits it', async () => {
    const admin = await register();
    const gql = async (query: string, variables?: Record<string, unknown>) => {
      const { body } = await admin.client.graphql(query, variables);
      expect(body.errors).toBeUndefined();
      return body.data;
    };
    // Every privileged operation of the desk, through GraphQL and REST.
    const { createAgent: agent } = await gql(
      'mutation { createAgent(input: {username: "audit-agent-NAME", nickname: "Ann", password: "ann-password"}) { id } }'.replace(
        'NAME',
        unique(),
      ),
    );
    await admin.client.json('/agent/admin/agent/update', {
      method: 'POST',
      json: { agent_id: agent.id, level: 'ticket_agent', capacity: 3 },
    });
    await gql(`mutation { updateAgent(input: {agentId: "${agent.id}", password: "ann-new-password"}) { id } }`);
    await gql(`mutation { disableAgent(agentId: "${agent.id}") { id } }`);
    await admin.client.json('/agent/admin/agent/enable', { method: 'POST', json: { agent_id: agent.id } });
    const { createAgentGroup: group } = await gql('mutation { createAgentGroup(input: {name: "Audit"}) { id } }');
    await gql(
      `mutation { updateAgentGroup(input: {id: "${group.id}", name: "Audited", memberIds: ["${agent.id}"]}) { id } }`,
    );
    await gql('mutation { updateMerchantSettings(input: {voice: off, uploadLimits: {fileMaxBytes: 1024}}) { voice } }');
    await gql(
      'mutation { updateRoutingRules(rules: [{attribute: "plan", equals: "gold", priority: 5}]) { priority } }',
    );
    await gql('mutation { createCannedResponse(input: {shortcut: "hi", content: "Hello!", scope: merchant}) { id } }');
    const { createLabel: label } = await gql('mutation { createLabel(input: {name: "Doomed"}) { id } }');
    await gql(`mutation { deleteLabel(id: "${label.id}") { id } }`);
    const { createApiKey: key } = await gql(
      'mutation { createApiKey(name: "audit", scopes: ["conversations:read"]) { apiKey { id } } }',
    );
    await gql(`mutation { revokeApiKey(id: "${key.apiKey.id}") { id } }`);
    const ann = await loggedIn(
      (await t.app.deps.db.select().from(agents).where(eq(agents.id, agent.id)))[0]?.username ?? '',
      'ann-new-password',
    );
    const { body: sessions } = await admin.client.json(`/agent/session/list?agent_id=${agent.id}`);
    const annSession = (sessions.data as { id: string; address: string }[]).find((s) => s.address === ann.ip);
    await admin.client.json('/agent/session/end', { method: 'POST', json: { id: annSession?.id } });

    const { auditLog: page } = await gql(`{ auditLog(first: 100) { entries { ${ENTRY} } endCursor hasNextPage } }`);
    const entries = page.entries as Entry[];
    expect(page.hasNextPage).toBe(false);
    const byAction = (action: string, targetId?: string) =>
      entries.filter((e) => e.action === action && (targetId === undefined || e.targetId === targetId));
    // Every row: the admin, from its address, at a time; newest first.
    for (const e of entries) {
      expect(e.actor).toEqual({ kind: 'agent', id: admin.agentId, name: 'Founder' });
      expect(e.clientAddress).toBe(admin.client.ip);
      expect(Date.parse(e.createdAt)).toBeGreaterThan(Date.now() - 10 * 60_000);
    }
    const times = entries.map((e) => Date.parse(e.createdAt));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(entries.map((e) => e.action).sort()).toEqual(
      [
        'merchant.registered',
        'agent.created',
        'agent.updated',
        'agent.updated',
        'agent.disabled',
        'agent.enabled',
        'agent_group.created',
        'agent_group.updated',
        'settings.updated',
        'routing_rules.updated',
        'canned_response.created',
        'label.deleted',
        'api_key.created',
        'api_key.revoked',
        'session.ended',
      ].sort(),
    );
    // before → after, of the thing acted on.
    expect(byAction('agent.created', agent.id)[0]).toMatchObject({
      before: null,
      after: { nickname: 'Ann', level: 'agent' },
    });
    const [password, levels] = byAction('agent.updated', agent.id);
    expect(levels).toMatchObject({
      before: { level: 'agent', capacity: null },
      after: { level: 'ticket_agent', capacity: 3 },
    });
    expect(password?.after).toMatchObject({ passwordChanged: true });
    expect(JSON.stringify(entries)).not.toContain('ann-new-password');
    expect(byAction('agent.disabled')[0]).toMatchObject({ before: { disabled: false }, after: { disabled: true } });
    expect(byAction('agent.enabled')[0]).toMatchObject({ before: { disabled: true }, after: { disabled: false } });
    expect(byAction('agent_group.created', group.id)[0]).toMatchObject({ before: null, after: { name: 'Audit' } });
    expect(byAction('agent_group.updated', group.id)[0]).toMatchObject({
      before: { name: 'Audit', memberIds: [] },
      after: { name: 'Audited', memberIds: [agent.id] },
    });
    expect(byAction('settings.updated')[0]).toMatchObject({
      targetType: 'merchant',
      targetId: admin.merchantId,
      before: { switches: { voice: 'unset' }, uploadLimits: { fileMaxBytes: 20971520 } },
      after: { switches: { voice: 'off' }, uploadLimits: { fileMaxBytes: 1024 } },
    });
    expect(byAction('routing_rules.updated')[0]?.after).toBeTruthy();
    expect(byAction('label.deleted', label.id)[0]).toMatchObject({ before: { name: 'Doomed' }, after: null });
    expect(byAction('session.ended')[0]).toMatchObject({
      targetType: 'session',
      targetId: annSession?.id,
      before: { agentId: agent.id, address: ann.ip, device: `desk-test/${ann.ip}` },
      after: null,
    });

    // Filters: action, actor, target — GraphQL and REST.
    const filtered = await gql(
      `{ auditLog(first: 10, action: "agent.updated", targetType: "agent", targetId: "${agent.id}") { entries { action targetId } } }`,
    );
    expect(filtered.auditLog.entries).toEqual([
      { action: 'agent.updated', targetId: agent.id },
      { action: 'agent.updated', targetId: agent.id },
    ]);
    const { body: rest } = await admin.client.json(
      `/agent/admin/audit?action=agent_group.updated&actor_id=${admin.agentId}&target_type=agent_group`,
    );
    expect(rest.data.entries.map((e: { target_id: string; before: unknown }) => [e.target_id, e.before])).toEqual([
      [group.id, expect.objectContaining({ name: 'Audit' })],
    ]);

    // Pages of 4 with `after` go through every row once, in the same order.
    const paged: string[] = [];
    let after: string | null = null;
    do {
      const { auditLog: p } = await gql(
        'query($after: String) { auditLog(first: 4, after: $after) { entries { id } endCursor hasNextPage } }',
        { after },
      );
      paged.push(...p.entries.map((e: { id: string }) => e.id));
      after = p.hasNextPage ? p.endCursor : null;
    } while (after);
    expect(paged).toEqual(entries.map((e) => e.id));

    // Read-only: no operation of the API writes, edits or deletes it.
    const { body: schema } = await admin.client.graphql('{ __schema { mutationType { fields { name } } } }');
    const mutations = (schema.data.__schema.mutationType.fields as { name: string }[]).map((f) => f.name);
    expect(mutations.filter((name) => /audit/i.test(name))).toEqual([]);
    expect(endpoints.filter((r) => r.path.includes('audit')).map((r) => r.method)).toEqual(['get']);
  });
});

describe('Registration — POST /agent/login/register, registerMerchant', () => {
  it('creates the merchant, its Default group and the admin in one go, logs it in (new Session), audited', async () => {
    const admin = await register();
    expect(admin.body).toMatchObject({
      code: 0,
      data: { redirect: '/agent/admin', bid: expect.any(String), appkey: expect.any(String) },
    });
    expect(admin.body.data.token).not.toBe(admin.preLoginSession);
    const { body: me } = await admin.client.graphql('{ currentAgent { level nickname } }');
    expect(me.data.currentAgent).toEqual({ level: 'admin', nickname: 'Founder' });
    const { body: workbench } = await admin.client.json('/agent/data/get');
    expect(workbench.data.setting).toMatchObject({
      bid: admin.body.data.bid,
      appkey: admin.body.data.appkey,
      appname: admin.name,
    });
    expect(workbench.data.agent_groups).toEqual([{ id: expect.any(String), name: 'Default', is_default: true }]);
    expect(await lastAudit(admin.merchantId, 'merchant.registered')).toMatchObject({
      actorId: admin.agentId,
      clientAddress: admin.client.ip,
    });
  });

  it('a taken username leaves nothing behind; a wrong captcha is refused (1001)', async () => {
    const before = await t.app.deps.db.select({ id: merchants.id }).from(merchants);
    const taken = await register({ username: 'alice' });
    expect(taken.body).toMatchObject({ code: 1000, msg: expect.stringContaining('username') });
    const wrong = await register({ captcha: 'wrong' });
    expect(wrong.body.code).toBe(1001);
    expect((await t.app.deps.db.select({ id: merchants.id }).from(merchants)).length).toBe(before.length);
  });

  it('GraphQL registerMerchant with a wanted bid; a taken bid is refused', async () => {
    const client = clientFrom();
    await client.captcha('join');
    const bid = `shop-${unique()}`;
    const input = {
      merchantName: 'GQL Shop',
      username: `gql-${unique()}`,
      nickname: 'G',
      password: 'gql-password',
      captcha: CAPTCHA,
      bid,
    };
    const { body } = await client.graphql(
      'mutation($input: RegisterMerchantInput!) { registerMerchant(input: $input) { bid appkey redirect } }',
      { input },
    );
    expect(body.data.registerMerchant).toMatchObject({ bid, redirect: '/agent/admin' });
    const again = clientFrom();
    await again.captcha('join');
    const { body: taken } = await again.graphql(
      'mutation($input: RegisterMerchantInput!) { registerMerchant(input: $input) { bid } }',
      { input: { ...input, username: `gql-${unique()}` } },
    );
    expect(taken.errors?.[0]).toMatchObject({
      extensions: { code: 'BAD_USER_INPUT' },
      message: expect.stringContaining('bid'),
    });
  });
});

/** Registers a merchant through the join page's endpoints (SMS registration off: the join captcha). */
async function register(over: Record<string, string> = {}) {
  const client = clientFrom();
  await client.captcha('join');
  const preLoginSession = t.app.sessions.sessionIdOf({
    headers: { cookie: [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ') },
    url: '/',
  } as never);
  const name = `Shop ${unique()}`;
  const { body } = await client.json('/agent/login/register', {
    method: 'POST',
    form: {
      merchant_name: name,
      username: `founder-${unique()}`,
      nickname: 'Founder',
      password: 'founder-password',
      captcha: CAPTCHA,
      ...over,
    },
  });
  const [m] =
    body.code === 0 ? await t.app.deps.db.select().from(merchants).where(eq(merchants.bid, body.data.bid)) : [];
  const [a] = m ? await t.app.deps.db.select().from(agents).where(eq(agents.merchantId, m.id)) : [];
  return {
    client,
    body,
    name,
    preLoginSession,
    merchantId: m?.id ?? '',
    agentId: a?.id ?? '',
    appkey: m?.appkey ?? '',
  };
}

describe('Registration with SMS_REGISTRATION=on: one merchant per mobile number', () => {
  let s: TestApp;
  const codes = new Map<string, string>();
  beforeAll(async () => {
    s = await startTestApp({ env: { REGISTRATION: 'on', SMS_REGISTRATION: 'on' } });
    s.app.deps.sms = async (message) => {
      codes.set(message.mobile, message.code); // the SMS driver, captured
    };
  });
  afterAll(() => s?.stop());

  async function applyWith(mobile: string) {
    const client = new HttpClient(s.url);
    await client.captcha('join');
    const sent = await client.json('/agent/login/smscaptcha', { method: 'POST', form: { mobile, captcha: CAPTCHA } });
    expect(sent.body.code).toBe(0);
    return client.json('/agent/login/register', {
      method: 'POST',
      form: {
        merchant_name: 'SMS Shop',
        username: `sms-${unique()}`,
        nickname: 'S',
        password: 'sms-password',
        mobile,
        code: codes.get(mobile) ?? '',
      },
    });
  }

  it('registers with the SMS code; a second registration with the same number gets 1011 and makes nothing', async () => {
    const mobile = '13912345678';
    const first = await applyWith(mobile);
    expect(first.body.code).toBe(0);
    const [m] = await s.app.deps.db.select().from(merchants).where(eq(merchants.bid, first.body.data.bid));
    expect(m?.registeredMobile).toBe(mobile);
    const count = (await s.app.deps.db.select({ id: merchants.id }).from(merchants)).length;
    // The same number verified again in another Session (the SMS send limit allows one code a minute, so the
    // second Session holds the verified number as POST /agent/login/smsverify leaves it).
    const second = registerMerchant(
      s.app.deps,
      testSession({ createdAt: Date.now(), smsVerifiedMobile: mobile }),
      {
        merchantName: 'Again',
        username: `sms-${unique()}`,
        nickname: 'S',
        password: 'sms-password',
        mobile,
        code: '000000',
      },
      '10.9.9.9',
    );
    expect(await codeOf(second)).toBe('MOBILE_ALREADY_REGISTERED');
    expect(restErrorTable.MOBILE_ALREADY_REGISTERED.code).toBe(1011);
    expect((await s.app.deps.db.select({ id: merchants.id }).from(merchants)).length).toBe(count);
  });

  it('a wrong SMS code is refused (1006); without the number, 1000', async () => {
    const client = new HttpClient(s.url);
    await client.captcha('join');
    await client.json('/agent/login/smscaptcha', { method: 'POST', form: { mobile: '13912340000', captcha: CAPTCHA } });
    const form = { merchant_name: 'X', username: `x-${unique()}`, nickname: 'X', password: 'x-password-1' };
    const wrong = await client.json('/agent/login/register', {
      method: 'POST',
      form: { ...form, mobile: '13912340000', code: codes.get('13912340000') === '000000' ? '111111' : '000000' },
    });
    expect(wrong.body.code).toBe(1006);
    expect((await client.json('/agent/login/register', { method: 'POST', form })).body.code).toBe(1000);
  });

  it('REGISTRATION=off (the default) refuses with 1010', async () => {
    const client = new HttpClient(s.url);
    s.app.deps.config.registration = false;
    try {
      const { body } = await client.json('/agent/login/register', {
        method: 'POST',
        form: { merchant_name: 'Off', username: 'off', nickname: 'Off', password: 'off-password' },
      });
      expect(body.code).toBe(1010);
    } finally {
      s.app.deps.config.registration = true;
    }
  });
});

/** Polls `probe` until it holds or the deadline passes (the design says milliseconds; the deadline is for a busy machine). */
async function eventually(probe: () => Promise<boolean>, deadlineMs = 5_000): Promise<boolean> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
}

describeWhen(
  realServices.postgres && realServices.redis,
  'REQUIRE_SERVICES',
  'Admin changes take effect on every instance (two instances sharing PostgreSQL and Redis)',
  'DATABASE_URL and REDIS_URL are not both set',
  () => {
    let stores: TestStores;
    let a: TestApp;
    let b: TestApp;
    beforeAll(async () => {
      stores = await freshStores();
      [a, b] = await Promise.all([startTestApp({ stores }), startTestApp({ stores })]);
    });
    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await stores?.drop();
    });

    const logIn = async (base: string, username: string, password = `${username}-password`) => {
      const client = new HttpClient(base);
      const { body } = await client.login(username, password);
      expect(body.code).toBe(0);
      return Object.assign(client, { token: body.data.token as string });
    };

    it('settings and groups changed on one instance are served by the other’s bootstraps', async () => {
      const ada = await logIn(a.url, 'ada');
      const aliceOnB = await logIn(b.url, 'alice');
      const visitor = await new HttpClient(b.url).json('/visitor/token', {
        method: 'POST',
        json: { appkey: 'demo-appkey' },
      });
      const bootOnB = async () =>
        (
          await new HttpClient(b.url).json('/visitor/data/get', {
            headers: { authorization: `Bearer ${visitor.body.data.token}` },
          })
        ).body.data.setting;
      // B has the current values cached.
      expect(await bootOnB()).toMatchObject({ voice: 'on', upload_limits: { image_max_bytes: 20971520 } });
      expect((await aliceOnB.json('/agent/data/get')).body.data.agent_groups).toHaveLength(2);

      const { body } = await ada.graphql(
        'mutation { updateMerchantSettings(input: {voice: off, uploadLimits: {imageMaxBytes: 65536}}) { voice } }',
      );
      expect(body.data.updateMerchantSettings.voice).toBe('off');
      expect(
        await eventually(async () => {
          const s = await bootOnB();
          return s.voice === 'off' && s.upload_limits.image_max_bytes === 65536;
        }),
      ).toBe(true);

      const { body: group } = await ada.graphql('mutation { createAgentGroup(input: {name: "Night shift"}) { id } }');
      const groupNames = async () =>
        (await aliceOnB.json('/agent/data/get')).body.data.agent_groups.map((g: { name: string }) => g.name);
      expect(await eventually(async () => (await groupNames()).includes('Night shift'))).toBe(true);
      await ada.graphql(
        `mutation { updateAgentGroup(input: {id: "${group.data.createAgentGroup.id}", name: "Nights"}) { id } }`,
      );
      expect(await eventually(async () => (await groupNames()).includes('Nights'))).toBe(true);
    });

    it('an agent created on one instance logs in on the other; disabling it or ending its Session closes its sockets there (4401)', async () => {
      const ada = await logIn(a.url, 'ada');
      const username = `twin-${unique()}`;
      const { body } = await ada.json('/agent/admin/agent/create', {
        method: 'POST',
        json: { username, nickname: 'Twin', password: 'twin-password' },
      });
      const agentId = body.data.agent_id as string;

      // Ending one Session on A closes its socket on B.
      const first = await logIn(b.url, username, 'twin-password');
      const firstSocket = connectSocket(b.wsUrl, { appkey: 'demo-appkey', token: first.token });
      await firstSocket.acked;
      const { body: list } = await ada.json(`/agent/session/list?agent_id=${agentId}`);
      expect(list.data).toHaveLength(1);
      await ada.json('/agent/session/end', { method: 'POST', json: { id: list.data[0].id } });
      expect((await firstSocket.closed).code).toBe(4401);
      expect((await first.json('/agent/data/get')).body.code).toBe(-1);

      // Disabling the agent on A closes its socket on B and its Session everywhere.
      const second = await logIn(b.url, username, 'twin-password');
      const secondSocket = connectSocket(b.wsUrl, { appkey: 'demo-appkey', token: second.token });
      await secondSocket.acked;
      await ada.graphql(`mutation { disableAgent(agentId: "${agentId}") { id } }`);
      expect((await secondSocket.closed).code).toBe(4401);
      expect((await new HttpClient(b.url).login(username, 'twin-password')).body.code).toBe(1003);
    });
  },
);
