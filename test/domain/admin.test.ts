import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { verifyPassword } from '../../src/auth/passwords.js';
import { agentGroups, agents, merchants } from '../../src/db/schema.js';
import {
  createAgent,
  createMerchant,
  disableAgent,
  enableAgent,
  issueOperatorVisitorToken,
  type MERCHANT_SETTING_KEYS,
  publishTestEvent,
  resetAgentPassword,
  revokeOperatorVisitorToken,
  setMerchantSetting,
} from '../../src/resolvers/admin.js';
import { agentChannel, sessionFingerprint } from '../../src/resolvers/events.js';
import { CONFIG_CHANNEL } from '../../src/resolvers/merchant-config.js';
import { agentSessionsKey } from '../../src/resolvers/session.js';
import { requireVisitor } from '../../src/resolvers/viewer.js';
import { codeOf, type Factories, recordEvents, type TestDeps, useTestDeps } from '../support/deps.js';

/** A key `merchant:set` accepts. */
type SettingKey = (typeof MERCHANT_SETTING_KEYS)[number];

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const unique = () => randomBytes(4).toString('hex');
const merchantRow = async (id: string) => (await deps.db.select().from(merchants).where(eq(merchants.id, id)))[0];
const agentRow = async (id: string) => (await deps.db.select().from(agents).where(eq(agents.id, id)))[0];
const badInput = (message: string) => ({ code: 'BAD_USER_INPUT', message });

/** A SessionTerminator (the HTTP session store's side) that records what it destroyed. */
const terminator = () => {
  const destroyed: string[] = [];
  return {
    destroyed,
    destroy: async (id: string) => {
      destroyed.push(id);
    },
  };
};

describe('createMerchant', () => {
  it('creates the merchant with its Default group, a generated appkey and identity secret, and announces it', async () => {
    const feed = recordEvents(deps, [CONFIG_CHANNEL]);
    await feed.ready;
    const bid = `shop-${unique()}`;
    const m = await createMerchant(deps, { bid, appname: 'My shop' });
    expect(m).toEqual({
      merchantId: expect.stringMatching(/^m/),
      bid,
      appname: 'My shop',
      appkey: expect.stringMatching(new RegExp(`^${bid}-\\S{12,}$`)),
      identitySecret: expect.stringMatching(/^\S{32,}$/),
    });
    expect(await merchantRow(m.merchantId)).toMatchObject({
      bid,
      appname: 'My shop',
      appkey: m.appkey,
      identitySecret: m.identitySecret,
      verified: false,
    });
    const groups = await deps.db.select().from(agentGroups).where(eq(agentGroups.merchantId, m.merchantId));
    expect(groups).toEqual([expect.objectContaining({ name: 'Default', isDefault: true })]);
    const event = await feed.first('merchant.config_changed');
    expect(event.data).toEqual({ merchant_id: m.merchantId });
    feed.stop();
  });

  it('takes the appkey and verified flag given', async () => {
    const appkey = `key_${unique()}-AB`;
    const m = await createMerchant(deps, { bid: `v${unique()}`, appname: 'Shop', appkey, verified: true });
    expect(m.appkey).toBe(appkey);
    expect(await merchantRow(m.merchantId)).toMatchObject({ appkey, verified: true });
  });

  it('refuses a bid or appkey already taken', async () => {
    const m = await createMerchant(deps, { bid: `t${unique()}`, appname: 'Shop' });
    await expect(createMerchant(deps, { bid: m.bid, appname: 'Other' })).rejects.toMatchObject(
      badInput('bid or appkey is already taken'),
    );
    await expect(
      createMerchant(deps, { bid: `t${unique()}`, appname: 'Other', appkey: m.appkey }),
    ).rejects.toMatchObject(badInput('bid or appkey is already taken'));
  });

  it('validates the bid, appname and appkey', async () => {
    const bidRule = badInput('bid must be 2-32 lowercase letters, digits, _ or -');
    for (const bid of ['a', 'Shop', '-shop', '_shop', `s${'x'.repeat(32)}`, 'sh op', 'shop!'])
      await expect(createMerchant(deps, { bid, appname: 'Shop' })).rejects.toMatchObject(bidRule);
    // The bounds themselves are fine.
    await createMerchant(deps, { bid: `${unique()}`.slice(0, 2), appname: 'Shop' }).catch((e) =>
      expect(e.message).toBe('bid or appkey is already taken'),
    );
    await createMerchant(deps, { bid: `s${unique()}${'x'.repeat(23)}`, appname: 'Shop' });
    await expect(createMerchant(deps, { bid: `t${unique()}`, appname: '   ' })).rejects.toMatchObject(
      badInput('appname is required'),
    );
    await expect(createMerchant(deps, { bid: `t${unique()}`, appname: 'x'.repeat(65) })).rejects.toMatchObject(
      badInput('appname must be at most 64 characters'),
    );
    const appkeyRule = badInput('appkey must be 8-128 letters, digits, _ or -');
    for (const appkey of ['short7c', 'has space1', `k${'x'.repeat(128)}`, 'key.with.dots'])
      await expect(createMerchant(deps, { bid: `t${unique()}`, appname: 'Shop', appkey })).rejects.toMatchObject(
        appkeyRule,
      );
  });
});

describe('setMerchantSetting', () => {
  it('switches a feature on, off, or back to not configured, keeping the other switches', async () => {
    const m = await f.merchant({ switches: { sound: 'on' } });
    const before = (await merchantRow(m.merchantId))?.settingsVersion as number;
    const on = await setMerchantSetting(deps, { bid: m.bid, key: 'voice', value: 'on' });
    expect(on).toEqual({
      bid: m.bid,
      key: 'voice',
      value: 'on',
      settingsVersion: before + 1,
      announced: expect.any(Boolean),
    });
    expect((await merchantRow(m.merchantId))?.switches).toEqual({ sound: 'on', voice: 'on' });
    await setMerchantSetting(deps, { bid: m.bid, key: 'voice', value: 'off' });
    expect((await merchantRow(m.merchantId))?.switches).toEqual({ sound: 'on', voice: 'off' });
    const unset = await setMerchantSetting(deps, { bid: m.bid, key: 'voice', value: 'unset' });
    expect(unset).toMatchObject({ value: null, settingsVersion: before + 3 });
    expect((await merchantRow(m.merchantId))?.switches).toEqual({ sound: 'on' });
    await expect(setMerchantSetting(deps, { bid: m.bid, key: 'emoji', value: 'yes' })).rejects.toMatchObject(
      badInput('emoji must be on, off or unset'),
    );
  });

  it('announces every change, so every instance drops its cached configuration', async () => {
    const m = await f.merchant();
    const feed = recordEvents(deps, [CONFIG_CHANNEL]);
    await feed.ready;
    const result = await setMerchantSetting(deps, { bid: m.bid, key: 'appname', value: 'Renamed' });
    expect(result.announced).toBe(true);
    const event = await feed.first('merchant.config_changed');
    expect(event.data).toEqual({ merchant_id: m.merchantId });
    feed.stop();
  });

  it('sets upload limits in whole bytes from 0 to 4 GiB', async () => {
    const m = await f.merchant();
    const set = (key: SettingKey, value: string) => setMerchantSetting(deps, { bid: m.bid, key, value });
    expect((await set('image_max_bytes', '1000')).value).toBe(1000);
    await set('file_max_bytes', '0');
    await set('video_max_bytes', String(4 * 1024 ** 3));
    await set('voice_max_bytes', '42');
    expect(await merchantRow(m.merchantId)).toMatchObject({
      imageMaxBytes: 1000,
      fileMaxBytes: 0,
      videoMaxBytes: 4 * 1024 ** 3,
      voiceMaxBytes: 42,
    });
    for (const value of ['-1', '1.5', 'abc', '', '1e3', '1234567890123'])
      await expect(set('image_max_bytes', value)).rejects.toMatchObject(
        badInput('image_max_bytes must be a whole number'),
      );
    await expect(set('image_max_bytes', String(4 * 1024 ** 3 + 1))).rejects.toMatchObject(
      badInput('image_max_bytes must be between 0 and 4294967296'),
    );
  });

  it('sets the chat settings within their bounds', async () => {
    const m = await f.merchant();
    const set = (key: SettingKey, value: string) => setMerchantSetting(deps, { bid: m.bid, key, value });
    await set('max_concurrent_chats', '1');
    expect((await merchantRow(m.merchantId))?.maxConcurrentChats).toBe(1);
    await set('max_concurrent_chats', '1000');
    await set('idle_close_minutes', '0');
    expect((await merchantRow(m.merchantId))?.idleCloseMinutes).toBe(0);
    await set('idle_close_minutes', '10080');
    expect(await merchantRow(m.merchantId)).toMatchObject({ maxConcurrentChats: 1000, idleCloseMinutes: 10080 });
    await expect(set('max_concurrent_chats', '0')).rejects.toMatchObject(
      badInput('max_concurrent_chats must be between 1 and 1000'),
    );
    expect(await codeOf(set('max_concurrent_chats', '1001'))).toBe('BAD_USER_INPUT');
    await expect(set('idle_close_minutes', '10081')).rejects.toMatchObject(
      badInput('idle_close_minutes must be between 0 and 10080'),
    );
  });

  it('renames the merchant; a blank name is refused', async () => {
    const m = await f.merchant();
    expect((await setMerchantSetting(deps, { bid: m.bid, key: 'appname', value: 'New name' })).value).toBe('New name');
    expect((await merchantRow(m.merchantId))?.appname).toBe('New name');
    await expect(setMerchantSetting(deps, { bid: m.bid, key: 'appname', value: '  ' })).rejects.toMatchObject(
      badInput('appname is required'),
    );
  });

  it('refuses an unknown merchant or key', async () => {
    await expect(setMerchantSetting(deps, { bid: 'nobody-here', key: 'voice', value: 'on' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      message: 'No merchant with bid nobody-here',
    });
    const m = await f.merchant();
    expect(await codeOf(setMerchantSetting(deps, { bid: m.bid, key: 'paid' as never, value: '1' }))).toBe(
      'BAD_USER_INPUT',
    );
  });
});

describe('createAgent', () => {
  it('creates an agent in the Default group, with a generated password shown once that logs in', async () => {
    const m = await f.merchant();
    const username = `Agent.${unique()}`;
    const created = await createAgent(deps, { bid: m.bid, username });
    expect(created).toEqual({
      agentId: expect.stringMatching(/^a/),
      username,
      bid: m.bid,
      level: 'agent',
      password: expect.stringMatching(/^[A-Za-z0-9_-]{16}$/),
    });
    const row = await agentRow(created.agentId);
    const [group] = await deps.db.select().from(agentGroups).where(eq(agentGroups.merchantId, m.merchantId));
    expect(row).toMatchObject({ merchantId: m.merchantId, groupId: group?.id, nickname: username, level: 'agent' });
    expect(await verifyPassword(row?.passwordHash, created.password as string)).toBe(true);
  });

  it('takes the password, nickname, level and group given (the password is not echoed)', async () => {
    const m = await f.merchant();
    const salesId = `g_${unique()}`;
    await deps.db.insert(agentGroups).values({ id: salesId, merchantId: m.merchantId, name: 'Sales' });
    const created = await createAgent(deps, {
      bid: m.bid,
      username: `boss-${unique()}`,
      password: 'a-good-password',
      nickname: 'The Boss',
      level: 'admin',
      group: 'Sales',
    });
    expect(created).not.toHaveProperty('password');
    const row = await agentRow(created.agentId);
    expect(row).toMatchObject({ nickname: 'The Boss', level: 'admin' });
    expect(row?.groupId).toBe(salesId);
    expect(await verifyPassword(row?.passwordHash, 'a-good-password')).toBe(true);
  });

  it('refuses an unknown group, an unknown merchant, a taken username (any case) and a bad input', async () => {
    const m = await f.merchant();
    await expect(createAgent(deps, { bid: m.bid, username: `x${unique()}`, group: 'Nope' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      message: `No agent group Nope in merchant ${m.bid}`,
    });
    expect(await codeOf(createAgent(deps, { bid: 'nobody-here', username: `x${unique()}` }))).toBe('NOT_FOUND');
    const username = `dup-${unique()}`;
    await createAgent(deps, { bid: m.bid, username, password: 'password-1' });
    await expect(
      createAgent(deps, { bid: m.bid, username: username.toUpperCase(), password: 'password-1' }),
    ).rejects.toMatchObject(badInput('username is already taken'));
    await expect(createAgent(deps, { bid: m.bid, username: 'with space' })).rejects.toMatchObject(
      badInput('username must be 1-64 letters, digits or _ . @ -'),
    );
    await expect(createAgent(deps, { bid: m.bid, username: `x${unique()}`, password: 'short' })).rejects.toMatchObject(
      badInput('password must be at least 8 characters'),
    );
    await expect(
      createAgent(deps, { bid: m.bid, username: `x${unique()}`, password: 'p'.repeat(257) }),
    ).rejects.toMatchObject(badInput('password must be at most 256 characters'));
    expect(await codeOf(createAgent(deps, { bid: m.bid, username: `x${unique()}`, level: 'root' as never }))).toBe(
      'BAD_USER_INPUT',
    );
  });
});

describe('Disabling an agent, resetting a password', () => {
  /** An agent with two Sessions in its index, and a recorder of its channel. */
  async function agentWithSessions() {
    const m = await f.merchant();
    const agent = await f.agent(m);
    const sessions = [`s1-${unique()}`, `s2-${unique()}`];
    for (const id of sessions) await deps.kv.addToSet(agentSessionsKey(agent.agentId), id, 3600);
    const feed = recordEvents(deps, [agentChannel(agent.agentId)]);
    await feed.ready;
    return { agent, username: agent.agent.username, sessions, feed };
  }

  it('disabling ends every Session of the agent and announces them (reason disabled); enabling lets it back', async () => {
    const a = await agentWithSessions();
    const store = terminator();
    const result = await disableAgent(deps, { username: a.username.toUpperCase() }, store);
    expect(result).toEqual({ agentId: a.agent.agentId, username: a.username, disabled: true, sessionsEnded: 2 });
    expect(store.destroyed.sort()).toEqual([...a.sessions].sort());
    expect(await deps.kv.members(agentSessionsKey(a.agent.agentId))).toEqual([]);
    expect((await agentRow(a.agent.agentId))?.disabled).toBe(true);
    const ended = await a.feed.first('session.ended');
    expect((ended.data as { reason: string }).reason).toBe('disabled');
    expect((ended.data as { sessions: string[] }).sessions.sort()).toEqual(a.sessions.map(sessionFingerprint).sort());
    a.feed.stop();

    expect(await enableAgent(deps, { username: a.username })).toEqual({
      agentId: a.agent.agentId,
      username: a.username,
      disabled: false,
    });
    expect((await agentRow(a.agent.agentId))?.disabled).toBe(false);
  });

  it('an agent without Sessions: nothing to end, nothing announced', async () => {
    const m = await f.merchant();
    const agent = await f.agent(m);
    const feed = recordEvents(deps, [agentChannel(agent.agentId)]);
    await feed.ready;
    const result = await disableAgent(deps, { username: agent.agent.username }, terminator());
    expect(result.sessionsEnded).toBe(0);
    // A marker published after it arrives alone.
    await deps.bus.publish(agentChannel(agent.agentId), 'test.marker', {});
    await feed.first('test.marker');
    expect(feed.of('session.ended')).toEqual([]);
    feed.stop();
  });

  it('resetting a password sets the new one, ends every Session (reason password_reset)', async () => {
    const a = await agentWithSessions();
    const store = terminator();
    const result = await resetAgentPassword(deps, { username: a.username, password: 'brand-new-password' }, store);
    expect(result).toEqual({ agentId: a.agent.agentId, username: a.username, sessionsEnded: 2 });
    expect(store.destroyed).toHaveLength(2);
    const row = await agentRow(a.agent.agentId);
    expect(await verifyPassword(row?.passwordHash, 'brand-new-password')).toBe(true);
    expect(await verifyPassword(row?.passwordHash, 'test-password-1')).toBe(false);
    expect(((await a.feed.first('session.ended')).data as { reason: string }).reason).toBe('password_reset');
    a.feed.stop();

    const generated = await resetAgentPassword(deps, { username: a.username }, terminator());
    expect(generated.password).toMatch(/^[A-Za-z0-9_-]{16}$/);
    expect(await verifyPassword((await agentRow(a.agent.agentId))?.passwordHash, generated.password as string)).toBe(
      true,
    );
  });

  it('refuses an unknown agent', async () => {
    await expect(enableAgent(deps, { username: `nobody-${unique()}` })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(disableAgent(deps, { username: 'nobody-x' }, terminator())).rejects.toMatchObject({
      code: 'NOT_FOUND',
      message: 'No agent nobody-x',
    });
    expect(await codeOf(resetAgentPassword(deps, { username: 'nobody-x' }, terminator()))).toBe('NOT_FOUND');
  });
});

describe('Operator visitor tokens and test events', () => {
  it('issues an anonymous token, or one for a user id signed with the merchant’s secret (same uid every time)', async () => {
    const m = await f.merchant();
    const anonymous = await issueOperatorVisitorToken(deps, { appkey: m.appkey, nickname: 'Lily', lang: 'fr' });
    expect((await requireVisitor(deps, anonymous.token)).merchantId).toBe(m.merchantId);
    const first = await issueOperatorVisitorToken(deps, { appkey: m.appkey, userId: 'crm-1' });
    const second = await issueOperatorVisitorToken(deps, { appkey: m.appkey, userId: 'crm-1' });
    expect(second.uid).toBe(first.uid);
    expect(first.uid).not.toBe(anonymous.uid);
    for (const input of [{ appkey: 'no-such-appkey' }, { appkey: 'no-such-appkey', userId: 'crm-1' }])
      await expect(issueOperatorVisitorToken(deps, input)).rejects.toMatchObject({
        code: 'APPKEY_INVALID',
        message: 'Unknown appkey',
      });
  });

  it('revokes a token once', async () => {
    const m = await f.merchant();
    const issued = await issueOperatorVisitorToken(deps, { appkey: m.appkey });
    expect(await revokeOperatorVisitorToken(deps, { token: issued.token })).toEqual({ revoked: true });
    expect(await revokeOperatorVisitorToken(deps, { token: issued.token })).toEqual({ revoked: false });
    expect(await codeOf(requireVisitor(deps, issued.token))).toBe('VISITOR_UNAUTHENTICATED');
  });

  it('publishes a test event as POST /internal/events does', async () => {
    const channel = `test-${unique()}`;
    const feed = recordEvents(deps, [channel]);
    await feed.ready;
    const published = await publishTestEvent(deps, { channel, event: 'demo.ping', data: { n: 1 } });
    expect(published).toEqual({ id: expect.stringMatching(/^\d+-\d+$/), channel, event: 'demo.ping' });
    const event = await feed.first('demo.ping');
    expect(event).toMatchObject({ id: published.id, data: { n: 1 } });
    feed.stop();
    expect(await codeOf(publishTestEvent(deps, { channel, event: 'bad name' }))).toBe('BAD_USER_INPUT');
  });
});
