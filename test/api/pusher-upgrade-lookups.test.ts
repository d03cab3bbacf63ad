import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawPusher } from '../support/pusher.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Issue 27: a Pusher socket needs no identity, and its upgrade (`/app/{appkey}`) named the
 * merchant by a database query every time. A known appkey is answered from the configuration
 * cache; an unknown one (a lookup each) is budgeted per client address
 * (PUSHER_UNKNOWN_APPKEYS_PER_MINUTE), refused before the lookup past it.
 */
const UNKNOWN = 3;
let t: TestApp;
beforeAll(async () => {
  // TRUST_PROXY: each case comes from its own client address (X-Forwarded-For).
  t = await startTestApp({ env: { PUSHER_UNKNOWN_APPKEYS_PER_MINUTE: String(UNKNOWN), TRUST_PROXY: 'on' } });
});
afterAll(() => t?.stop());

/** Statements that name a merchant by appkey, run while `fn` does. */
async function appkeyLookupsDuring(fn: () => Promise<unknown>): Promise<number> {
  let lookups = 0;
  const stop = t.app.deps.database.onQuery((sql) => {
    if (/"appkey" = /.test(sql)) lookups++;
  });
  try {
    await fn();
  } finally {
    stop();
  }
  return lookups;
}

/** Opens a Pusher socket on `appkey` from `address`: established (then closed), or its close code. */
async function upgrade(appkey: string, address: string): Promise<'established' | number> {
  const socket = rawPusher(`${t.url.replace('http', 'ws')}/app/${appkey}?protocol=7`, { 'x-forwarded-for': address });
  const outcome = await Promise.race([
    socket.next('pusher:connection_established').then(() => 'established' as const),
    socket.closed.then((c) => c.code),
  ]);
  socket.ws.close();
  return outcome;
}

describe('Pusher upgrades: the appkey from the configuration cache, unknown appkeys budgeted per address', () => {
  it('a known appkey is looked up once, then answered from the cache', async () => {
    expect(await upgrade('demo-appkey', '10.28.0.1')).toBe('established');
    const lookups = await appkeyLookupsDuring(async () => {
      for (let i = 0; i < 5; i++) expect(await upgrade('demo-appkey', '10.28.0.1')).toBe('established');
    });
    expect(lookups).toBe(0);
  });

  it('past PUSHER_UNKNOWN_APPKEYS_PER_MINUTE unknown appkeys an address is closed 4301 with no lookup; a known appkey and another address are unaffected', async () => {
    const spent = await appkeyLookupsDuring(async () => {
      for (let i = 0; i < UNKNOWN; i++) expect(await upgrade(`made-up-${i}`, '10.28.0.2')).toBe(4001);
    });
    expect(spent).toBe(UNKNOWN);
    let refused: 'established' | number | undefined;
    const lookups = await appkeyLookupsDuring(async () => {
      refused = await upgrade('made-up-again', '10.28.0.2');
    });
    expect(lookups).toBe(0);
    expect(refused).toBe(4301);
    expect(await upgrade('demo-appkey', '10.28.0.2')).toBe('established');
    expect(await upgrade('made-up-again', '10.28.0.3')).toBe(4001);
  });
});
