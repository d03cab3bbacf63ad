import { describe, expect, it } from 'vitest';
import { BackendUnavailableError, classifyError } from '../../src/errors.js';
import { agentSession, HttpClient } from '../support/clients.js';
import { useAppOnPrivateRedis } from '../support/private-redis-app.js';
import { hasRedisServer, type PrivateService } from '../support/private-services.js';
import { describeWhen } from '../support/required.js';
import type { TestApp } from '../support/test-app.js';
import { closeAllSockets, connectSocket, eventually } from '../support/ws.js';

// Issue 18 row 14: a Redis outage is "unavailable" everywhere (REST 503), recognised by error
// class and code, never by message text.
describe('infrastructure errors are classified by class and code (row 14)', () => {
  it('BackendUnavailableError, a wrapped one, and connection codes are SERVICE_UNAVAILABLE', () => {
    expect(classifyError(new BackendUnavailableError('redis')).code).toBe('SERVICE_UNAVAILABLE');
    expect(classifyError(new Error('x', { cause: new BackendUnavailableError('redis') })).code).toBe(
      'SERVICE_UNAVAILABLE',
    );
    for (const code of ['ECONNREFUSED', 'CONNECTION_CLOSED', '57P01', '08006', '53300', '57014']) {
      expect(classifyError(Object.assign(new Error('whatever'), { code })).code, code).toBe('SERVICE_UNAVAILABLE');
    }
  });

  it('message text alone does not decide: an ordinary error that mentions a connection is INTERNAL', () => {
    for (const message of ['Connection is closed.', 'Redis connection is not ready', 'ECONNREFUSED 127.0.0.1']) {
      expect(classifyError(new Error(message)).code, message).toBe('INTERNAL');
    }
  });
});

describeWhen(
  hasRedisServer(),
  'REQUIRE_FAULTS',
  'Redis outage: REST answers 503 everywhere (row 14)',
  'redis-server is not installed',
  () => {
    let redis: PrivateService;
    let t: TestApp;
    useAppOnPrivateRedis((made) => ({ redis, t } = made));

    it('POST /visitor/token, the captcha and the login answer 503 envelopes while Redis is down', async () => {
      const ok = await new HttpClient(t.url).json('/visitor/token', {
        method: 'POST',
        json: { appkey: 'demo-appkey' },
      });
      expect(ok.body.code).toBe(0);
      await redis.stop();
      try {
        const token = await new HttpClient(t.url).json('/visitor/token', {
          method: 'POST',
          json: { appkey: 'demo-appkey' },
        });
        expect(token.status).toBe(503);
        expect(token.body).toMatchObject({ code: 1503, data: [] });
        const client = new HttpClient(t.url);
        expect((await client.request('/agent/login/logincaptcha')).status).toBe(503);
        const login = await client.json('/agent/login/check', {
          method: 'POST',
          form: { username: 'alice', password: 'alice-password', captcha: 'test1' },
        });
        expect(login.status).toBe(503);
      } finally {
        await redis.start();
      }
    });

    it('a new agent socket while Redis is down closes 1013 (retry later), not 4403 (fix your identity)', async () => {
      // Logged in once the gateway is back on Redis (the test before restarted it).
      const token = await eventually(
        () =>
          agentSession(t.url, 'alice').then(
            (s) => s.token,
            () => undefined,
          ),
        'a login after the Redis restart',
        30_000,
      );
      await redis.stop();
      try {
        const socket = connectSocket(t.wsUrl, { appkey: 'demo-appkey', token });
        const closed = await socket.closed;
        expect(closed.code).toBe(1013);
      } finally {
        await redis.start();
        await closeAllSockets();
      }
    });
  },
);
