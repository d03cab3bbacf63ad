import type { IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { originAllowedFor } from '../../src/http/origins.js';
import { SUBSCRIBE_RATE } from '../../src/subscriptions/connection.js';
import { MAX_WS_PAYLOAD_BYTES } from '../../src/subscriptions/limits.js';
import { visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { rawSocket } from '../support/ws.js';

const PARTNER = 'https://shop.example.com';

// The socket that never sends connection_init waits this out (5 s by default); every other socket
// of the file sends it as soon as it opens.
const INIT_TIMEOUT_MS = 1000;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    env: {
      ALLOWED_ORIGINS: `${PARTNER}, https://other.example.org`,
      WS_CONNECTION_INIT_TIMEOUT_MS: String(INIT_TIMEOUT_MS),
    },
  });
});
afterAll(() => t?.stop());

/** Opens a graphql-transport-ws socket with `origin` (or none) and tells whether the upgrade succeeded. */
function upgrade(origin?: string): Promise<{ opened: true } | { opened: false; status: number }> {
  const ws = new WebSocket(t.wsUrl, 'graphql-transport-ws', origin ? { origin } : {});
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      ws.close();
      resolve({ opened: true });
    });
    ws.once('unexpected-response', (_req, res) => {
      resolve({ opened: false, status: res.statusCode ?? 0 });
      ws.terminate();
    });
    ws.once('error', reject);
  });
}

/** A raw socket whose `connection_init` (a visitor of demo-appkey) the server acknowledged. */
async function ackedSocket() {
  const { token } = await visitorToken(t.url);
  const socket = rawSocket(t.wsUrl);
  await socket.opened;
  const acked = new Promise<void>((resolve) => {
    socket.ws.on('message', (raw) => {
      if (JSON.parse(String(raw)).type === 'connection_ack') resolve();
    });
  });
  socket.ws.send(
    JSON.stringify({ type: 'connection_init', payload: { appkey: 'demo-appkey', authorization: `Bearer ${token}` } }),
  );
  await acked;
  return socket;
}

const subscribe = (id: string) =>
  JSON.stringify({ id, type: 'subscribe', payload: { query: 'subscription { channel(name: "nope") { id } }' } });

/** An upgrade request to `host`, over TLS (`secure`), plain (false, said by a trusted proxy) or unknown. */
function upgradeTo(gw: { host: string; secure?: boolean }): IncomingMessage {
  const headers: IncomingMessage['headers'] = { host: gw.host };
  if (gw.secure === false) headers['x-forwarded-proto'] = 'http';
  return { headers, socket: { encrypted: gw.secure === true } } as unknown as IncomingMessage;
}

/** The gateway's Origin rule (src/http/origins.ts) as the upgrade applies it. */
function originAllowed(
  origin: string | undefined,
  gw: { host: string; secure?: boolean; allowedOrigins: string[]; publicWsAddress?: string },
): boolean {
  const config = {
    allowedOrigins: gw.allowedOrigins,
    publicWsAddress: gw.publicWsAddress,
    trustProxy: gw.secure === false,
  };
  return originAllowedFor(origin, upgradeTo(gw), config);
}

describe('WebSocket Origin allowlist (ALLOWED_ORIGINS)', () => {
  const gateway = { host: 'chat.example.com', allowedOrigins: [PARTNER] };
  it.each([
    ['no Origin (a non-browser client)', undefined, gateway, true],
    ['the gateway itself over http, TLS unknown', 'http://chat.example.com', gateway, true],
    ['the gateway itself over https, TLS unknown', 'https://chat.example.com', gateway, true],
    ['the gateway itself over https behind TLS', 'https://chat.example.com', { ...gateway, secure: true }, true],
    ['http page when the socket is wss', 'http://chat.example.com', { ...gateway, secure: true }, false],
    ['https page when the socket is plain ws', 'https://chat.example.com', { ...gateway, secure: false }, false],
    ['same host, another port', 'http://chat.example.com:8080', gateway, false],
    ['an allowlisted origin', PARTNER, gateway, true],
    ['an allowlisted origin with a trailing slash', `${PARTNER}/`, gateway, true],
    ['another site', 'https://evil.example.net', gateway, false],
    ['a look-alike suffix', 'https://chat.example.com.evil.net', gateway, false],
    ['an opaque origin', 'null', gateway, false],
    ['a malformed Origin', 'not a url', gateway, false],
    [
      'the origin of PUBLIC_WS_ADDRESS',
      'https://ws.example.com',
      { ...gateway, publicWsAddress: 'wss://ws.example.com/graphql' },
      true,
    ],
  ] as const)('%s', (_name, origin, gw, expected) => {
    expect(originAllowed(origin, gw)).toBe(expected);
  });

  it('an upgrade from another site is refused with 403 before the socket opens', async () => {
    expect(await upgrade('https://evil.example.net')).toEqual({ opened: false, status: 403 });
  });
  it('an upgrade without Origin, from the gateway itself or from an allowlisted origin opens', async () => {
    expect(await upgrade()).toEqual({ opened: true });
    expect(await upgrade(t.url)).toEqual({ opened: true });
    expect(await upgrade(PARTNER)).toEqual({ opened: true });
    expect(await upgrade('https://other.example.org')).toEqual({ opened: true });
  });
});

describe('graphql-ws protocol violations are closed with their codes', () => {
  it('an invalid message closes with 4400', async () => {
    const { ws, opened, closed } = rawSocket(t.wsUrl);
    await opened;
    ws.send('{"type":"not-a-message"');
    expect((await closed).code).toBe(4400);
  });
  it('subscribe before connection_init is acknowledged closes with 4401', async () => {
    const { ws, opened, closed } = rawSocket(t.wsUrl);
    await opened;
    ws.send(subscribe('1'));
    expect((await closed).code).toBe(4401);
  });
  it('an unanswered connection_init times out (4408)', async () => {
    const { opened, closed } = rawSocket(t.wsUrl);
    await opened;
    const openedAt = performance.now();
    expect((await closed).code).toBe(4408);
    // Timers never fire early: a lower bound, whatever the machine's load.
    expect(performance.now() - openedAt).toBeGreaterThanOrEqual(INIT_TIMEOUT_MS - 50);
  });
  it('a duplicate subscription id closes with 4409', async () => {
    const { ws, closed } = await ackedSocket();
    const long = JSON.stringify({
      id: 'same',
      type: 'subscribe',
      payload: { query: 'subscription($n: String!) { channel(name: $n) { id } }', variables: { n: 'x' } },
    });
    ws.send(long);
    ws.send(long);
    expect((await closed).code).toBe(4409);
  });
  it('a second connection_init closes with 4429', async () => {
    const { ws, closed } = await ackedSocket();
    ws.send(JSON.stringify({ type: 'connection_init', payload: { appkey: 'demo-appkey' } }));
    expect((await closed).code).toBe(4429);
  });
  it('a message larger than the ws maxPayload closes the socket (1009)', async () => {
    const { ws, closed } = await ackedSocket();
    ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: 'x'.repeat(MAX_WS_PAYLOAD_BYTES + 1) } }));
    expect((await closed).code).toBe(1009);
  });
  it('a text frame that is not valid UTF-8 closes the socket (1007) and the gateway keeps serving', async () => {
    const { ws, closed } = await ackedSocket();
    ws.send(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), { binary: false });
    expect((await closed).code).toBe(1007);
    await ackedSocket();
  });
});

describe('subscribe-rate limit per socket', () => {
  it(`more than ${SUBSCRIBE_RATE.max} subscribe messages in ${SUBSCRIBE_RATE.windowMs / 1000} s close the socket with 4429`, async () => {
    const { ws, closed } = await ackedSocket();
    for (let i = 0; i <= SUBSCRIBE_RATE.max; i++) {
      ws.send(subscribe(String(i)));
      ws.send(JSON.stringify({ id: String(i), type: 'complete' }));
    }
    expect(await closed).toEqual({ code: 4429, reason: 'Too many subscribe requests' });
  });
  it(`${SUBSCRIBE_RATE.max} subscribe messages in the window are accepted`, async () => {
    const { ws, closed } = await ackedSocket();
    let answered = 0;
    const all = new Promise<void>((resolve) => {
      ws.on('message', (raw) => {
        const type = JSON.parse(String(raw)).type;
        if ((type === 'error' || type === 'complete' || type === 'next') && ++answered >= SUBSCRIBE_RATE.max) resolve();
      });
    });
    for (let i = 0; i < SUBSCRIBE_RATE.max; i++) ws.send(subscribe(String(i)));
    await all;
    let state = 'open';
    void closed.then(() => {
      state = 'closed';
    });
    ws.ping();
    await new Promise<void>((resolve) => ws.once('pong', () => resolve()));
    expect(state).toBe('open');
    ws.close();
  });
});
