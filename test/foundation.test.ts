import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
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
