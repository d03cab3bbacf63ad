import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import type { CloseInfo } from '../support/ws.js';
import { statementsOf } from './bootstrap.fixtures.js';

/**
 * Issue 27: an unknown or revoked visitor token costs a database lookup that is never cached, so
 * failed lookups are budgeted per client address (VISITOR_TOKEN_FAILURES_PER_MINUTE). Past it an
 * address is refused before any lookup — REST, GraphQL, graphql-ws `connection_init` and
 * `/pusher/auth` alike, one budget — while another address goes on as before.
 */
const FAILURES = 3;
let t: TestApp;
beforeAll(async () => {
  // TRUST_PROXY: each case comes from its own client address (X-Forwarded-For).
  t = await startTestApp({ env: { VISITOR_TOKEN_FAILURES_PER_MINUTE: String(FAILURES), TRUST_PROXY: 'on' } });
});
afterAll(() => t?.stop());

/** Token lookups (the visitor_tokens query) run while `fn` does. */
async function lookupsDuring(fn: () => Promise<unknown>): Promise<number> {
  return (await statementsOf(t.app.deps.database, fn)).filter((sql) => sql.includes('"visitor_tokens"')).length;
}

const restFrom = (address: string, token: string) =>
  new HttpClient(t.url).request('/visitor/data/get', {
    headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': address },
  });

/** Spends `address`'s budget with made-up tokens, each refused as unauthenticated after a lookup. */
async function spend(address: string) {
  const lookups = await lookupsDuring(async () => {
    for (let i = 0; i < FAILURES; i++) {
      const res = await restFrom(address, `made-up-token-${address}-${i}`);
      expect(res.status).toBe(401);
    }
  });
  expect(lookups).toBe(FAILURES);
}

describe('failed visitor-token lookups are budgeted per client address (VISITOR_TOKEN_FAILURES_PER_MINUTE)', () => {
  it('REST: past the budget 1429 with Retry-After and no lookup, even with a valid token; another address is unaffected', async () => {
    const valid = await visitorToken(t.url);
    await spend('10.27.0.1');
    let refused: Response | undefined;
    let refusedValid: Response | undefined;
    const lookups = await lookupsDuring(async () => {
      refused = await restFrom('10.27.0.1', 'made-up-token-again');
      refusedValid = await restFrom('10.27.0.1', valid.token);
    });
    expect(lookups).toBe(0);
    for (const res of [refused, refusedValid]) {
      expect(res?.status).toBe(429);
      expect(Number(res?.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await res?.json()).toMatchObject({ code: 1429 });
    }
    // Another address: its failures are looked up (and counted) on its own, its valid token served.
    expect(await lookupsDuring(async () => expect((await restFrom('10.27.0.2', 'made-up')).status).toBe(401))).toBe(1);
    expect(await (await restFrom('10.27.0.2', valid.token)).json()).toMatchObject({ code: 0 });
  });

  it('GraphQL: past the budget RATE_LIMITED with no lookup', async () => {
    await spend('10.27.0.3');
    const ask = () =>
      fetch(`${t.url}/graphql`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: 'Bearer made-up-token-graphql',
          'x-forwarded-for': '10.27.0.3',
        },
        body: JSON.stringify({ query: '{ visitorBootstrap { businessHours { open } } }' }),
      }).then((r) => r.json());
    let body: { errors?: { extensions?: Record<string, unknown> }[] } = {};
    const lookups = await lookupsDuring(async () => {
      body = await ask();
    });
    expect(lookups).toBe(0);
    expect(body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED' });
  });

  it('graphql-ws: connection_init past the budget is closed 4429 with no lookup; another address gets 4403 for a bad token', async () => {
    await spend('10.27.0.4');
    const init = (address: string) => {
      const ws = new WebSocket(t.wsUrl, 'graphql-transport-ws', { headers: { 'x-forwarded-for': address } });
      const closed = new Promise<CloseInfo>((resolve) =>
        ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
      );
      ws.once('open', () =>
        ws.send(
          JSON.stringify({
            type: 'connection_init',
            payload: { appkey: 'demo-appkey', authorization: 'Bearer made-up-token-ws' },
          }),
        ),
      );
      return closed;
    };
    let closed: CloseInfo | undefined;
    const lookups = await lookupsDuring(async () => {
      closed = await init('10.27.0.4');
    });
    expect(lookups).toBe(0);
    expect(closed).toMatchObject({ code: 4429, reason: expect.stringMatching(/Too many invalid visitor tokens/) });
    expect((await init('10.27.0.5')).code).toBe(4403);
  });

  it('/pusher/auth: past the budget 429 with no lookup', async () => {
    await spend('10.27.0.6');
    let res: Response | undefined;
    const lookups = await lookupsDuring(async () => {
      res = await new HttpClient(t.url).request('/pusher/auth', {
        method: 'POST',
        headers: { authorization: 'Bearer made-up-token-pusher', 'x-forwarded-for': '10.27.0.6' },
        form: { socket_id: '1234.5678', channel_name: 'private-visitor-x' },
      });
    });
    expect(lookups).toBe(0);
    expect(res?.status).toBe(429);
    expect(Number(res?.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await res?.json()).toMatchObject({ code: 'RATE_LIMITED' });
  });
});
