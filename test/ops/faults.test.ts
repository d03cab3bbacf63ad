import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { useAppOnPrivateRedis } from '../support/private-redis-app.js';
import {
  hasPostgresBinaries,
  hasRedisServer,
  type PrivateService,
  startPrivatePostgres,
} from '../support/private-services.js';
import { describeWhen } from '../support/required.js';
import { freshStores, INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';
import { closeAllSockets, connectSocket, eventually } from '../support/ws.js';

afterEach(() => closeAllSockets());

/*
 * Required in CI (REQUIRE_FAULTS=1, which .ci/run sets after installing redis-server and the
 * PostgreSQL server binaries): there a missing binary fails instead of skipping. A request that
 * hangs while a store is down fails by the test timeout; no wall-clock bound is asserted, so a
 * loaded machine cannot make these tests flaky.
 */
describeWhen(
  hasRedisServer(),
  'REQUIRE_FAULTS',
  'faults: Redis stopped and restarted',
  'redis-server is not installed',
  () => {
    let redis: PrivateService;
    let t: TestApp;
    useAppOnPrivateRedis((made) => ({ redis, t } = made));

    it('answers 503 envelopes while Redis is down, stays up, and recovers with no restart', async () => {
      const { client } = await agentSession(t.url, 'alice');
      expect((await client.json('/agent/data/get')).body.code).toBe(0);

      await redis.stop();
      const down = await client.json('/agent/data/get');
      expect(down.status).toBe(503);
      expect(down.body).toMatchObject({ code: 1503, data: [] });
      expect(down.body.msg).not.toMatch(/redis|ECONN|stack/i);

      const ready = await fetch(`${t.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ status: 'unavailable', redis: 'unavailable' });
      expect((await fetch(`${t.url}/healthz`)).status).toBe(200);

      const captcha = await new HttpClient(t.url).request('/agent/login/logincaptcha');
      expect(captcha.status).toBe(503);

      await redis.start();
      await eventually(async () => (await fetch(`${t.url}/readyz`)).status === 200, 'readyz 200', 15_000);
      // Redis kept its data (append-only file): the Session is still valid.
      expect((await client.json('/agent/data/get')).body.code).toBe(0);
    });

    it('a live subscription survives a Redis restart and receives what is published once Redis is back, once', async () => {
      const visitor = await visitorToken(t.url);
      const { body } = await new HttpClient(t.url).json('/visitor/data/get', {
        headers: { authorization: `Bearer ${visitor.token}` },
      });
      const channel = body.data.visitor.channel as string;
      const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', authorization: `Bearer ${visitor.token}` });
      await socket.acked;
      const sub = socket.channel(channel);
      await eventually(() => sub.cursor, 'the subscribed event');

      await redis.stop();
      await redis.start();
      // The first publish accepted may land before this instance's subscriber connection is back:
      // the bus then fetches it from the channel history when that connection returns.
      await eventually(async () => {
        const res = await fetch(`${t.url}/internal/events`, {
          method: 'POST',
          headers: { authorization: `Bearer ${INTERNAL_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ channel, event: 'after.restart', data: {} }),
        });
        return res.status === 202;
      }, 'a publish accepted after the restart');
      await sub.waitFor('after.restart');
      expect(sub.names().filter((n) => n === 'after.restart')).toHaveLength(1);
    });

    it('publishing while Redis is down answers 503 rather than losing the event silently', async () => {
      await redis.stop();
      try {
        const res = await fetch(`${t.url}/internal/events`, {
          method: 'POST',
          headers: { authorization: `Bearer ${INTERNAL_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ channel: 'global-demo', event: 'test', data: {} }),
        });
        expect(res.status).toBe(503);
      } finally {
        await redis.start();
        await eventually(async () => (await fetch(`${t.url}/readyz`)).status === 200, 'readyz 200', 15_000);
      }
    });
  },
);

describeWhen(
  hasPostgresBinaries(),
  'REQUIRE_FAULTS',
  'faults: PostgreSQL stopped and restarted',
  'the PostgreSQL server binaries (initdb) are not installed',
  () => {
    let pg: PrivateService;
    let t: TestApp;
    beforeAll(async () => {
      pg = await startPrivatePostgres();
      const stores = await freshStores();
      t = await startTestApp({ stores: { ...stores, databaseUrl: pg.url } });
    });
    afterAll(async () => {
      await t?.stop();
      await pg?.destroy();
    });

    it('answers 503 while PostgreSQL is down and recovers when it is back', async () => {
      const visitor = await visitorToken(t.url);
      const bootstrap = () =>
        new HttpClient(t.url).json('/visitor/data/get', { headers: { authorization: `Bearer ${visitor.token}` } });
      expect((await bootstrap()).body.code).toBe(0);

      await pg.stop();
      const down = await bootstrap();
      expect(down.status).toBe(503);
      expect(down.body).toMatchObject({ code: 1503, data: [] });
      const ready = await fetch(`${t.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ database: 'unavailable' });

      await pg.start();
      await eventually(async () => (await bootstrap()).body.code === 0, 'bootstrap answers again', 15_000);
      expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
    });
  },
);
