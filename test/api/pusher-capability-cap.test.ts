import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { visitorChannel, visitorToken } from '../support/clients.js';
import { rawPusher } from '../support/pusher.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Issue 27, info row: a visitor channel followed by capability (no token on the socket) is capped
 * as its identity is: at most WS_MAX_SOCKETS_PER_IDENTITY sockets on one visitor's channel, from
 * any number of addresses, so tokenless sockets cannot pile up to the instance's ceiling. And the
 * visitor channels a client asks for by name (a database lookup each) are budgeted per address.
 */
const CAP = 3;
const LOOKUPS = 3;
let t: TestApp;
beforeAll(async () => {
  // TRUST_PROXY: the sockets come from many client addresses (X-Forwarded-For).
  t = await startTestApp({
    env: {
      WS_MAX_SOCKETS_PER_IDENTITY: String(CAP),
      PUSHER_CHANNEL_LOOKUPS_PER_MINUTE: String(LOOKUPS),
      TRUST_PROXY: 'on',
    },
  });
});
afterAll(() => t?.stop());

/** A fresh visitor's channel. */
async function newVisitorChannel() {
  const { token } = await visitorToken(t.url);
  return visitorChannel(t.url, token);
}

let n = 0;
/** A tokenless Pusher socket from a fresh address, subscribed to `channel`: how the subscription ended. */
async function follow(channel: string) {
  const socket = rawPusher(`${t.url.replace('http', 'ws')}/app/demo-appkey?protocol=7`, {
    'x-forwarded-for': `10.77.${Math.floor(n / 250)}.${(n++ % 250) + 1}`,
  });
  await socket.next('pusher:connection_established');
  socket.send('pusher:subscribe', { channel });
  for (;;) {
    const m = socket.messages.find(
      (x) => x.event === 'pusher_internal:subscription_succeeded' || x.event === 'pusher:subscription_error',
    );
    if (m) return { socket, ok: m.event === 'pusher_internal:subscription_succeeded', data: m.data };
    await socket.next('__poll__', 100).catch(() => undefined);
  }
}

describe('a cap per visitor-channel capability, as per identity', () => {
  it('past WS_MAX_SOCKETS_PER_IDENTITY sockets on one visitor channel (each from its own address): refused 429', async () => {
    const channel = await newVisitorChannel();
    const accepted = [];
    for (let i = 0; i < CAP; i++) {
      const s = await follow(channel);
      expect(s.ok, JSON.stringify(s.data)).toBe(true);
      accepted.push(s);
    }
    const over = await follow(channel);
    expect(over.ok).toBe(false);
    expect(over.data).toMatchObject({ status: 429, error: expect.stringMatching(/Too many connections/) });
    // Another visitor's channel has a cap of its own.
    const other = await follow(await newVisitorChannel());
    expect(other.ok).toBe(true);
    // A closed socket gives its place back.
    const first = accepted[0] as (typeof accepted)[number];
    first.socket.ws.close();
    await first.socket.closed;
    // (the server may see the close a moment after the client does)
    let again = await follow(channel);
    for (let i = 0; i < 50 && !again.ok; i++) {
      again.socket.ws.close();
      await new Promise((r) => setTimeout(r, 100));
      again = await follow(channel);
    }
    expect(again.ok).toBe(true);
    for (const s of [...accepted, over, other, again]) s.socket.ws.close();
  });
});

describe('visitor channels asked for by name are budgeted per address (PUSHER_CHANNEL_LOOKUPS_PER_MINUTE)', () => {
  it('made-up channels count; past the budget a subscription is refused 429 before the lookup, a real channel too; another address is not', async () => {
    const socket = rawPusher(`${t.url.replace('http', 'ws')}/app/demo-appkey?protocol=7`, {
      'x-forwarded-for': '10.88.0.1',
    });
    await socket.next('pusher:connection_established');
    /** The answer to a subscription to `channel` on this one socket. */
    const subscribe = async (channel: string) => {
      socket.send('pusher:subscribe', { channel });
      for (;;) {
        const m = socket.messages.find(
          (x) =>
            x.channel === channel &&
            (x.event === 'pusher_internal:subscription_succeeded' || x.event === 'pusher:subscription_error'),
        );
        if (m) return m.data;
        await socket.next('__poll__', 100).catch(() => undefined);
      }
    };
    for (let i = 0; i < LOOKUPS; i++) expect(await subscribe(`visitor-made-up-${i}`)).toMatchObject({ status: 403 });
    const real = await newVisitorChannel();
    expect(await subscribe(real)).toMatchObject({
      status: 429,
      error: expect.stringMatching(/Too many visitor channels/),
    });
    // Another address asks on its own budget.
    const other = await follow(real);
    expect(other.ok).toBe(true);
    for (const s of [socket, other.socket]) s.ws.close();
  });
});
