import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishEvent } from '../../src/resolvers/channels.js';
import { agentSession, type HttpClient } from '../support/clients.js';
import { selectsDown } from '../support/deps.js';
import { rawPusher } from '../support/pusher.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * What the Pusher adapter does with an agent's Session and with its lookups, each answer compared
 * whole: a level change reaching a connected agent's channels, a Session refused at the upgrade
 * for another reason than its merchant (ending the socket) or for its merchant (left anonymous),
 * and an appkey lookup the database cannot answer.
 */

let t: TestApp;
/** The second gateway: one socket per identity. */
let capped: TestApp;
const sockets: ReturnType<typeof rawPusher>[] = [];
beforeAll(async () => {
  [t, capped] = await Promise.all([startTestApp(), startTestApp({ env: { WS_MAX_SOCKETS_PER_IDENTITY: '1' } })]);
});
afterAll(async () => {
  for (const s of sockets) s.ws.close();
  await Promise.all([t?.stop(), capped?.stop()]);
});

const cookieOf = (client: HttpClient) => [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');

/** A raw Pusher socket on `appkey` of `app`, with the agent's Session cookie when given. */
function open(app: TestApp, appkey: string, cookie?: string) {
  const raw = rawPusher(`${app.url.replace('http', 'ws')}/app/${appkey}?protocol=7`, cookie ? { cookie } : {});
  sockets.push(raw);
  return raw;
}

type Raw = ReturnType<typeof open>;

/** A ping answered: everything the server sent before the pong has arrived. */
async function settled(raw: Raw) {
  const pongs = raw.messages.filter((m) => m.event === 'pusher:pong').length;
  raw.send('pusher:ping', {});
  await raw.all('pusher:pong', pongs + 1);
}

const subscribe = async (raw: Raw, ...channels: string[]) => {
  for (const channel of channels) raw.send('pusher:subscribe', { channel });
  await raw.all('pusher_internal:subscription_succeeded', channels.length);
};

describe("a connected agent's level changes", () => {
  const setLevel = async (admin: HttpClient, level: string) => {
    const { body } = await admin.graphql(
      `mutation { updateAgent(input: {agentId: "a_alice", level: ${level}}) { level } }`,
    );
    expect(body).toEqual({ data: { updateAgent: { level } } });
  };

  it('demoted to ticket_agent: each of its channels is refused 403 with the reason and delivers no more; another agent’s stay', async () => {
    const ada = await agentSession(t.url, 'ada');
    const alice = await agentSession(t.url, 'alice');
    const raw = open(t, 'demo-appkey', cookieOf(alice.client));
    const adaRaw = open(t, 'demo-appkey', cookieOf(ada.client));
    await Promise.all([raw.next('pusher:connection_established'), adaRaw.next('pusher:connection_established')]);
    await subscribe(raw, 'agent-a_alice', 'global-demo');
    await subscribe(adaRaw, 'global-demo');
    try {
      await setLevel(ada.client, 'ticket_agent');
      const refused = await raw.all('pusher:subscription_error', 2);
      const reason = {
        type: 'AuthError',
        error: 'Online reception is not available to ticket agents; use the ticket entry',
        status: 403,
      };
      expect(refused.sort((a, b) => String(a.channel).localeCompare(String(b.channel)))).toEqual([
        { event: 'pusher:subscription_error', channel: 'agent-a_alice', data: reason },
        { event: 'pusher:subscription_error', channel: 'global-demo', data: reason },
      ]);
      await publishEvent(t.app.deps, { channel: 'global-demo', event: 'after.demotion', data: { n: 1 } });
      await adaRaw.all('after.demotion');
      await settled(raw);
      expect(raw.messages.filter((m) => m.event === 'after.demotion')).toEqual([]);
      expect(raw.ws.readyState).toBe(raw.ws.OPEN);
      expect(adaRaw.messages.filter((m) => m.event === 'pusher:subscription_error')).toEqual([]);
    } finally {
      await setLevel(ada.client, 'agent');
    }
  });
});

describe("an agent's Session at the upgrade", () => {
  it('over the per-identity socket cap: the socket is closed 4004 with the reason (a connection, not a silent anonymous one)', async () => {
    const alice = await agentSession(capped.url, 'alice');
    const first = open(capped, 'demo-appkey', cookieOf(alice.client));
    await first.next('pusher:connection_established');
    const second = open(capped, 'demo-appkey', cookieOf(alice.client));
    expect(await second.closed).toEqual({ code: 4004, reason: 'Too many connections for this identity' });
    expect(second.messages).toEqual([]);
    // The first keeps its channels.
    await subscribe(first, 'agent-a_alice');
  });

  it('of another merchant: the socket is connected anonymous, its agent channels refused 403', async () => {
    const bob = await agentSession(t.url, 'bob');
    const raw = open(t, 'demo-appkey', cookieOf(bob.client));
    await raw.next('pusher:connection_established');
    raw.send('pusher:subscribe', { channel: 'global-demo' });
    const [refused] = await raw.all('pusher:subscription_error');
    expect(refused).toMatchObject({ channel: 'global-demo', data: { status: 403 } });
    expect(raw.ws.readyState).toBe(raw.ws.OPEN);
    // Refused as a socket with no Session at all is, word for word.
    const anonymous = open(t, 'demo-appkey');
    await anonymous.next('pusher:connection_established');
    anonymous.send('pusher:subscribe', { channel: 'global-demo' });
    expect(await anonymous.next('pusher:subscription_error')).toEqual(refused);
  });
});

describe('the appkey lookup', () => {
  it('the database not answering: the socket is closed 4100 (retry later), not left open or refused as unknown', async () => {
    const down = selectsDown(t.app.deps.db);
    const db = t.app.deps.db;
    t.app.deps.db = down.db;
    try {
      // An appkey no cache holds: the lookup reads the database.
      const raw = open(t, 'not-cached-appkey');
      expect(await raw.closed).toEqual({ code: 4100, reason: 'Service unavailable: retry later' });
    } finally {
      t.app.deps.db = db;
    }
    // Answering again, the same appkey is what it is: unknown.
    expect(await open(t, 'not-cached-appkey').closed).toEqual({ code: 4001, reason: 'Application does not exist' });
  });
});
