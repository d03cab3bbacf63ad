import { type ChildProcess, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { eventually } from '../support/deps.js';
import { freePort } from '../support/private-services.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The example bot (examples/bot/server.mjs) against the real gateway, as CI runs it: an admin
 * creates the bot and a webhook endpoint pointing at it; the bot, a separate Node process,
 * verifies every delivery with `standardwebhooks`, greets, answers through /bot/message/send and
 * hands off when the visitor writes "human".
 */

let t: TestApp;
let bot: ChildProcess | undefined;
let output = '';
beforeAll(async () => {
  t = await startTestApp({ env: { WEBHOOK_ALLOW_PRIVATE: 'on', WEBHOOK_RETRY_SCHEDULE: '0.2,0.5,1,2' } });
});
afterAll(async () => {
  bot?.kill('SIGTERM');
  await t?.stop();
});

describe('The example bot', () => {
  it('greets, answers, and hands off on "human"', async () => {
    const ada = await agentSession(t.url, 'ada');
    const created = (await ada.client.json('/agent/bot/create', { method: 'POST', form: { name: 'Robo' } })).body.data;
    const port = await freePort();
    const endpoint = await ada.client.json('/agent/webhook/create', {
      method: 'POST',
      json: {
        url: `http://127.0.0.1:${port}/webhooks`,
        events: ['conversation.created', 'message.created', 'conversation.handed_off'],
        description: 'example bot',
      },
    });
    expect(endpoint.body.code).toBe(0);
    bot = spawn(process.execPath, ['examples/bot/server.mjs'], {
      env: {
        ...process.env,
        PARLEY_URL: t.url,
        PARLEY_BOT_KEY: created.key,
        PARLEY_BOT_ID: created.bot.id,
        WEBHOOK_SECRET: endpoint.body.data.secret,
        PORT: String(port),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    bot.stdout?.on('data', (d) => (output += d));
    bot.stderr?.on('data', (d) => (output += d));
    await eventually(() => output.includes('listening'), 'the example bot listening');

    const { token, uid } = await visitorToken(t.url);
    const headers = { authorization: `Bearer ${token}` };
    const visitor = new HttpClient(t.url);
    const history = async () =>
      (await visitor.json('/visitor/message/list', { headers })).body.data.messages as {
        sender_type: string;
        content: string;
        meta: Record<string, unknown> | null;
      }[];
    await visitor.json('/visitor/message/send', {
      method: 'POST',
      form: { client_msg_id: 'v1', content: 'hello' },
      headers,
    });
    await eventually(
      async () => (await history()).some((m) => m.sender_type === 'bot' && m.content.includes('You said “hello”')),
      'the bot’s answer',
      30_000,
    );
    expect((await history()).some((m) => m.sender_type === 'bot' && m.content.startsWith('Hello!'))).toBe(true);
    await visitor.json('/visitor/message/send', {
      method: 'POST',
      form: { client_msg_id: 'v2', content: 'human' },
      headers,
    });
    await eventually(
      async () => (await history()).some((m) => m.meta?.event === 'handoff' && m.meta?.reason === 'bot'),
      'the hand-off',
      30_000,
    );
    const conversation = await visitor.json('/visitor/chat/get', { headers });
    expect(conversation.body.data.state).toBe('queued');
    // Every delivery verified: the bot refuses a bad signature with 401 (and logs nothing), so the
    // delivery log says it — not the bot's output, which holds random ids.
    const log = await ada.client.json(`/agent/webhook/deliveries?endpoint_id=${endpoint.body.data.endpoint.id}`);
    const statuses = (log.body.data as { last_status: number | null }[]).map((d) => d.last_status);
    expect(statuses).toContain(204);
    expect(statuses).not.toContain(401);
    expect(uid).toMatch(/^v_/);
  }, 90_000);
});
