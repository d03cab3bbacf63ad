import { createHmac } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { merchants, visitorAttributeDefs, visitorAttributes, visitors, visitorTokens } from '../../src/db/schema.js';
import { globalChannel } from '../../src/resolvers/events.js';
import {
  findMerchantByAppkey,
  isEditable,
  loadAttributeDefs,
  loadUploadPolicy,
  uploadLimitsOf,
} from '../../src/resolvers/merchant.js';
import { CONFIG_CHANNEL } from '../../src/resolvers/merchant-config.js';
import { hashToken, requireVisitor } from '../../src/resolvers/viewer.js';
import {
  issueVisitorToken,
  loadVisitorBootstrap,
  newVisitorToken,
  revokeVisitorToken,
  userHashFor,
} from '../../src/resolvers/visitor.js';
import { announceOnline } from '../../src/resolvers/visitor-online.js';
import {
  clientIp,
  codeOf,
  eventually,
  type Factories,
  recordEvents,
  type TestDeps,
  useTestDeps,
} from '../support/deps.js';

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const secretOf = async (merchantId: string) =>
  (await deps.db.select().from(merchants).where(eq(merchants.id, merchantId)))[0]?.identitySecret as string;

describe('Visitor tokens (issueVisitorToken)', () => {
  it('issues an anonymous visitor: a new uid and channel every time, the configured lifetime', async () => {
    const m = await f.merchant();
    const t0 = Date.now();
    const first = await issueVisitorToken({ ...deps, now: () => t0 }, { appkey: m.appkey }, clientIp());
    const second = await issueVisitorToken(deps, { appkey: m.appkey }, clientIp());
    expect(first.uid).not.toBe(second.uid);
    expect(first.uid).toMatch(/^v_[0-9a-f]{20}$/);
    expect(first.token).not.toBe(second.token);
    expect(first.token).toMatch(/^[\w-]{43}$/);
    expect(first.expiresIn).toBe(deps.config.visitorTokenTtlSeconds);
    const [row] = await deps.db
      .select()
      .from(visitorTokens)
      .where(eq(visitorTokens.tokenHash, hashToken(first.token)));
    expect(row).toMatchObject({ visitorId: first.uid, merchantId: m.merchantId, revokedAt: null });
    expect(row?.expiresAt.getTime()).toBe(t0 + deps.config.visitorTokenTtlSeconds * 1000);
    const [visitor] = await deps.db.select().from(visitors).where(eq(visitors.id, first.uid));
    expect(visitor).toMatchObject({ merchantId: m.merchantId, externalUserId: null, lang: 'en' });
    expect(visitor?.nickname).toMatch(/^Visitor \d{4}$/);
    expect(visitor?.channel).toMatch(/^visitor-\S{24,}$/);
  });

  it('never issues a token that reads as an API key: such a draw is drawn again', () => {
    const draws = ['prly_first', 'prly_second', 'plain'];
    expect(newVisitorToken(() => draws.shift() ?? 'exhausted')).toBe('plain');
    expect(draws).toEqual([]);
  });

  it('keeps the nickname and language given', async () => {
    const m = await f.merchant();
    const issued = await issueVisitorToken(deps, { appkey: m.appkey, nickname: 'Lily', lang: 'zh-CN' }, clientIp());
    const [visitor] = await deps.db.select().from(visitors).where(eq(visitors.id, issued.uid));
    expect(visitor).toMatchObject({ nickname: 'Lily', lang: 'zh-CN' });
  });

  it('refuses an unknown appkey', async () => {
    await expect(issueVisitorToken(deps, { appkey: 'no-such-appkey' }, clientIp())).rejects.toMatchObject({
      code: 'APPKEY_INVALID',
      message: 'Unknown appkey',
    });
  });

  it('an identified visitor (user_hash = HMAC-SHA256 of user_id) is the same uid every time, per merchant', async () => {
    const m = await f.merchant();
    const secret = await secretOf(m.merchantId);
    const userHash = createHmac('sha256', secret).update('user-42').digest('hex');
    expect(userHashFor(secret, 'user-42')).toBe(userHash);
    const first = await issueVisitorToken(deps, { appkey: m.appkey, userId: 'user-42', userHash }, clientIp());
    const again = await issueVisitorToken(
      deps,
      { appkey: m.appkey, userId: 'user-42', userHash: userHash.toUpperCase() },
      clientIp(),
    );
    expect(again.uid).toBe(first.uid);
    const [visitor] = await deps.db.select().from(visitors).where(eq(visitors.id, first.uid));
    expect(visitor?.externalUserId).toBe('user-42');
    // The same user id at another merchant is another visitor.
    const other = await f.merchant();
    const there = await issueVisitorToken(
      deps,
      { appkey: other.appkey, userId: 'user-42', userHash: userHashFor(await secretOf(other.merchantId), 'user-42') },
      clientIp(),
    );
    expect(there.uid).not.toBe(first.uid);
  });

  it('two first requests of one identified visitor at once both get the one visitor', async () => {
    const m = await f.merchant();
    const userHash = userHashFor(await secretOf(m.merchantId), 'user-race');
    const [a, b] = await Promise.all(
      [1, 2].map(() => issueVisitorToken(deps, { appkey: m.appkey, userId: 'user-race', userHash }, clientIp())),
    );
    expect(a?.uid).toBe(b?.uid);
  });

  it('refuses a user_hash that does not match, is not 64 hex digits, or comes without its user_id', async () => {
    const m = await f.merchant();
    const good = userHashFor(await secretOf(m.merchantId), 'user-7');
    const refused = { code: 'VISITOR_IDENTITY_INVALID', message: 'user_hash does not match user_id' };
    for (const input of [
      { userId: 'user-7', userHash: userHashFor('another-secret', 'user-7') },
      { userId: 'user-8', userHash: good },
      { userId: 'user-7', userHash: `${good}00` },
      { userId: 'user-7', userHash: good.slice(0, 62) },
      { userId: 'user-7', userHash: `${good.slice(0, 63)}g` },
      { userId: 'user-7', userHash: `x${good}` },
      { userId: 'user-7' },
      { userHash: good },
      { userId: '', userHash: good },
      { userId: 'user-7', userHash: '' },
    ]) {
      await expect(issueVisitorToken(deps, { appkey: m.appkey, ...input }, clientIp())).rejects.toMatchObject(refused);
    }
  });

  it('limits each client address to 30 tokens a minute', async () => {
    const m = await f.merchant();
    const ip = clientIp();
    for (let i = 0; i < 30; i++) await issueVisitorToken(deps, { appkey: m.appkey }, ip);
    await expect(issueVisitorToken(deps, { appkey: m.appkey }, ip)).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      message: expect.stringMatching(/^Too many visitor token requests, please wait \d+ seconds$/),
    });
    // Counted before the appkey is looked at.
    expect(await codeOf(issueVisitorToken(deps, { appkey: 'no-such-appkey' }, ip))).toBe('RATE_LIMITED');
    await issueVisitorToken(deps, { appkey: m.appkey }, clientIp());
  });
});

describe('Revoking a visitor token', () => {
  it('revokes a live token at once; a second revocation, an unknown or an expired token report false', async () => {
    const m = await f.merchant();
    const issued = await issueVisitorToken(deps, { appkey: m.appkey }, clientIp());
    const at = Date.now();
    const feed = recordEvents(deps, [CONFIG_CHANNEL]);
    await feed.ready;
    expect(await revokeVisitorToken({ ...deps, now: () => at }, issued.token)).toBe(true);
    // Every instance is told to forget its cached check of the token.
    expect((await feed.first('visitor_token.revoked')).data).toEqual({ token_hash: hashToken(issued.token) });
    feed.stop();
    const [row] = await deps.db
      .select()
      .from(visitorTokens)
      .where(eq(visitorTokens.tokenHash, hashToken(issued.token)));
    expect(row?.revokedAt?.getTime()).toBe(at);
    expect(await codeOf(requireVisitor(deps, issued.token))).toBe('VISITOR_UNAUTHENTICATED');
    expect(await revokeVisitorToken(deps, issued.token)).toBe(false);
    expect(await revokeVisitorToken(deps, 'no-such-token')).toBe(false);

    const expired = await issueVisitorToken(deps, { appkey: m.appkey }, clientIp());
    const later = { ...deps, now: () => Date.now() + deps.config.visitorTokenTtlSeconds * 1000 + 1000 };
    expect(await revokeVisitorToken(later, expired.token)).toBe(false);
    await requireVisitor(deps, expired.token);
  });
});

describe('The visitor bootstrap (loadVisitorBootstrap)', () => {
  it('answers the visitor, the connection settings, the switches configured and the upload limits', async () => {
    const m = await f.merchant({
      switches: { voice: 'on', sound: 'off', emoji: 'maybe', session_invite_rating: 'on' },
    });
    await deps.db
      .update(merchants)
      .set({
        verified: true,
        paid: 3,
        imageMaxBytes: 1000,
        fileMaxBytes: 2000,
        videoMaxBytes: 3000,
        voiceMaxBytes: 4000,
      })
      .where(eq(merchants.id, m.merchantId));
    const viewer = await f.visitor(m, { nickname: 'Lily' });
    const boot = await loadVisitorBootstrap(deps, viewer, { wsAddress: 'wss://chat.example/graphql' });
    expect(boot.visitor).toEqual({
      nickname: 'Lily',
      avatar: '',
      uid: viewer.visitorId,
      lang: 'en',
      channel: viewer.channel,
      attributes: [],
    });
    expect(boot.setting).toEqual({
      appname: 'Test shop',
      appkey: m.appkey,
      // The contact details asked of a visitor who leaves a message: none configured.
      contactFields: [],
      wsAddress: 'wss://chat.example/graphql',
      uploadLimits: { imageMaxBytes: 1000, fileMaxBytes: 2000, videoMaxBytes: 3000, voiceMaxBytes: 4000 },
      voice: 'on',
      sound: 'off',
      uploadFile: undefined,
      uploadImg: undefined,
      // Neither on nor off: treated as not configured.
      emoji: undefined,
      sessionInviteRating: 'on',
      sessionInviteResolved: 'off',
      verified: true,
      paid: 3,
    });
  });

  it('maps every switch to its own field', async () => {
    const m = await f.merchant({
      switches: {
        voice: 'off',
        sound: 'on',
        upload_file: 'on',
        upload_img: 'off',
        emoji: 'on',
        session_invite_rating: 'off',
        session_invite_resolved: 'on',
      },
    });
    const boot = await loadVisitorBootstrap(deps, await f.visitor(m), { wsAddress: '' });
    expect(boot.setting).toMatchObject({
      voice: 'off',
      sound: 'on',
      uploadFile: 'on',
      uploadImg: 'off',
      emoji: 'on',
      sessionInviteRating: 'off',
      sessionInviteResolved: 'on',
    });
  });

  it('lists the configured attributes the visitor has a value for, in display order; images never editable', async () => {
    const m = await f.merchant();
    await deps.db.insert(visitorAttributeDefs).values([
      { merchantId: m.merchantId, key: 'vip', label: 'VIP', type: 'boolean', editable: true, position: 2 },
      { merchantId: m.merchantId, key: 'photo', label: 'Photo', type: 'image', editable: true, position: 1 },
      { merchantId: m.merchantId, key: 'age', label: 'Age', type: 'number', editable: false, position: 3 },
      { merchantId: m.merchantId, key: 'note', label: 'Note', type: 'text', editable: true, position: 0 },
    ]);
    const viewer = await f.visitor(m);
    await deps.db.insert(visitorAttributes).values([
      { visitorId: viewer.visitorId, key: 'vip', value: false },
      { visitorId: viewer.visitorId, key: 'photo', value: 'https://img.example/p.png' },
      { visitorId: viewer.visitorId, key: 'age', value: null },
      // A value without a definition is not shown.
      { visitorId: viewer.visitorId, key: 'stray', value: 'x' },
    ]);
    const boot = await loadVisitorBootstrap(deps, viewer, { wsAddress: '' });
    expect(boot.visitor.attributes).toEqual([
      { key: 'photo', label: 'Photo', type: 'image', value: 'https://img.example/p.png', editable: false },
      { key: 'vip', label: 'VIP', type: 'boolean', value: false, editable: true },
      { key: 'age', label: 'Age', type: 'number', value: null, editable: false },
    ]);
    expect(await loadAttributeDefs(deps, m.merchantId)).toEqual([
      { key: 'note', label: 'Note', type: 'text', editable: true },
      { key: 'photo', label: 'Photo', type: 'image', editable: false },
      { key: 'vip', label: 'VIP', type: 'boolean', editable: true },
      { key: 'age', label: 'Age', type: 'number', editable: false },
    ]);
  });

  it('answers every change to the visitor’s rows at once (embedded, the rows are cached until a write to them)', async () => {
    const m = await f.merchant();
    await deps.db
      .insert(visitorAttributeDefs)
      .values({ merchantId: m.merchantId, key: 'vip', label: 'VIP', type: 'boolean', editable: true, position: 0 });
    const viewer = await f.visitor(m, { nickname: 'Lily' });
    const boot = () => loadVisitorBootstrap(deps, viewer, { wsAddress: '' });
    expect((await boot()).visitor).toMatchObject({ nickname: 'Lily', attributes: [] });
    expect((await boot()).visitor.nickname).toBe('Lily');
    await deps.db.update(visitors).set({ nickname: 'Rose' }).where(eq(visitors.id, viewer.visitorId));
    expect((await boot()).visitor.nickname).toBe('Rose');
    await deps.db.insert(visitorAttributes).values({ visitorId: viewer.visitorId, key: 'vip', value: true });
    expect((await boot()).visitor.attributes).toEqual([
      { key: 'vip', label: 'VIP', type: 'boolean', value: true, editable: true },
    ]);
    // Inside a transaction too, and through a delete that names no visitor table (a cascade).
    await deps.db.transaction(async (tx) => {
      await tx.update(visitorAttributes).set({ value: false }).where(eq(visitorAttributes.visitorId, viewer.visitorId));
    });
    expect((await boot()).visitor.attributes[0]?.value).toBe(false);
    await deps.db.delete(merchants).where(eq(merchants.id, m.merchantId));
    expect(await codeOf(boot())).toBe('VISITOR_UNAUTHENTICATED');
  });

  it('refuses a visitor that is not of the viewer’s merchant', async () => {
    const m = await f.merchant();
    const other = await f.merchant();
    const viewer = await f.visitor(m);
    await expect(
      loadVisitorBootstrap(deps, { ...viewer, merchantId: other.merchantId }, { wsAddress: '' }),
    ).rejects.toMatchObject({ code: 'VISITOR_UNAUTHENTICATED', message: 'Visitor not found: get a new visitor token' });
    expect(await codeOf(loadVisitorBootstrap(deps, { ...viewer, merchantId: 'm_nobody' }, { wsAddress: '' }))).toBe(
      'VISITOR_UNAUTHENTICATED',
    );
  });

  it('announces the visitor on global-{bid}', async () => {
    const m = await f.merchant();
    const feed = recordEvents(deps, [globalChannel(m.bid)]);
    await feed.ready;
    const viewer = await f.visitor(m, { nickname: 'Lily' });
    await loadVisitorBootstrap(deps, viewer, { wsAddress: '' });
    const event = await feed.first('visitor.online');
    expect(event?.data).toEqual({ uid: viewer.visitorId, nickname: 'Lily' });
    feed.stop();
  });
});

describe('visitor.online (announceOnline)', () => {
  it('is published once per interval however often (and on however many instances) it is asked', async () => {
    const m = await f.merchant();
    const feed = recordEvents(deps, [globalChannel(m.bid)]);
    await feed.ready;
    const visitor = { id: `v_${Math.random().toString(36).slice(2)}`, nickname: 'Lily' };
    // One instance with its own clock, counting its round trips to the shared store.
    let clock = Date.now();
    let asked = 0;
    const kv = {
      ...deps.kv,
      setIfAbsent: (...a: Parameters<typeof deps.kv.setIfAbsent>) => {
        asked++;
        return deps.kv.setIfAbsent(...a);
      },
    };
    const instance = { ...deps, kv, now: () => clock };
    await announceOnline(instance, m.bid, visitor);
    expect(asked).toBe(1);
    // Asked again within the interval: answered from memory, no round trip.
    clock += deps.config.hardening.visitorOnlineIntervalSeconds * 1000 - 1;
    await announceOnline(instance, m.bid, visitor);
    expect(asked).toBe(1);
    // Another instance (its own memory, the same shared store) stays silent: the marker decides.
    await announceOnline({ ...deps }, m.bid, visitor);
    // Past the interval this instance asks the shared store again.
    clock += 1;
    await announceOnline(instance, m.bid, visitor);
    expect(asked).toBe(2);
    const other = { id: `${visitor.id}-2`, nickname: 'Wang' };
    await announceOnline(deps, m.bid, other);
    await eventually(() => feed.of('visitor.online').length >= 2, 'two announcements');
    // A marker for `other` was published after `visitor`'s: nothing of `visitor` can still be on its way.
    expect(feed.of('visitor.online').map((e) => e.data)).toEqual([
      { uid: visitor.id, nickname: 'Lily' },
      { uid: other.id, nickname: 'Wang' },
    ]);
    feed.stop();
  });

  it('strips control and bidirectional characters from the nickname', async () => {
    const m = await f.merchant();
    const feed = recordEvents(deps, [globalChannel(m.bid)]);
    await feed.ready;
    const id = `v_${Math.random().toString(36).slice(2)}`;
    await announceOnline(deps, m.bid, { id, nickname: 'Li\u202Ely\u0007\tX\u200f' });
    const event = await feed.first('visitor.online');
    expect(event?.data).toEqual({ uid: id, nickname: 'LilyX' });
    feed.stop();
  });

  it('a store failure publishes nothing and does not throw; the next bootstrap tries again', async () => {
    const m = await f.merchant();
    const feed = recordEvents(deps, [globalChannel(m.bid)]);
    await feed.ready;
    const broken: typeof deps = {
      ...deps,
      kv: { ...deps.kv, setIfAbsent: () => Promise.reject(new Error('store down')) },
    };
    const visitor = { id: `v_${Math.random().toString(36).slice(2)}`, nickname: 'Lily' };
    await announceOnline(broken, m.bid, visitor);
    // Nothing was published: a marker sent after it arrives with nothing before it.
    await deps.bus.publish(globalChannel(m.bid), 'test.marker', {});
    await feed.first('test.marker');
    expect(feed.events.map((e) => e.event)).toEqual(['test.marker']);
    // The same instance (its memory) with the store back: announced now.
    broken.kv = deps.kv;
    await announceOnline(broken, m.bid, visitor);
    await feed.first('visitor.online');
    feed.stop();
  });
});

describe('Merchant lookups', () => {
  it('image attributes are never editable', () => {
    expect(isEditable('image', true)).toBe(false);
    expect(isEditable('text', true)).toBe(true);
    expect(isEditable('text', false)).toBe(false);
  });

  it('the upload policy is the merchant’s limits and switches; an unknown merchant has none', async () => {
    const m = await f.merchant({ switches: { upload_img: 'on' } });
    const policy = await loadUploadPolicy(deps, m.merchantId);
    expect(policy?.merchant.id).toBe(m.merchantId);
    expect(policy?.switches).toEqual({ upload_img: 'on' });
    expect(policy?.limits).toEqual(uploadLimitsOf(policy?.merchant as NonNullable<typeof policy>['merchant']));
    expect(policy?.limits).toEqual({
      imageMaxBytes: 20971520,
      fileMaxBytes: 20971520,
      videoMaxBytes: 104857600,
      voiceMaxBytes: 20971520,
    });
    expect(await loadUploadPolicy(deps, 'm_nobody')).toBeUndefined();
    expect(await loadAttributeDefs(deps, 'm_nobody')).toEqual([]);
  });

  it('finds a merchant by its appkey only', async () => {
    const m = await f.merchant();
    expect((await findMerchantByAppkey(deps, m.appkey))?.id).toBe(m.merchantId);
    expect(await findMerchantByAppkey(deps, m.bid)).toBeUndefined();
  });
});
