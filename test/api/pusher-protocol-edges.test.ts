import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpClient, visitorChannel, visitorToken } from '../support/clients.js';
import { rawPusher } from '../support/pusher.js';
import { INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';

// The Pusher protocol's edges over a raw socket, each answer compared whole: every refused upgrade
// closes with its own code and reason; every malformed or unsupported client message gets its own
// `pusher:error` and leaves the socket open; every refused `pusher:subscribe` gets a
// `pusher:subscription_error` naming its own reason; a channel subscribed twice is confirmed twice
// and delivers each event once.

let t: TestApp;
const sockets: ReturnType<typeof rawPusher>[] = [];
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  for (const s of sockets) s.ws.close();
  await t.stop();
});

/** A raw Pusher socket on the demo app, once its connection is established. */
async function connected() {
  const raw = rawPusher(`${t.url.replace('http', 'ws')}/app/demo-appkey?protocol=7&client=js&version=8.0.0`);
  sockets.push(raw);
  await raw.next('pusher:connection_established');
  return raw;
}

/** Sends `frame` as is and returns the next message of `event` it causes (those before it are skipped). */
async function answerTo(raw: Awaited<ReturnType<typeof connected>>, frame: string, event: string) {
  const seen = raw.messages.filter((m) => m.event === event).length;
  raw.ws.send(frame);
  return (await raw.all(event, seen + 1))[seen];
}

const error = (message: string) => ({ event: 'pusher:error', data: { code: null, message } });

describe('the upgrade: each refusal closes with its own code and reason', () => {
  const at = (path: string) => rawPusher(`${t.url.replace('http', 'ws')}${path}`);

  it('no (or an empty) protocol version (4008), another version (4007), an unknown appkey (4001); 7.0 is 7', async () => {
    expect(await at('/app/demo-appkey').closed).toEqual({ code: 4008, reason: 'No protocol version supplied' });
    expect(await at('/app/demo-appkey?protocol=').closed).toEqual({
      code: 4008,
      reason: 'No protocol version supplied',
    });
    expect(await at('/app/demo-appkey?protocol=6').closed).toEqual({
      code: 4007,
      reason: 'Unsupported protocol version 6',
    });
    expect(await at('/app/no-such-appkey?protocol=7').closed).toEqual({
      code: 4001,
      reason: 'Application does not exist',
    });
    const seven = at('/app/demo-appkey?protocol=7.0');
    sockets.push(seven);
    expect((await seven.next('pusher:connection_established')).data).toMatchObject({ activity_timeout: 120 });
  });
});

describe('pusher:error: each malformed or unsupported message is answered, and the socket stays open', () => {
  it('invalid JSON, a subscribe without a channel, a client event, an unknown event', async () => {
    const raw = await connected();
    const cases: [string, string][] = [
      ['not json {', 'Invalid JSON'],
      [JSON.stringify({ event: 'pusher:subscribe', data: {} }), 'pusher:subscribe needs a channel'],
      [JSON.stringify({ event: 'pusher:subscribe', data: { channel: '' } }), 'pusher:subscribe needs a channel'],
      [JSON.stringify({ event: 'pusher:subscribe', data: { channel: 7 } }), 'pusher:subscribe needs a channel'],
      // `data` as a JSON string, as some Pusher clients send it.
      [JSON.stringify({ event: 'pusher:subscribe', data: '{"channel":""}' }), 'pusher:subscribe needs a channel'],
      [JSON.stringify({ event: 'pusher:subscribe', data: 'not json {' }), 'pusher:subscribe needs a channel'],
      [
        JSON.stringify({ event: 'client-typing', channel: 'x', data: {} }),
        'Client events are not enabled on this gateway',
      ],
      [JSON.stringify({ event: 'no-such-event', data: {} }), 'Unknown event'],
      [JSON.stringify({ event: 7, data: {} }), 'Unknown event'],
      [JSON.stringify({ data: {} }), 'Unknown event'],
    ];
    for (const [frame, message] of cases) expect(await answerTo(raw, frame, 'pusher:error')).toEqual(error(message));
    // pusher:pong and pusher:unsubscribe of an unknown channel are accepted silently.
    raw.send('pusher:pong', {});
    raw.send('pusher:unsubscribe', { channel: 'never-subscribed' });
    raw.send('pusher:unsubscribe', {});
    expect(await answerTo(raw, JSON.stringify({ event: 'pusher:ping', data: {} }), 'pusher:pong')).toEqual({
      event: 'pusher:pong',
      data: {},
    });
    expect(raw.messages.filter((m) => m.event === 'pusher:error')).toHaveLength(cases.length);
    expect(raw.ws.readyState).toBe(raw.ws.OPEN);
  });
});

describe('pusher:subscription_error: each refusal names its own reason', () => {
  const subscribe = (channel: string, auth?: string) =>
    JSON.stringify({ event: 'pusher:subscribe', data: auth === undefined ? { channel } : { channel, auth } });

  it('a presence- channel is not offered (403), a name past the cap is refused as too long (400)', async () => {
    const raw = await connected();
    expect(await answerTo(raw, subscribe('presence-room'), 'pusher:subscription_error')).toEqual({
      event: 'pusher:subscription_error',
      channel: 'presence-room',
      data: { type: 'AuthError', error: 'Presence channels are not offered', status: 403 },
    });
    // `data` as a JSON string, as some Pusher clients send it: parsed, the same refusal.
    const asString = JSON.stringify({ event: 'pusher:subscribe', data: JSON.stringify({ channel: 'presence-desk' }) });
    expect(await answerTo(raw, asString, 'pusher:subscription_error')).toEqual({
      event: 'pusher:subscription_error',
      channel: 'presence-desk',
      data: { type: 'AuthError', error: 'Presence channels are not offered', status: 403 },
    });
    const tooLong = `private-${'x'.repeat(201)}`;
    expect(await answerTo(raw, subscribe(tooLong), 'pusher:subscription_error')).toEqual({
      event: 'pusher:subscription_error',
      channel: tooLong,
      data: { type: 'AuthError', error: 'Channel name too long', status: 400 },
    });
    // At the cap the name is not the reason: the refusal is the signature's.
    const atCap = `private-${'x'.repeat(200)}`;
    const refused = await answerTo(raw, subscribe(atCap, 'demo-appkey:0000'), 'pusher:subscription_error');
    expect(refused?.channel).toBe(atCap);
    expect(refused?.data).not.toMatchObject({ error: 'Channel name too long' });
    expect(raw.ws.readyState).toBe(raw.ws.OPEN);
  });

  it('a channel subscribed twice is confirmed twice and delivers each event once', async () => {
    const { token } = await visitorToken(t.url);
    const channel = await visitorChannel(t.url, token);
    const raw = await connected();
    const succeeded = { event: 'pusher_internal:subscription_succeeded', channel, data: {} };
    expect(await answerTo(raw, subscribe(channel), 'pusher_internal:subscription_succeeded')).toEqual(succeeded);
    expect(await answerTo(raw, subscribe(channel), 'pusher_internal:subscription_succeeded')).toEqual(succeeded);
    for (const n of [1, 2]) {
      const res = await new HttpClient(t.url).json('/internal/events', {
        method: 'POST',
        headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
        json: { channel, event: 'test.count', data: { n } },
      });
      expect(res.status).toBe(202);
    }
    await answerTo(raw, JSON.stringify({ event: 'pusher:ping', data: {} }), 'pusher:pong');
    await raw.all('test.count', 2);
    // A ping answered after both events were published: a duplicate delivery would be here by now.
    await answerTo(raw, JSON.stringify({ event: 'pusher:ping', data: {} }), 'pusher:pong');
    expect(raw.messages.filter((m) => m.event === 'test.count').map((m) => m.data)).toEqual([{ n: 1 }, { n: 2 }]);
  });
});
