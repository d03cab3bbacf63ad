import { createHash } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchants, visitors, visitorTokens } from '../../src/db/schema.js';
import { revokeVisitorToken, userHashFor } from '../../src/resolvers/visitor.js';
import { HttpClient } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { bearer, postVisitorToken, visitorData } from './bootstrap.fixtures.js';

let t: TestApp;
let demoSecret: string;
let acmeSecret: string;
beforeAll(async () => {
  t = await startTestApp();
  const secrets = await t.app.deps.db.select({ id: merchants.id, secret: merchants.identitySecret }).from(merchants);
  demoSecret = secrets.find((m) => m.id === 'm_demo')?.secret as string;
  acmeSecret = secrets.find((m) => m.id === 'm_acme')?.secret as string;
});
afterAll(() => t.stop());

// Every token request of this file comes from 127.0.0.1, under the limit of 30 a minute (about 25 here).
const issue = (body: unknown) => postVisitorToken(t.url, body);

describe('Visitor tokens (POST /visitor/token)', () => {
  it('with the public appkey: a new anonymous visitor, {code:0, msg:"ok", data:{token, uid, expires_in}}', async () => {
    const { status, body } = await issue({ appkey: 'demo-appkey' });
    expect(status).toBe(200);
    expect(body).toEqual({
      code: 0,
      msg: 'ok',
      data: { token: expect.any(String), uid: expect.any(String), expires_in: 30 * 86400 },
    });
    expect(body.data.token).toMatch(/^[A-Za-z0-9_-]{43,}$/); // 256 random bits, URL-safe
    const { body: data } = await visitorData(t.url, body.data.token);
    expect(data.code).toBe(0);
    expect(data.data.visitor.uid).toBe(body.data.uid);

    const another = await issue({ appkey: 'demo-appkey' });
    expect(another.body.data.uid).not.toBe(body.data.uid); // each anonymous call is a new visitor
    expect(another.body.data.token).not.toBe(body.data.token);
  });

  it('takes a nickname and language for a new visitor, and refuses malformed ones (code 1000)', async () => {
    const named = await issue({ appkey: 'demo-appkey', nickname: 'Mia', lang: 'zh-CN' });
    const visitor = (await visitorData(t.url, named.body.data.token)).body.data.visitor;
    expect(visitor).toMatchObject({ nickname: 'Mia', lang: 'zh-CN' });

    for (const bad of [
      { appkey: 'demo-appkey', lang: 'english please' },
      { appkey: ['demo-appkey', 'acme-appkey'] },
      { appkey: '' },
      {},
    ]) {
      const { status, body } = await issue(bad);
      expect(status).toBe(400);
      expect(body).toMatchObject({ code: 1000, data: [] });
    }
  });

  it('identified with user_id and user_hash (HMAC-SHA256 of user_id under the identity secret): the same uid every time', async () => {
    const signed = {
      appkey: 'demo-appkey',
      user_id: 'shop-user-42',
      user_hash: userHashFor(demoSecret, 'shop-user-42'),
    };
    const first = await issue(signed);
    const second = await issue({ ...signed, user_hash: signed.user_hash.toUpperCase() });
    expect(first.body.code).toBe(0);
    expect(second.body.code).toBe(0);
    expect(second.body.data.uid).toBe(first.body.data.uid);
    expect(second.body.data.token).not.toBe(first.body.data.token); // a new token, both valid
    expect((await visitorData(t.url, first.body.data.token)).body.data.visitor.uid).toBe(first.body.data.uid);
    expect((await visitorData(t.url, second.body.data.token)).body.data.visitor.uid).toBe(first.body.data.uid);

    const other = await issue({
      appkey: 'demo-appkey',
      user_id: 'shop-user-43',
      user_hash: userHashFor(demoSecret, 'shop-user-43'),
    });
    expect(other.body.data.uid).not.toBe(first.body.data.uid);
  });

  it('the same user id at another merchant is another visitor', async () => {
    const atAcme = await issue({
      appkey: 'acme-appkey',
      user_id: 'shop-user-42',
      user_hash: userHashFor(acmeSecret, 'shop-user-42'),
    });
    const atDemo = await issue({
      appkey: 'demo-appkey',
      user_id: 'shop-user-42',
      user_hash: userHashFor(demoSecret, 'shop-user-42'),
    });
    expect(atAcme.body.code).toBe(0);
    expect(atAcme.body.data.uid).not.toBe(atDemo.body.data.uid);
  });

  it('a bad user_hash is refused with code 1009', async () => {
    const good = userHashFor(demoSecret, 'shop-user-42');
    for (const bad of [
      { user_id: 'shop-user-42', user_hash: userHashFor(demoSecret, 'shop-user-41') },
      { user_id: 'shop-user-42', user_hash: userHashFor(acmeSecret, 'shop-user-42') }, // another merchant's secret
      { user_id: 'shop-user-42', user_hash: `${good}00` },
      { user_id: 'shop-user-42', user_hash: `${good.slice(0, 62)}zz` },
      { user_id: 'shop-user-42' }, // no hash: not an identified visitor, not an anonymous one either
      { user_hash: good },
    ]) {
      const { body } = await issue({ appkey: 'demo-appkey', ...bad });
      expect(body).toEqual({ code: 1009, msg: 'user_hash does not match user_id', data: [] });
    }
  });

  it('an unknown appkey is refused with code 1008', async () => {
    const { body } = await issue({ appkey: 'no-such-appkey' });
    expect(body).toEqual({ code: 1008, msg: 'Unknown appkey', data: [] });
  });

  it("a revoked token is refused (code 1401), the visitor's other tokens still work", async () => {
    const signed = {
      appkey: 'demo-appkey',
      user_id: 'revoked-user',
      user_hash: userHashFor(demoSecret, 'revoked-user'),
    };
    const kept = (await issue(signed)).body.data;
    const revoked = (await issue(signed)).body.data;
    expect(await revokeVisitorToken(t.app.deps, revoked.token)).toBe(true);
    expect(await revokeVisitorToken(t.app.deps, revoked.token)).toBe(false); // already revoked

    expect((await visitorData(t.url, revoked.token)).body).toMatchObject({ code: 1401, data: [] });
    expect((await visitorData(t.url, kept.token)).body.code).toBe(0);
  });

  it("POST /visitor/token/revoke revokes the bearer's own token at once", async () => {
    const { token } = (await issue({ appkey: 'demo-appkey' })).body.data;
    const client = new HttpClient(t.url);
    const revoked = await client.json('/visitor/token/revoke', { method: 'POST', headers: bearer(token) });
    expect(revoked.body).toEqual({ code: 0, msg: 'ok', data: { revoked: true } });
    expect((await visitorData(t.url, token)).body.code).toBe(1401);
    const again = await client.json('/visitor/token/revoke', { method: 'POST', headers: bearer(token) });
    expect(again.body.code).toBe(1401);
  });

  it('POST /visitor/token/revoke without a bearer, or with a malformed one, is refused with 1401 (never a 500)', async () => {
    const client = new HttpClient(t.url);
    for (const headers of [{}, { authorization: 'Bearer' }, { authorization: 'Basic abc' }, bearer('x'.repeat(43))]) {
      const res = await client.json('/visitor/token/revoke', { method: 'POST', headers });
      expect([headers, res.status, res.body]).toEqual([
        headers,
        401,
        { code: 1401, msg: expect.any(String), data: [] },
      ]);
    }
    const gql = await client.graphql('mutation { revokeVisitorToken }');
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it("revokeVisitorToken in GraphQL revokes the bearer's token", async () => {
    const { token } = (await issue({ appkey: 'demo-appkey' })).body.data;
    const client = new HttpClient(t.url);
    const gql = await client.graphql('mutation { revokeVisitorToken }', undefined, bearer(token));
    expect(gql.body).toEqual({ data: { revokeVisitorToken: true } });
    const after = await client.graphql('{ visitorBootstrap { visitor { uid } } }', undefined, bearer(token));
    expect(after.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it('an expired token is refused', async () => {
    const { token } = (await issue({ appkey: 'demo-appkey' })).body.data;
    await t.app.deps.db
      .update(visitorTokens)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(visitorTokens.tokenHash, createHash('sha256').update(token).digest('hex')));
    expect((await visitorData(t.url, token)).body).toMatchObject({ code: 1401, data: [] });
  });

  it('tokens are stored hashed: the plain token is nowhere in visitor_tokens', async () => {
    const { token, uid } = (await issue({ appkey: 'demo-appkey' })).body.data;
    const rows = await t.app.deps.db.select().from(visitorTokens).where(eq(visitorTokens.visitorId, uid));
    expect(rows).toHaveLength(1);
    expect(rows[0]?.tokenHash).toBe(createHash('sha256').update(token).digest('hex'));
    expect(JSON.stringify(rows)).not.toContain(token);
    expect(t.rawLogs()).not.toContain(token);
  });

  it('the GraphQL mutation issueVisitorToken follows the same rules', async () => {
    const client = new HttpClient(t.url);
    const ok = await client.graphql('mutation { issueVisitorToken(appkey: "demo-appkey") { token uid expiresIn } }');
    expect(ok.body.data.issueVisitorToken).toEqual({
      token: expect.any(String),
      uid: expect.any(String),
      expiresIn: 2592000,
    });
    const unknown = await client.graphql('mutation { issueVisitorToken(appkey: "nope") { uid } }');
    expect(unknown.body.errors?.[0]?.extensions?.code).toBe('APPKEY_INVALID');
    const badHash = await client.graphql(
      'mutation($h: String) { issueVisitorToken(appkey: "demo-appkey", userId: "u1", userHash: $h) { uid } }',
      { h: 'f'.repeat(64) },
    );
    expect(badHash.body.errors?.[0]?.extensions?.code).toBe('VISITOR_IDENTITY_INVALID');
    const badLang = await client.graphql('mutation { issueVisitorToken(appkey: "demo-appkey", lang: "?!") { uid } }');
    expect(badLang.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(badLang.body.errors?.[0]?.message).toMatch(/^lang /);
  });

  it('the visitor row of an anonymous token has no external user id; an identified one keeps it', async () => {
    const anon = (await issue({ appkey: 'demo-appkey' })).body.data;
    const [row] = await t.app.deps.db.select().from(visitors).where(eq(visitors.id, anon.uid));
    expect(row?.externalUserId).toBeNull();
    expect(row?.merchantId).toBe('m_demo');

    const userId = 'shop-user-kept';
    const signed = (await issue({ appkey: 'demo-appkey', user_id: userId, user_hash: userHashFor(demoSecret, userId) }))
      .body.data;
    const [identified] = await t.app.deps.db.select().from(visitors).where(eq(visitors.id, signed.uid));
    expect(identified?.externalUserId).toBe(userId);
    expect(identified?.merchantId).toBe('m_demo');
  });
});

describe('Visitor tokens: rate limit per IP', () => {
  let fresh: TestApp;
  beforeAll(async () => {
    fresh = await startTestApp({ env: { TRUST_PROXY: 'on' } });
  });
  afterAll(() => fresh.stop());

  it('30 requests a minute from one address; the 31st gets code 1429 (HTTP 429, Retry-After); another address is not held back', async () => {
    const from = (ip: string) => ({ 'x-forwarded-for': ip });
    for (let i = 1; i <= 30; i++) {
      const { body } = await postVisitorToken(fresh.url, { appkey: 'demo-appkey' }, from('203.0.113.7'));
      expect([i, body.code]).toEqual([i, 0]);
    }
    const limited = await postVisitorToken(fresh.url, { appkey: 'demo-appkey' }, from('203.0.113.7'));
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ code: 1429, data: [] });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);

    const other = await postVisitorToken(fresh.url, { appkey: 'demo-appkey' }, from('198.51.100.9'));
    expect(other.body.code).toBe(0);
  });
});
