import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { publishEvent } from '../../src/resolvers/channels.js';
import { visitorChannel, visitorToken } from '../support/clients.js';
import { rawPusher } from '../support/pusher.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { eventually } from '../support/ws.js';

/**
 * A Pusher client may write as soon as its socket opens, before the gateway has looked up the
 * appkey and sent `pusher:connection_established` (src/subscriptions/pusher.ts). Those messages
 * wait and are handled in order once the connection is set up: none is lost, none is answered
 * before `connection_established`. The lookup is held here until the gateway has read them.
 */

let t: TestApp;
const sockets: ReturnType<typeof rawPusher>[] = [];
beforeAll(async () => {
  t = await startTestApp();
});
afterEach(() => {
  vi.restoreAllMocks();
});
afterAll(async () => {
  for (const s of sockets) s.ws.close();
  await t?.stop();
});

const pusherUrl = () => `${t.url.replace('http', 'ws')}/app/demo-appkey?protocol=7`;

/** Bytes a client sends for a text message of `length` bytes: the frame header, the mask, the payload. */
const frameBytes = (length: number) => (length < 126 ? 2 : 4) + 4 + length;

/**
 * Holds the merchant configuration lookup of the next upgrades on demo-appkey (answered from the
 * configuration cache once the appkey is known) until released, and watches the upgraded TCP
 * socket to tell when the gateway has read what the client sent.
 */
async function holdAppkeyLookup() {
  // A first upgrade makes the appkey known: the next ones read the merchant's configuration.
  const warm = rawPusher(pusherUrl());
  await warm.next('pusher:connection_established');
  warm.ws.close();
  const { configCache } = t.app.deps;
  const merchantId = configCache.merchantIdOfAppkey('demo-appkey');
  expect(merchantId).toBeDefined();

  const get = configCache.get;
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let held = 0;
  vi.spyOn(configCache, 'get').mockImplementation(async (id) => {
    if (id === merchantId) {
      held++;
      await released;
    }
    return get(id);
  });
  let upgraded: { socket: Duplex & { bytesRead?: number }; before: number } | undefined;
  const onUpgrade = (request: IncomingMessage, socket: Duplex & { bytesRead?: number }) => {
    if (request.url?.startsWith('/app/')) upgraded = { socket, before: socket.bytesRead ?? 0 };
  };
  t.app.server.on('upgrade', onUpgrade);
  return {
    /** Whether an upgrade is waiting for the lookup. */
    held: () => held > 0,
    /** Bytes the gateway has read from the upgraded socket since its upgrade request. */
    read: () => (upgraded ? (upgraded.socket.bytesRead ?? 0) - upgraded.before : 0),
    release() {
      release();
      t.app.server.off('upgrade', onUpgrade);
    },
  };
}

describe('Pusher: messages sent before connection_established', () => {
  it('a ping, a subscribe and two malformed messages sent on open are answered in order once the connection is established', async () => {
    const { token } = await visitorToken(t.url);
    const channel = await visitorChannel(t.url, token);
    const lookup = await holdAppkeyLookup();
    const early = [
      { event: 'pusher:ping', data: {} },
      { event: 'pusher:subscribe', data: { channel } },
      { event: 'no-such-event', data: {} },
      { event: 'pusher:subscribe', data: { channel: '' } },
    ].map((m) => JSON.stringify(m));
    try {
      const raw = rawPusher(pusherUrl());
      sockets.push(raw);
      raw.ws.once('open', () => {
        for (const frame of early) raw.ws.send(frame);
      });
      await eventually(lookup.held, 'the upgrade waiting for its appkey lookup');
      const sent = early.reduce((bytes, frame) => bytes + frameBytes(Buffer.byteLength(frame)), 0);
      await eventually(() => lookup.read() >= sent, 'the gateway having read the early messages');
      // Nothing is answered while the connection is not set up.
      expect(raw.messages).toEqual([]);
      lookup.release();

      await raw.next('pusher:connection_established');
      // A message sent once established is answered after every early one.
      raw.send('client-marker', {});
      const CLIENT_EVENTS = 'Client events are not enabled on this gateway';
      await eventually(
        () => raw.messages.some((m) => (m.data as { message?: string }).message === CLIENT_EVENTS),
        'the answer to the message sent once established',
      );
      const error = (message: string) => ({ event: 'pusher:error', data: { code: null, message } });
      const succeeded = { event: 'pusher_internal:subscription_succeeded', channel, data: {} };
      // The subscribe is answered once its authorization is done: after the established, anywhere
      // among the answers that take no lookup.
      expect(raw.messages.filter((m) => m.event !== succeeded.event)).toEqual([
        { event: 'pusher:connection_established', data: { socket_id: expect.any(String), activity_timeout: 120 } },
        { event: 'pusher:pong', data: {} },
        error('Unknown event'),
        error('pusher:subscribe needs a channel'),
        error(CLIENT_EVENTS),
      ]);
      expect(await raw.next(succeeded.event)).toEqual(succeeded);
      expect(raw.messages.findIndex((m) => m.event === succeeded.event)).toBeGreaterThan(3);

      // The early subscribe is a real subscription: the channel's events arrive.
      await publishEvent(t.app.deps, { channel, event: 'after.early', data: { n: 1 } });
      expect(await raw.next('after.early')).toEqual({ event: 'after.early', channel, data: { n: 1 } });
      expect(raw.messages.filter((m) => m.event === succeeded.event)).toHaveLength(1);
    } finally {
      lookup.release();
    }
  });
});
