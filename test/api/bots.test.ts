import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { factories } from '../support/deps.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Bots through the gateway (docs/integration.md "Bots"): an admin creates a bot and its key, the
 * bot takes the demo merchant's new conversations, sends by REST and GraphQL on the exactly-once
 * path, hands off; after the hand-off its messages are refused (1206 / HANDED_OFF); the visitor
 * can ask for a human.
 */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t?.stop();
});

const CREATE_BOT = `mutation($name: String!) { createBot(name: $name) { bot { id name groupId disabled } key } }`;
const SEND = `mutation($visitorId: ID!, $clientMsgId: String!, $content: String!) {
  botSendMessage(visitorId: $visitorId, clientMsgId: $clientMsgId, content: $content) {
    duplicate message { seq senderType senderId content meta }
  }
}`;

async function newVisitor() {
  const { token, uid } = await visitorToken(t.url);
  const http = new HttpClient(t.url);
  const headers = { authorization: `Bearer ${token}` };
  return { uid, headers, http };
}

describe('Bots — REST and GraphQL', () => {
  let key = '';
  let botId = '';
  const bot = () => ({ authorization: `Bearer ${key}` });

  it('ada creates a bot by REST (key shown once, listed), alice may not', async () => {
    const ada = await agentSession(t.url, 'ada');
    const created = await ada.client.json('/agent/bot/create', { method: 'POST', form: { name: 'Robo' } });
    expect(created.body).toMatchObject({ code: 0, data: { bot: { name: 'Robo', group_id: null, disabled: false } } });
    key = created.body.data.key;
    botId = created.body.data.bot.id;
    expect(key).toMatch(/^prly_/);
    const listed = await ada.client.json('/agent/bot/list');
    expect(listed.body.data).toEqual([created.body.data.bot]);
    expect(JSON.stringify(listed.body)).not.toContain(key.slice(5));
    const alice = await agentSession(t.url, 'alice');
    const refused = await alice.client.graphql(CREATE_BOT, { name: 'x' });
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(t.rawLogs()).not.toContain(key.slice(5));
  });

  it('the bot takes a new conversation, sends once per client_msg_id, and the visitor sees a bot sender', async () => {
    const v = await newVisitor();
    const assigned = await v.http.json('/visitor/chat/assign', { method: 'POST', form: {}, headers: v.headers });
    expect(assigned.body.data).toMatchObject({ state: 'active', agent: null });
    const form = { visitor_id: v.uid, client_msg_id: 'b-1', type: 'text', content: 'Hi, I am Robo' };
    const first = await new HttpClient(t.url).json('/bot/message/send', { method: 'POST', form, headers: bot() });
    expect(first.body).toMatchObject({
      code: 0,
      data: { sender_type: 'bot', sender_id: botId, seq: 2, duplicate: false, meta: { bot_name: 'Robo' } },
    });
    const again = await new HttpClient(t.url).json('/bot/message/send', { method: 'POST', json: form, headers: bot() });
    expect(again.body.data).toMatchObject({ id: first.body.data.id, seq: 2, duplicate: true });
    const gql = await new HttpClient(t.url).graphql(
      SEND,
      { visitorId: v.uid, clientMsgId: 'b-2', content: 'Anything else?' },
      bot(),
    );
    expect(gql.body.data?.botSendMessage).toMatchObject({
      duplicate: false,
      message: { seq: 3, senderType: 'bot', senderId: botId, meta: { bot_name: 'Robo' } },
    });
    const history = await v.http.json('/visitor/message/list', { headers: v.headers });
    expect(history.body.data.messages.map((m: { sender_type: string }) => m.sender_type)).toEqual([
      'system',
      'bot',
      'bot',
    ]);
  });

  it('hand-off: one transition, then the bot is refused (1206 / HANDED_OFF)', async () => {
    const v = await newVisitor();
    await v.http.json('/visitor/chat/assign', { method: 'POST', form: {}, headers: v.headers });
    const calls = await Promise.all(
      Array.from({ length: 5 }, () =>
        new HttpClient(t.url).json('/bot/chat/handoff', {
          method: 'POST',
          form: { visitor_id: v.uid },
          headers: bot(),
        }),
      ),
    );
    expect(calls.map((c) => c.body.code)).toEqual([0, 0, 0, 0, 0]);
    expect(calls.filter((c) => c.body.data.handed_off)).toHaveLength(1);
    const refused = await new HttpClient(t.url).json('/bot/message/send', {
      method: 'POST',
      form: { visitor_id: v.uid, client_msg_id: 'late', content: 'still here' },
      headers: bot(),
    });
    expect([refused.status, refused.body.code]).toEqual([200, 1206]);
    const gql = await new HttpClient(t.url).graphql(
      SEND,
      { visitorId: v.uid, clientMsgId: 'late2', content: 'x' },
      bot(),
    );
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('HANDED_OFF');
    const handoff = await new HttpClient(t.url).graphql(
      'mutation($v: ID!) { botHandoff(visitorId: $v) { handedOff state } }',
      { v: v.uid },
      bot(),
    );
    expect(handoff.body.data?.botHandoff).toMatchObject({ handedOff: false, state: 'queued' });
  });

  it('the visitor asks for a human (REST and GraphQL)', async () => {
    const v = await newVisitor();
    await v.http.json('/visitor/chat/assign', { method: 'POST', form: {}, headers: v.headers });
    const asked = await v.http.json('/visitor/chat/human', { method: 'POST', form: {}, headers: v.headers });
    expect(asked.body).toMatchObject({ code: 0, data: { handed_off: true, state: 'queued' } });
    const again = await v.http.graphql('mutation { requestHuman { handedOff } }', {}, v.headers);
    expect(again.body.data?.requestHuman).toEqual({ handedOff: false });
    const history = await v.http.json('/visitor/message/list', { headers: v.headers });
    expect(history.body.data.messages.at(-1)).toMatchObject({
      sender_type: 'system',
      meta: { event: 'handoff', reason: 'visitor', bot_id: botId },
    });
  });

  it('a key without messages:write (1412), or of no bot (1403), cannot act as a bot', async () => {
    const ada = await agentSession(t.url, 'ada');
    const make = async (scopes: string) =>
      (await ada.client.json('/agent/apikey/create', { method: 'POST', form: { name: 'srv', scopes } })).body.data
        .key as string;
    const readOnly = await make('conversations:read');
    const noBot = await make('messages:write');
    const form = { visitor_id: 'v_nobody', client_msg_id: 'x', content: 'x' };
    const a = await new HttpClient(t.url).json('/bot/message/send', {
      method: 'POST',
      form,
      headers: { authorization: `Bearer ${readOnly}` },
    });
    expect([a.status, a.body.code]).toEqual([403, 1412]);
    const b = await new HttpClient(t.url).json('/bot/chat/handoff', {
      method: 'POST',
      form: { visitor_id: 'v_nobody' },
      headers: { authorization: `Bearer ${noBot}` },
    });
    expect([b.status, b.body.code]).toEqual([403, 1403]);
    // A visitor token is no key.
    const v = await newVisitor();
    const c = await new HttpClient(t.url).json('/bot/message/send', { method: 'POST', form, headers: v.headers });
    expect(c.body.code).toBe(1411);
  });

  it('disabling the bot (admin) stops it: new conversations go to the queue, its key is refused', async () => {
    const ada = await agentSession(t.url, 'ada');
    const disabled = await ada.client.json('/agent/bot/disable', { method: 'POST', form: { bot_id: botId } });
    expect(disabled.body.data).toMatchObject({ id: botId, disabled: true });
    const v = await newVisitor();
    const assigned = await v.http.json('/visitor/chat/assign', { method: 'POST', form: {}, headers: v.headers });
    expect(assigned.body.data.state).not.toBe('active');
    const refused = await new HttpClient(t.url).json('/bot/message/send', {
      method: 'POST',
      form: { visitor_id: v.uid, client_msg_id: 'x', content: 'x' },
      headers: bot(),
    });
    expect([refused.status, refused.body.code]).toEqual([403, 1403]);
  });

  it('disabling a disabled bot again, by REST or GraphQL, answers it unchanged and audits nothing', async () => {
    const ada = await agentSession(t.url, 'ada');
    const [listed] = (await ada.client.json('/agent/bot/list')).body.data;
    expect(listed).toMatchObject({ id: botId, disabled: true });
    const again = await ada.client.json('/agent/bot/disable', { method: 'POST', form: { bot_id: botId } });
    expect(again.body).toEqual({ code: 0, msg: expect.any(String), data: listed });
    const SET = `mutation($id: ID!) { setBotDisabled(botId: $id, disabled: true) { id name groupId disabled } }`;
    const viaGraphql = await ada.client.graphql(SET, { id: botId });
    expect(viaGraphql.body.data.setBotDisabled).toEqual({ id: botId, name: 'Robo', groupId: null, disabled: true });
    // Newest first.
    const audit = await ada.client.json(`/agent/admin/audit?target_type=bot&target_id=${botId}`);
    expect(audit.body.data.entries.map((e: { action: string }) => e.action)).toEqual(['bot.disabled', 'bot.created']);
  });

  it('a bot needs a free API key: with the merchant’s 50 live keys taken, createBot is refused 409 (1409) and LIMIT_REACHED', async () => {
    const ada = await agentSession(t.url, 'ada');
    const live = (await ada.client.json('/agent/apikey/list')).body.data.filter(
      (k: { revoked_at: number | null }) => k.revoked_at === null,
    ).length;
    const taken: string[] = [];
    for (let i = live; i < 50; i++) {
      const created = await ada.client.json('/agent/apikey/create', {
        method: 'POST',
        json: { name: `filler ${i}`, scopes: ['conversations:read'] },
      });
      taken.push(created.body.data.api_key.id);
    }
    const message = 'A merchant has at most 50 API keys: revoke one first';
    const viaRest = await ada.client.json('/agent/bot/create', { method: 'POST', form: { name: 'Robo 2' } });
    expect([viaRest.status, viaRest.body]).toEqual([409, { code: 1409, msg: message, data: [] }]);
    const viaGraphql = await ada.client.graphql(CREATE_BOT, { name: 'Robo 2' });
    expect([
      viaGraphql.body.data,
      viaGraphql.body.errors?.[0]?.extensions?.code,
      viaGraphql.body.errors?.[0]?.message,
    ]).toEqual([null, 'LIMIT_REACHED', message]);
    expect((await ada.client.json('/agent/bot/list')).body.data).toHaveLength(1);
    for (const id of taken) await ada.client.json('/agent/apikey/revoke', { method: 'POST', form: { id } });
  });
});

describe('Hand-off by another bot of the merchant (REST)', () => {
  it('the bot that handed it off is answered handed_off false again; another bot of the merchant gets 1206', async () => {
    // A merchant of its own: the demo's bot above is disabled by now, and its bot list is checked whole.
    const f = factories(t.app.deps);
    const m = await f.merchant();
    const admin = await f.agent(m, { level: 'admin' });
    const session = new HttpClient(t.url);
    expect((await session.login(admin.agent.username, 'test-password-1')).body.code).toBe(0);
    const keyOf = async (name: string) =>
      (await session.json('/agent/bot/create', { method: 'POST', form: { name } })).body.data.key as string;
    const first = await keyOf('First'); // the oldest bot: it takes the new conversation
    const second = await keyOf('Second');
    const { token, uid } = await visitorToken(t.url, m.appkey);
    const assigned = await new HttpClient(t.url).json('/visitor/chat/assign', {
      method: 'POST',
      form: {},
      headers: { authorization: `Bearer ${token}` },
    });
    expect(assigned.body.data).toMatchObject({ state: 'active', agent: null });
    const handoff = (key: string) =>
      new HttpClient(t.url).json('/bot/chat/handoff', {
        method: 'POST',
        form: { visitor_id: uid },
        headers: { authorization: `Bearer ${key}` },
      });
    const done = await handoff(first);
    expect([done.status, done.body]).toEqual([
      200,
      { code: 0, msg: expect.any(String), data: expect.objectContaining({ handed_off: true, state: 'queued' }) },
    ]);
    const again = await handoff(first);
    expect([again.status, again.body]).toEqual([
      200,
      { code: 0, msg: expect.any(String), data: expect.objectContaining({ handed_off: false, state: 'queued' }) },
    ]);
    const other = await handoff(second);
    expect([other.status, other.body]).toEqual([
      200,
      { code: 1206, msg: 'This conversation is not held by this bot', data: [] },
    ]);
  });
});
