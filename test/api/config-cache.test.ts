import { setTimeout as sleep } from 'node:timers/promises';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCommand } from '../../src/cli/commands.js';
import { runCli } from '../../src/cli/main.js';
import { merchants, visitorTokens } from '../../src/db/schema.js';
import { authorizeChannel } from '../../src/resolvers/channels.js';
import { CONFIG_CHANNEL, CONFIG_SAFETY_TTL_MS, VISITOR_TOKEN_CACHE_MS } from '../../src/resolvers/merchant-config.js';
import { hashToken } from '../../src/resolvers/viewer.js';
import { HttpClient, visitorToken } from '../support/clients.js';
import { describeWhen } from '../support/required.js';
import { freshStores, startTestApp, type TestApp, type TestStores, withClockAhead } from '../support/test-app.js';

/**
 * docs/operations.md "Configuration cache": merchants' configuration and visitor token checks are kept in
 * memory on each instance, dropped everywhere when a write path announces a change, and in any
 * case after a safety TTL (configuration) or 1 s (token checks).
 */

const REAL_SERVICES = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);
/** How long a test waits for a condition that the design says holds within milliseconds. */
const DEADLINE_MS = 5_000;

async function visitorData(base: string, token: string) {
  return new HttpClient(base).json('/visitor/data/get', { headers: { authorization: `Bearer ${token}` } });
}

/** Polls `probe` until it returns true or the deadline passes; resolves with the last answer. */
async function eventually(probe: () => Promise<boolean>, deadlineMs = DEADLINE_MS): Promise<boolean> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
}

/** A CLI command in-process on the app's own deps (the embedded database is single-process). */
async function cliOn(t: TestApp, ...argv: string[]) {
  let out = '';
  let err = '';
  const code = await runCommand(
    {
      deps: t.app.deps,
      sessions: { destroy: async () => {} },
      env: {},
      io: { out: (s) => (out += s), err: (s) => (err += s) },
    },
    argv,
  );
  return { code, err, json: out ? JSON.parse(out) : undefined };
}

describe('one instance (whatever the stores)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t?.stop());

  it('the cache listens once the gateway has started', () => {
    expect(t.app.deps.configCache.listening).toBe(true);
  });

  it('merchant:set answers the new value on the next bootstrap at once, and bumps settings_version', async () => {
    const { token } = await visitorToken(t.url);
    const before = (await visitorData(t.url, token)).body.data.setting;
    expect(before.voice).toBe('on');
    const [row] = await t.app.deps.db
      .select({ v: merchants.settingsVersion })
      .from(merchants)
      .where(eq(merchants.id, 'm_demo'));

    const set = await cliOn(t, 'merchant:set', '--bid', 'demo', '--key', 'voice', '--value', 'off');
    expect(set.code).toBe(0);
    expect(set.json).toMatchObject({ bid: 'demo', key: 'voice', value: 'off', settingsVersion: (row?.v ?? 0) + 1 });
    // No waiting: the writing instance dropped its copy before answering.
    expect((await visitorData(t.url, token)).body.data.setting.voice).toBe('off');

    expect((await cliOn(t, 'merchant:set', '--bid', 'demo', '--key', 'voice', '--value', 'unset')).code).toBe(0);
    expect((await visitorData(t.url, token)).body.data.setting).not.toHaveProperty('voice');
    expect((await cliOn(t, 'merchant:set', '--bid', 'demo', '--key', 'voice', '--value', 'on')).code).toBe(0);
  });

  it('merchant:set changes upload limits and the appname, as the workbench and the bootstrap show them', async () => {
    const { token } = await visitorToken(t.url, 'acme-appkey');
    expect((await visitorData(t.url, token)).body.data.setting.upload_limits.image_max_bytes).toBe(20971520);
    expect(
      (await cliOn(t, 'merchant:set', '--bid', 'acme', '--key', 'image_max_bytes', '--value', '1048576')).code,
    ).toBe(0);
    expect((await visitorData(t.url, token)).body.data.setting.upload_limits.image_max_bytes).toBe(1048576);
    expect((await cliOn(t, 'merchant:set', '--bid', 'acme', '--key', 'appname', '--value', 'Acme Help')).code).toBe(0);
    expect((await visitorData(t.url, token)).body.data.setting.appname).toBe('Acme Help');
    await cliOn(t, 'merchant:set', '--bid', 'acme', '--key', 'image_max_bytes', '--value', '20971520');
    await cliOn(t, 'merchant:set', '--bid', 'acme', '--key', 'appname', '--value', 'Acme Support');
  });

  it('merchant:set refuses unknown keys, bad values and unknown merchants (exit code 1), storing nothing', async () => {
    const bad = [
      ['--bid', 'demo', '--key', 'voice', '--value', 'maybe'],
      ['--bid', 'demo', '--key', 'image_max_bytes', '--value=-1'],
      ['--bid', 'demo', '--key', 'image_max_bytes', '--value', '1e9'],
      ['--bid', 'demo', '--key', 'max_concurrent_chats', '--value', '0'],
      ['--bid', 'demo', '--key', 'identity_secret', '--value', 'x'],
      ['--bid', 'nobody', '--key', 'voice', '--value', 'on'],
    ];
    for (const args of bad) {
      const r = await cliOn(t, 'merchant:set', ...args);
      expect([args, r.code]).toEqual([args, 1]);
      expect(r.err).toMatch(/^error: /);
    }
    const { token } = await visitorToken(t.url);
    expect((await visitorData(t.url, token)).body.data.setting.voice).toBe('on');
  });

  it('a write that announces nothing is still picked up after the safety TTL', async () => {
    const { token } = await visitorToken(t.url);
    expect((await visitorData(t.url, token)).body.data.setting.emoji).toBe('on');
    // Behind the gateway's back: no announcement, so the cached copy stays…
    await t.app.deps.db
      .update(merchants)
      .set({ switches: { ...(await switchesOf(t, 'm_demo')), emoji: 'off' } })
      .where(eq(merchants.id, 'm_demo'));
    try {
      expect((await visitorData(t.url, token)).body.data.setting.emoji).toBe('on');
      // …until it is older than the TTL.
      await withClockAhead(t, CONFIG_SAFETY_TTL_MS + 1, async () => {
        expect((await visitorData(t.url, token)).body.data.setting.emoji).toBe('off');
      });
    } finally {
      await t.app.deps.db
        .update(merchants)
        .set({ switches: { ...(await switchesOf(t, 'm_demo')), emoji: 'on' } })
        .where(eq(merchants.id, 'm_demo'));
      await t.app.deps.configCache.announceChanged('m_demo');
    }
  });

  it('a revoked visitor token is refused at once on the instance that revoked it', async () => {
    const { token } = await visitorToken(t.url);
    expect((await visitorData(t.url, token)).body.code).toBe(0);
    expect((await cliOn(t, 'visitor-token:revoke', `--token=${token}`)).json).toEqual({ revoked: true });
    expect((await visitorData(t.url, token)).body.code).toBe(1401);
  });

  it('a token check is never reused for more than 1 s, nor past the token’s expiry, even with its revocation lost', async () => {
    const { token } = await visitorToken(t.url);
    expect((await visitorData(t.url, token)).body.code).toBe(0);
    // Revoked behind the gateway's back (as if the announcement were lost).
    await t.app.deps.db
      .update(visitorTokens)
      .set({ revokedAt: new Date() })
      .where(eq(visitorTokens.tokenHash, hashToken(token)));
    await withClockAhead(t, VISITOR_TOKEN_CACHE_MS, async () => {
      expect((await visitorData(t.url, token)).body.code).toBe(1401);
    });

    const fresh = await visitorToken(t.url);
    expect((await visitorData(t.url, fresh.token)).body.code).toBe(0);
    const ttl = t.app.deps.config.visitorTokenTtlSeconds * 1000;
    await withClockAhead(t, ttl + 1, async () => {
      expect((await visitorData(t.url, fresh.token)).body.code).toBe(1401);
    });
  });

  it('no client identity may subscribe to the internal channel', () => {
    const visitor = { kind: 'visitor', visitorId: 'v', merchantId: 'm', bid: 'demo', channel: 'visitor-x' } as const;
    expect(() => authorizeChannel(visitor, CONFIG_CHANNEL)).toThrow(/Not allowed/);
    const agent = { kind: 'agent', agentId: 'a_alice', merchantId: 'm_demo', bid: 'demo', level: 'agent' } as never;
    expect(() => authorizeChannel(agent, CONFIG_CHANNEL)).toThrow(/Not allowed/);
  });
});

const switchesOf = async (t: TestApp, id: string) =>
  (await t.app.deps.db.select({ s: merchants.switches }).from(merchants).where(eq(merchants.id, id)))[0]?.s ?? {};

describeWhen(
  REAL_SERVICES,
  'REQUIRE_SERVICES',
  'two instances sharing PostgreSQL and Redis',
  'DATABASE_URL and REDIS_URL are not both set',
  () => {
    let stores: TestStores;
    let a: TestApp;
    let b: TestApp;
    beforeAll(async () => {
      stores = await freshStores();
      a = await startTestApp({ stores });
      b = await startTestApp({ stores });
    });
    afterAll(async () => {
      await a?.stop();
      await b?.stop();
      await stores?.drop();
    });

    /** The CLI as an operator runs it: its own process state, the same database and Redis. */
    async function cli(...argv: string[]) {
      let out = '';
      const code = await runCli(
        argv,
        {
          NODE_ENV: 'test',
          LOG_LEVEL: 'warn',
          DATABASE_URL: stores.databaseUrl,
          REDIS_URL: stores.redisUrl,
          REDIS_PREFIX: stores.redisPrefix,
        },
        { out: (s) => (out += s), err: () => {} },
      );
      return { code, json: out ? JSON.parse(out) : undefined };
    }

    it('a setting changed through the CLI is answered by both instances’ bootstraps (within the documented bound)', async () => {
      const { token } = await visitorToken(a.url);
      // Both instances have the old value cached.
      for (const t of [a, b]) expect((await visitorData(t.url, token)).body.data.setting.sound).toBe('on');

      expect((await cli('merchant:set', '--bid', 'demo', '--key', 'sound', '--value', 'off')).code).toBe(0);
      for (const t of [a, b]) {
        const seen = await eventually(async () => (await visitorData(t.url, token)).body.data.setting.sound === 'off');
        expect(seen).toBe(true);
      }
      expect((await cli('merchant:set', '--bid', 'demo', '--key', 'sound', '--value', 'on')).code).toBe(0);
      expect(await eventually(async () => (await visitorData(b.url, token)).body.data.setting.sound === 'on')).toBe(
        true,
      );
    });

    it('a change made on one instance is seen by the other instance’s workbench too', async () => {
      const login = async (base: string) => {
        const client = new HttpClient(base);
        const { body } = await client.login('alice');
        expect(body.code).toBe(0);
        return client;
      };
      const onB = await login(b.url);
      const appname = async () => (await onB.json('/agent/data/get')).body.data.setting.appname;
      expect(await appname()).toBe('Demo Shop');
      expect((await cliOn(a, 'merchant:set', '--bid', 'demo', '--key', 'appname', '--value', 'Demo Store')).code).toBe(
        0,
      );
      expect(await eventually(async () => (await appname()) === 'Demo Store')).toBe(true);
      await cliOn(a, 'merchant:set', '--bid', 'demo', '--key', 'appname', '--value', 'Demo Shop');
    });

    it('a revoked token is refused on both instances within 1 s of its revocation', async () => {
      const { token } = await visitorToken(a.url);
      for (const t of [a, b]) expect((await visitorData(t.url, token)).body.code).toBe(0);
      const revoked = await new HttpClient(a.url).json('/visitor/token/revoke', {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(revoked.body.data).toEqual({ revoked: true });
      // The bound holds even if the announcement were lost: a check is reused for at most 1 s.
      for (const t of [a, b]) {
        expect(
          await eventually(async () => (await visitorData(t.url, token)).body.code === 1401, VISITOR_TOKEN_CACHE_MS),
        ).toBe(true);
      }
    });
  },
);
