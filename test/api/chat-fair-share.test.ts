import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Issue 27, flood fairness, over the real gateway: on a busy instance (here always busy:
 * CHAT_FAIR_SHARE_LOOP_DELAY_MS=0), a merchant whose visitors flood (refused by their budgets,
 * more than an equal share of the sends) is refused with 1429 / HTTP 429, `Retry-After: 1`,
 * before its request's body is even parsed — a malformed body gets the 429, not the 400 — while
 * another merchant's sends are all stored. The rule itself: test/domain/chat-fairness.test.ts.
 */

// The demo seed sends three messages from one visitor (on PostgreSQL it runs at start): at least 3.
const BURST = 3;
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ env: { CHAT_FAIR_SHARE_LOOP_DELAY_MS: '0', CHAT_MESSAGE_BURST: String(BURST) } });
});
afterAll(async () => {
  await t.stop();
});

const client = () => new HttpClient(t.url);
const send = (token: string, id: string) =>
  client().json('/visitor/message/send', {
    method: 'POST',
    json: { client_msg_id: id, content: 'x'.repeat(5000) },
    headers: { authorization: `Bearer ${token}` },
  });
/** A send whose body no parser accepts: answered 400 unless refused before the body is read. */
const malformed = (token: string) =>
  fetch(`${t.url}/visitor/message/send`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: '{"client_msg_id": "m", "content": ',
  });

describe('fairness between merchants on a busy instance (REST)', () => {
  it('the flooding merchant is refused 1429 with Retry-After before its body is parsed; the other merchant is never refused', async () => {
    // A fresh visitor of the other merchant each time: each within its own burst.
    const other = async (id: string) => (await send((await visitorToken(t.url, 'acme-appkey')).token, id)).body.code;
    let refusedEarly: Response | undefined;
    // The share is counted over the last second or two of real time: a slow machine may need a
    // few rounds for the flood to be seen over its share; the other merchant is checked in each.
    for (let round = 0; round < 8 && !refusedEarly; round++) {
      expect(await other(`other-${round}`)).toBe(0);
      const flooder = await visitorToken(t.url);
      // Past its burst: the flood asks for more than it gets (refused by its budget, or already
      // by its share — either way not stored).
      for (let i = 0; i <= BURST; i++) await send(flooder.token, `f-${round}-${i}`);
      const next = await malformed((await visitorToken(t.url)).token);
      if (next.status === 429) refusedEarly = next;
      else expect(next.status).toBe(400); // admitted: its body was then read, and refused as malformed
    }
    expect(refusedEarly?.status).toBe(429);
    expect(refusedEarly?.headers.get('retry-after')).toBe('1');
    const body = (await refusedEarly?.json()) as { code: number; msg: string };
    expect(body).toMatchObject({ code: 1429 });
    expect(body.msg).toMatch(/busy/);
    expect(await other('other-last')).toBe(0);
  });
});
