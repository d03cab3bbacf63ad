import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { WsCloseCode } from '../../src/subscriptions/close-codes.js';
import { HttpClient } from '../support/clients.js';
import { describeWhen } from '../support/required.js';
import { CAPTCHA, freshStores, INTERNAL_TOKEN, type TestStores } from '../support/test-app.js';

/**
 * The deployment of compose.yaml without Docker: two gateway processes (`node --import tsx
 * src/main.ts`, as the image runs them) on one PostgreSQL and one Redis, with the same
 * SESSION_SECRET, and a client that alternates between them the way a round-robin proxy does —
 * no sticky sessions.
 */
const REAL_SERVICES = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);
const SESSION_SECRET = 'multi-instance-test-secret-0123456789abcdef';

interface Instance {
  name: string;
  url: string;
  wsUrl: string;
  child: ChildProcess;
  output: string[];
}

function startInstance(name: string, stores: TestStores, extra: Record<string, string>): Promise<Instance> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_URL: stores.databaseUrl,
    REDIS_URL: stores.redisUrl,
    REDIS_PREFIX: stores.redisPrefix,
    SESSION_SECRET,
    INTERNAL_API_TOKEN: INTERNAL_TOKEN,
    CAPTCHA_TEST_ANSWER: CAPTCHA,
    TRUST_PROXY: 'on',
    LOG_LEVEL: 'info',
    ...extra,
  };
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  child.stderr?.on('data', (d) => output.push(String(d)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name} did not listen within 60 s:\n${output.join('')}`)),
      60_000,
    );
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}:\n${output.join('')}`)));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      output.push(line);
      try {
        const entry = JSON.parse(line) as { msg?: string; port?: number };
        if (entry.msg === 'parley listening' && entry.port) {
          clearTimeout(timer);
          resolve({
            name,
            url: `http://127.0.0.1:${entry.port}`,
            wsUrl: `ws://127.0.0.1:${entry.port}/graphql`,
            child,
            output,
          });
        }
      } catch {
        // not a JSON log line
      }
    });
  });
}

async function stopInstance(instance: Instance | undefined) {
  if (!instance || instance.child.exitCode !== null) return;
  const exited = new Promise((resolve) => instance.child.once('exit', resolve));
  instance.child.kill('SIGTERM');
  await exited;
}

async function until(check: () => boolean, what: string, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describeWhen(
  REAL_SERVICES,
  'REQUIRE_SERVICES',
  'two gateway instances on one PostgreSQL and one Redis',
  'DATABASE_URL or REDIS_URL is unset (the embedded stores are single-process by design)',
  () => {
    let stores: TestStores;
    let a: Instance | undefined;
    let b: Instance | undefined;

    beforeAll(async () => {
      stores = await freshStores();
      // Started together: both migrate the fresh database at once (under the advisory lock).
      [a, b] = await Promise.all([
        startInstance('gateway-1', stores, { DEMO_SEED: 'on' }),
        startInstance('gateway-2', stores, { DEMO_SEED: 'off' }),
      ]);
    }, 120_000);
    afterAll(async () => {
      await Promise.all([stopInstance(a), stopInstance(b)]);
      await stores?.drop();
    });

    const one = () => a as Instance;
    const two = () => b as Instance;

    it('both are ready: database and Redis answer on each', async () => {
      for (const instance of [one(), two()]) {
        const res = await fetch(`${instance.url}/readyz`);
        expect(await res.json()).toEqual({ status: 'ready', database: 'ok', redis: 'ok' });
      }
    });

    it('captcha from one instance, login on the other, workbench on the first: no sticky sessions needed', async () => {
      const onA = new HttpClient(one().url);
      await onA.captcha('login');
      const onB = new HttpClient(two().url);
      onB.cookies = onA.cookies; // the same browser, routed to the other instance
      const login = await onB.json('/agent/login/check', {
        method: 'POST',
        form: { username: 'alice', password: 'alice-password', captcha: CAPTCHA },
      });
      expect(login.body.code).toBe(0);
      const token = login.body.data.token as string;

      const byToken = await new HttpClient(one().url).json('/agent/data/get', { headers: { token } });
      expect(byToken.body.code).toBe(0);
      expect(byToken.body.data.agent.agent_id).toBe('a_alice');
      onA.cookies = onB.cookies;
      expect((await onA.json('/agent/data/get')).body.code).toBe(0);
    });

    it('a visitor token issued by one instance opens the bootstrap on the other', async () => {
      const issued = await new HttpClient(one().url).json('/visitor/token', {
        method: 'POST',
        json: { appkey: 'demo-appkey' },
      });
      const boot = await new HttpClient(two().url).json('/visitor/data/get', {
        headers: { authorization: `Bearer ${issued.body.data.token}` },
      });
      expect(boot.body.code).toBe(0);
      expect(boot.body.data.visitor.uid).toBe(issued.body.data.uid);
    });

    it('an event published on one instance reaches a subscriber on the other; a logout there ends it', async () => {
      const login = await new HttpClient(one().url).login('alice');
      const token = login.body.data.token as string;
      const events: { event: string; data: unknown }[] = [];
      let closed: number | undefined;
      const client = createClient({
        url: two().wsUrl,
        webSocketImpl: WebSocket,
        connectionParams: { appkey: 'demo-appkey', token },
        retryAttempts: 0,
        // Not lazy: the client would close (1000) itself as soon as its one subscription completes.
        lazy: false,
        onNonLazyError: () => {}, // the close is recorded below
        on: {
          closed: (e) => {
            closed = (e as { code: number }).code;
          },
        },
      });
      let completed = false;
      client.subscribe(
        { query: 'subscription { channel(name: "global-demo") { event data } }' },
        {
          next: (r) => events.push((r.data as { channel: { event: string; data: unknown } }).channel),
          error: () => {
            completed = true;
          },
          complete: () => {
            completed = true;
          },
        },
      );
      // The subscription is registered on gateway-2 once its `subscribed` event arrives.
      await until(() => events.some((e) => e.event === 'subscribed'), 'the subscribed event');
      const res = await fetch(`${one().url}/internal/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${INTERNAL_TOKEN}` },
        body: JSON.stringify({ channel: 'global-demo', event: 'multi.ping', data: { from: 'gateway-1' } }),
      });
      expect(res.status).toBe(202);
      await until(() => events.some((e) => e.event === 'multi.ping'), 'the event to cross instances');
      expect(events.filter((e) => e.event === 'multi.ping')).toEqual([
        { event: 'multi.ping', data: { from: 'gateway-1' } },
      ]);

      const logout = await new HttpClient(one().url).json('/agent/logout', { method: 'POST', headers: { token } });
      expect(logout.body.code).toBe(0);
      // The logout on gateway-1 ends the subscription on gateway-2 with session.ended, then 4401.
      await until(() => closed !== undefined, 'the socket to close');
      expect(events.at(-1)).toMatchObject({ event: 'session.ended', data: { reason: 'logout' } });
      expect(completed).toBe(true);
      expect(closed).toBe(WsCloseCode.SessionEnded);
      await client.dispose();
    });

    it('each instance exposes its metrics, with Redis and PostgreSQL up', async () => {
      for (const instance of [one(), two()]) {
        const text = await (await fetch(`${instance.url}/metrics`)).text();
        expect(text).toMatch(/^parley_backend_up\{backend="postgres"\} 1$/m);
        expect(text).toMatch(/^parley_backend_up\{backend="redis"\} 1$/m);
      }
    });
  },
);
