import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelEvent } from '../../src/stores/bus.js';
import { HttpClient, visitorToken } from '../support/clients.js';
import { INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';
import { bearer, postVisitorToken } from './bootstrap.fixtures.js';

// Issue 18 row 5 (visitor.online flood, display names) and the info row (lang, names, the
// gateway's own event names).
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t?.stop());

/** Collects the events of `channel` from the real bus until `stop()`. */
function watch(channel: string) {
  const controller = new AbortController();
  const events: ChannelEvent[] = [];
  const started = (async () => {
    const iterator = t.app.deps.bus.subscribe(channel, { signal: controller.signal });
    let first = true;
    const ready = new Promise<void>((resolve) => {
      void (async () => {
        try {
          for await (const event of iterator) {
            if (first) resolve();
            first = false;
            events.push(event);
          }
        } catch {
          // aborted
        }
      })();
    });
    await ready;
  })();
  return {
    events,
    started,
    /** Waits (with a deadline) until `predicate` holds over the events seen so far. */
    async until(predicate: (events: ChannelEvent[]) => boolean, what: string) {
      const deadline = Date.now() + 10_000;
      while (!predicate(events)) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
    stop: () => controller.abort(),
  };
}

const BOOTSTRAP_X10 = `{ ${Array.from({ length: 10 }, (_, i) => `b${i}: visitorBootstrap { visitor { uid } }`).join(' ')} }`;

describe('visitor.online: once per visitor per interval (row 5)', () => {
  it('40 bootstraps × 10 aliases (GraphQL) and 20 REST bootstraps publish visitor.online once', async () => {
    const global = watch('global-demo');
    await global.started;
    const { token, uid } = await visitorToken(t.url, 'demo-appkey');
    const client = new HttpClient(t.url);
    const answers = await Promise.all(
      Array.from({ length: 40 }, () => client.graphql(BOOTSTRAP_X10, undefined, bearer(token))),
    );
    for (const a of answers) expect(a.body.errors).toBeUndefined();
    for (let i = 0; i < 20; i++) {
      const { body } = await client.json('/visitor/data/get', { headers: bearer(token) });
      expect(body.code).toBe(0);
    }
    // A sentinel published after every bootstrap answered: once it arrives, count.
    await t.app.deps.bus.publish('global-demo', 'test.sentinel', {});
    await global.until((e) => e.some((x) => x.event === 'test.sentinel'), 'the sentinel');
    const online = global.events.filter((e) => e.event === 'visitor.online' && (e.data as { uid: string }).uid === uid);
    expect(online).toHaveLength(1);

    // Another visitor is announced on its own.
    const other = await visitorToken(t.url, 'demo-appkey');
    await client.json('/visitor/data/get', { headers: bearer(other.token) });
    await global.until(
      (e) => e.some((x) => x.event === 'visitor.online' && (x.data as { uid: string }).uid === other.uid),
      'the second visitor',
    );
    global.stop();
  });

  it('a nickname with bidirectional overrides or control characters is refused at input', async () => {
    for (const nickname of [
      'evil\u202Egnp.exe',
      'a\u2066b',
      'line\nbreak',
      'tab\there',
      'cr\rhere',
      'x\u200Fy',
      'c1\u0085',
    ]) {
      const { status, body } = await postVisitorToken(t.url, { appkey: 'demo-appkey', nickname });
      expect(status, JSON.stringify(nickname)).toBe(400);
      expect(body.code).toBe(1000);
      expect(body.msg).toMatch(/nickname/);
    }
    const { body } = await postVisitorToken(t.url, { appkey: 'demo-appkey', nickname: 'Zoë 李 🙂' });
    expect(body.code).toBe(0);
  });

  it('the GraphQL issueVisitorToken refuses them too', async () => {
    const res = await new HttpClient(t.url).graphql(
      'mutation($n: String) { issueVisitorToken(appkey: "demo-appkey", nickname: $n) { token } }',
      { n: 'evil\u202Egnp.exe' },
    );
    expect(res.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
  });
});

describe('input caps (info row)', () => {
  it('lang is a language tag of at most 35 characters', async () => {
    const long = `en${'-abcdefgh'.repeat(6000)}`;
    const tooLong = await postVisitorToken(t.url, { appkey: 'demo-appkey', lang: long });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.code).toBe(1000);
    const five = await postVisitorToken(t.url, { appkey: 'demo-appkey', lang: 'en-aaaa-bbbb-cccc-dddd-eeee' });
    expect(five.body.code).toBe(1000);
    for (const lang of ['en', 'zh-CN', 'zh-Hant-TW', 'sr-Latn-RS']) {
      const { body } = await postVisitorToken(t.url, { appkey: 'demo-appkey', lang });
      expect(body.code, lang).toBe(0);
    }
  });
});

describe('POST /internal/events cannot publish the gateway’s own events (info row)', () => {
  const post = (event: string) =>
    new HttpClient(t.url).json('/internal/events', {
      method: 'POST',
      headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
      json: { channel: 'global-demo', event, data: { reason: 'logout', sessions: [] } },
    });

  it('session.ended, history.gap, subscribed, typing, visitor.online and the agent./message./conversation. namespaces are refused', async () => {
    for (const event of [
      'session.ended',
      'history.gap',
      'subscribed',
      'typing',
      'visitor.online',
      'agent.login',
      'agent.anything',
      'message.created',
      'message.new',
      'conversation.closed',
      'Session.Ended',
      'pusher:subscription_succeeded',
      'pusher_internal:member_added',
    ]) {
      const { status, body } = await post(event);
      expect(status, event).toBe(400);
      expect(body.code, event).toBe(1000);
    }
  });

  it('other names are published', async () => {
    const { status, body } = await post('shop.order_paid');
    expect(status).toBe(202);
    expect(body.code).toBe(0);
  });
});
