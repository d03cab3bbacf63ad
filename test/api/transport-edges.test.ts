import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { HttpClient, visitorChannel, visitorToken } from '../support/clients.js';
import { rawPusher } from '../support/pusher.js';
import { INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';
import { eventually } from '../support/ws.js';

/**
 * The real-time transports at their edges, on real sockets: a Pusher unsubscribe stops delivery
 * and frees its slot; one identity per Pusher connection; a forged `private-` signature refused
 * by the signature check itself (not by a later one); the fan-out's pre-framed write path with
 * two graphql-ws operation ids on one socket.
 */

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());

/** The per-socket operation cap (src/subscriptions/limits.ts). */
const PER_SOCKET = 20;

async function publish(channel: string, event: string, data: unknown) {
  const { status } = await new HttpClient(t.url).json('/internal/events', {
    method: 'POST',
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
    json: { channel, event, data },
  });
  expect(status).toBe(202);
}

async function visitor() {
  const { token } = await visitorToken(t.url);
  return { token, channel: await visitorChannel(t.url, token) };
}

async function pusherSocket() {
  const raw = rawPusher(`${t.url.replace('http', 'ws')}/app/demo-appkey?protocol=7`);
  const established = await raw.next('pusher:connection_established');
  const socketId = (established.data as { socket_id: string }).socket_id;
  /** The first message of `event` on `channel`. */
  type Message = (typeof raw.messages)[number];
  const on = async (event: string, channel: string): Promise<Message> =>
    (await eventually(
      () => raw.messages.find((m) => m.event === event && m.channel === channel),
      `${event} on ${channel}`,
    )) as Message;
  /** Whether `channel` was answered (succeeded or refused) yet. */
  const answer = async (channel: string): Promise<Message> =>
    (await eventually(
      () =>
        raw.messages.find(
          (m) =>
            m.channel === channel &&
            (m.event === 'pusher_internal:subscription_succeeded' || m.event === 'pusher:subscription_error'),
        ),
      `an answer on ${channel}`,
    )) as Message;
  return { ...raw, socketId, on, answer };
}

/** A genuine signature from POST /pusher/auth for `channel` on `socketId`, with the visitor's bearer. */
async function sign(token: string, socketId: string, channel: string) {
  const res = await new HttpClient(t.url).request('/pusher/auth', {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    form: { socket_id: socketId, channel_name: channel },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { auth: string }).auth;
}

describe('Pusher: unsubscribe', () => {
  it('pusher:unsubscribe stops delivery on that channel and frees its slot under the per-socket cap', async () => {
    const visitors = await Promise.all(Array.from({ length: PER_SOCKET + 1 }, () => visitor()));
    const raw = await pusherSocket();
    try {
      const channels = visitors.map((v) => v.channel);
      for (const channel of channels.slice(0, PER_SOCKET)) raw.send('pusher:subscribe', { channel });
      for (const channel of channels.slice(0, PER_SOCKET)) {
        expect((await raw.answer(channel)).event).toBe('pusher_internal:subscription_succeeded');
      }
      // The socket is full: one more is refused by the per-socket cap.
      const last = channels[PER_SOCKET] as string;
      raw.send('pusher:subscribe', { channel: last });
      expect((await raw.on('pusher:subscription_error', last)).data).toEqual({
        type: 'AuthError',
        error: `At most ${PER_SOCKET} operations at once on one socket`,
        status: 429,
      });

      // Unsubscribing one frees its slot: the same channel is admitted now.
      const [gone, kept] = channels as [string, string];
      raw.send('pusher:unsubscribe', { channel: gone });
      raw.messages.length = 0;
      raw.send('pusher:subscribe', { channel: last });
      expect((await raw.answer(last)).event).toBe('pusher_internal:subscription_succeeded');

      // The unsubscribed channel delivers nothing more; the others still do.
      await publish(gone, 'test.after', { n: 1 });
      await publish(kept, 'test.after', { n: 2 });
      await publish(last, 'test.after', { n: 3 });
      await raw.on('test.after', kept);
      await raw.on('test.after', last);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(raw.messages.filter((m) => m.event === 'test.after').map((m) => m.channel)).toEqual(
        expect.not.arrayContaining([gone]),
      );
      expect(raw.messages.filter((m) => m.channel === gone)).toEqual([]);
    } finally {
      raw.ws.close();
    }
  });
});

describe('Pusher: private- signatures', () => {
  it('one identity per connection: a second identity’s genuine signature on the same socket is refused by that rule', async () => {
    const [a, b] = await Promise.all([visitor(), visitor()]);
    const raw = await pusherSocket();
    try {
      const own = `private-${a.channel}`;
      raw.send('pusher:subscribe', { channel: own, auth: await sign(a.token, raw.socketId, own) });
      expect((await raw.answer(own)).event).toBe('pusher_internal:subscription_succeeded');

      const other = `private-${b.channel}`;
      raw.send('pusher:subscribe', { channel: other, auth: await sign(b.token, raw.socketId, other) });
      expect((await raw.on('pusher:subscription_error', other)).data).toEqual({
        type: 'AuthError',
        error: 'A connection has one identity: this signature is for another',
        status: 403,
      });
      // The first identity's channel still delivers; the refused one never does.
      await publish(b.channel, 'test.other', {});
      await publish(a.channel, 'test.own', {});
      await raw.on('test.own', own);
      expect(raw.messages.filter((m) => m.channel === other).map((m) => m.event)).toEqual([
        'pusher:subscription_error',
      ]);
    } finally {
      raw.ws.close();
    }
  });

  it('a forged signature is refused by the signature check itself: the genuine grant waiting for it stays usable', async () => {
    const a = await visitor();
    const raw = await pusherSocket();
    try {
      const channel = `private-${a.channel}`;
      // A genuine authorization is on record for this socket and channel (the grant the signature unlocks)…
      const genuine = await sign(a.token, raw.socketId, channel);
      // …and a forged signature for the same socket and channel is refused before it is looked at.
      raw.send('pusher:subscribe', { channel, auth: `demo-appkey:${'0'.repeat(64)}` });
      expect((await raw.on('pusher:subscription_error', channel)).data).toEqual({
        type: 'AuthError',
        error: 'Invalid signature: authorize the channel again',
        status: 403,
      });
      // The grant was not taken by the forgery (a later check would have consumed it): the genuine one works.
      raw.messages.length = 0;
      raw.send('pusher:subscribe', { channel, auth: genuine });
      expect((await raw.answer(channel)).event).toBe('pusher_internal:subscription_succeeded');
      await publish(a.channel, 'test.private', { ok: true });
      expect((await raw.on('test.private', channel)).data).toEqual({ ok: true });
    } finally {
      raw.ws.close();
    }
  });
});

describe('graphql-ws: the pre-framed write path', () => {
  it('two subscriptions of one channel on one socket each get their own frames, with their own operation id', async () => {
    const a = await visitor();
    const ws = new WebSocket(t.wsUrl, 'graphql-transport-ws');
    const frames: { type: string; id?: string; payload?: { data?: { channel: { event: string; data: unknown } } } }[] =
      [];
    ws.on('message', (raw) => frames.push(JSON.parse(String(raw))));
    try {
      await new Promise((resolve, reject) => {
        ws.once('open', resolve);
        ws.once('error', reject);
      });
      ws.send(
        JSON.stringify({
          type: 'connection_init',
          payload: { appkey: 'demo-appkey', authorization: `Bearer ${a.token}` },
        }),
      );
      await eventually(() => frames.some((f) => f.type === 'connection_ack'), 'connection_ack');
      const query = 'subscription ($name: String!) { channel(name: $name) { event data } }';
      for (const id of ['first', 'second'])
        ws.send(JSON.stringify({ id, type: 'subscribe', payload: { query, variables: { name: a.channel } } }));
      const events = (id: string) =>
        frames.filter((f) => f.type === 'next' && f.id === id).map((f) => f.payload?.data?.channel.event);
      await eventually(() => events('first').length > 0 && events('second').length > 0, 'both subscribed');

      await publish(a.channel, 'test.one', { n: 1 });
      await publish(a.channel, 'test.two', { n: 2 });
      await eventually(
        () => events('first').includes('test.two') && events('second').includes('test.two'),
        'both live events on both',
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      const live = (id: string) =>
        frames
          .filter((f) => f.type === 'next' && f.id === id && f.payload?.data?.channel.event.startsWith('test.'))
          .map((f) => f.payload?.data?.channel);
      for (const id of ['first', 'second']) {
        expect(live(id)).toEqual([
          { event: 'test.one', data: { n: 1 } },
          { event: 'test.two', data: { n: 2 } },
        ]);
      }
      expect(frames.filter((f) => f.type === 'next').every((f) => f.id === 'first' || f.id === 'second')).toBe(true);
    } finally {
      ws.close();
    }
  });
});
