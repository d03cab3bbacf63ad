import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ConfigError, loadConfig } from '../src/config.js';
import { freePort } from './support/private-services.js';
import { startTestApp, type TestApp } from './support/test-app.js';

describe('configuration', () => {
  it('has safe defaults on a bare machine: port 3000, embedded PGlite, in-process stores, demo data', () => {
    const config = loadConfig({});
    expect(config.port).toBe(3000);
    expect(config.databaseUrl).toBeUndefined();
    expect(config.pgliteDir).toBe('.data/pglite');
    expect(config.redisUrl).toBeUndefined();
    expect(config.demoSeed).toBe(true);
  });

  it('names the bad variable, without a stack trace', () => {
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(ConfigError);
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/PORT/);
    expect(() => loadConfig({ REDIS_URL: 'http://x' })).toThrow(/REDIS_URL/);
    expect(() => loadConfig({ SMS_DRIVER: 'webhook' })).toThrow(/SMS_WEBHOOK_URL/);
  });

  it('refuses to start in production without secrets and stores, or with a test-only switch', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(/SESSION_SECRET[\s\S]*DATABASE_URL[\s\S]*REDIS_URL/);
    const production = {
      NODE_ENV: 'production',
      SESSION_SECRET: 'x'.repeat(40),
      DATABASE_URL: 'postgres://localhost/db',
      REDIS_URL: 'redis://localhost:6379',
    };
    expect(loadConfig(production).demoSeed).toBe(false);
    expect(() => loadConfig({ ...production, CAPTCHA_TEST_ANSWER: 'abc' })).toThrow(/CAPTCHA_TEST_ANSWER/);
    expect(() => loadConfig({ ...production, DEMO_SEED: 'on' })).toThrow(/DEMO_SEED/);
  });
});

describe('health', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.stop());

  it('GET /healthz says the process is alive', async () => {
    const res = await fetch(`${t.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('GET /readyz reports the database and Redis', async () => {
    const res = await fetch(`${t.url}/readyz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      status: 'ready',
      database: 'ok',
      redis: t.config.redisUrl ? 'ok' : 'not configured',
    });
  });

  it('migrations are idempotent: applying them again changes nothing', async () => {
    await t.app.deps.database.migrate();
    const res = await fetch(`${t.url}/readyz`);
    expect(res.status).toBe(200);
  });

  it('unknown paths answer a 404 envelope', async () => {
    const res = await fetch(`${t.url}/nope`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: 1404, data: [] });
  });
});

describe('graceful shutdown', () => {
  it('SIGTERM stops the server process with exit code 0, closing its sockets with 1001', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: {
        ...process.env,
        PORT: String(port),
        HOST: '127.0.0.1',
        PGLITE_DIR: 'memory://',
        DATABASE_URL: '',
        REDIS_URL: '',
        LOG_LEVEL: 'warn',
      },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 30_000;
      while (
        !(await fetch(`http://127.0.0.1:${port}/healthz`)
          .then((r) => r.ok)
          .catch(() => false))
      ) {
        if (Date.now() > deadline) throw new Error('server did not start');
        await new Promise((r) => setTimeout(r, 200));
      }
      const socket = new WebSocket(`ws://127.0.0.1:${port}/graphql`, 'graphql-transport-ws');
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
      child.kill('SIGTERM');
      expect(await closed).toBe(1001);
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
