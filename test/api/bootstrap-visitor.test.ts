import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchants, visitorAttributeDefs, visitorAttributes } from '../../src/db/schema.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import {
  bearer,
  jsonType,
  postVisitorToken,
  rawGet,
  shapeOf,
  statementsOf,
  visitorData,
} from './bootstrap.fixtures.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.stop());

const db = () => t.app.deps.db;
/** A test writing a merchant's configuration directly announces it, as every write path does (docs/operations.md "Configuration cache"). */
const configChanged = (merchantId: string) => t.app.deps.configCache.announceChanged(merchantId);

/** Sets the stored attribute values of a visitor (test data, straight into the database). */
async function setAttributes(uid: string, values: Record<string, string | number | boolean | null>) {
  for (const [key, value] of Object.entries(values)) {
    await db().insert(visitorAttributes).values({ visitorId: uid, key, value });
  }
}

/** Runs `body` with the merchant's switches replaced, then puts the original ones back. */
async function withSwitches(id: string, switches: Record<string, string>, body: () => Promise<void>) {
  const [before] = await db().select({ switches: merchants.switches }).from(merchants).where(eq(merchants.id, id));
  await db().update(merchants).set({ switches }).where(eq(merchants.id, id));
  await configChanged(id);
  try {
    await body();
  } finally {
    await db()
      .update(merchants)
      .set({ switches: before?.switches ?? {} })
      .where(eq(merchants.id, id));
    await configChanged(id);
  }
}

describe('Visitor bootstrap data (GET /visitor/data/get)', () => {
  it('answers {code:0, msg:"ok", data:{visitor, setting}} with every field of the spec, by name and JSON type', async () => {
    const { token } = await visitorToken(t.url);
    const { status, body } = await visitorData(t.url, token);
    expect(status).toBe(200);
    expect(body.code).toBe(0);
    expect(body.msg).toBe('ok');
    expect(Object.keys(body.data).sort()).toEqual(['setting', 'visitor']);

    const { visitor, setting } = body.data;
    const visitorTypes = { nickname: 'string', avatar: 'string', uid: 'string', lang: 'string', channel: 'string' };
    expect(Object.keys(visitor).sort()).toEqual([...Object.keys(visitorTypes), 'attributes'].sort());
    for (const [field, type] of Object.entries(visitorTypes))
      expect([field, jsonType(visitor[field])]).toEqual([field, type]);
    expect(visitor.attributes).toEqual([]);

    const settingTypes = {
      appname: 'string',
      appkey: 'string',
      ws_address: 'string',
      upload_limits: 'object',
      voice: 'string',
      sound: 'string',
      upload_file: 'string',
      upload_img: 'string',
      emoji: 'string',
      session_invite_rating: 'string',
      session_invite_resolved: 'string',
      verified: 'boolean',
      paid: 'number',
      business_hours: 'object',
      contact_fields: 'array',
    };
    expect(Object.keys(setting).sort()).toEqual(Object.keys(settingTypes).sort());
    for (const [field, type] of Object.entries(settingTypes))
      expect([field, jsonType(setting[field])]).toEqual([field, type]);
    expect(setting.upload_limits).toEqual({
      image_max_bytes: 20971520,
      file_max_bytes: 20971520,
      video_max_bytes: 104857600,
      voice_max_bytes: 20971520,
    });
    expect(setting).toMatchObject({ appname: 'Demo Shop', appkey: 'demo-appkey', verified: true, paid: 0 });
    for (const name of ['voice', 'sound', 'upload_file', 'upload_img', 'emoji', 'session_invite_rating']) {
      expect([name, setting[name]]).toEqual([name, 'on']);
    }
  });

  it('keeps the legacy shape: field names and JSON types are frozen (snapshot)', async () => {
    const { token, uid } = await visitorToken(t.url);
    await setAttributes(uid, { email: 'lily@example.com' });
    const { body } = await visitorData(t.url, token);
    expect(shapeOf(body)).toMatchInlineSnapshot(`
      {
        "code": "number",
        "data": {
          "setting": {
            "appkey": "string",
            "appname": "string",
            "business_hours": {
              "next_open_at": "null",
              "open": "boolean",
              "timezone": "string",
            },
            "contact_fields": [],
            "emoji": "string",
            "paid": "number",
            "session_invite_rating": "string",
            "session_invite_resolved": "string",
            "sound": "string",
            "upload_file": "string",
            "upload_img": "string",
            "upload_limits": {
              "file_max_bytes": "number",
              "image_max_bytes": "number",
              "video_max_bytes": "number",
              "voice_max_bytes": "number",
            },
            "verified": "boolean",
            "voice": "string",
            "ws_address": "string",
          },
          "visitor": {
            "attributes": [
              {
                "editable": "boolean",
                "key": "string",
                "label": "string",
                "type": "string",
                "value": "string",
              },
            ],
            "avatar": "string",
            "channel": "string",
            "lang": "string",
            "nickname": "string",
            "uid": "string",
          },
        },
        "msg": "string",
      }
    `);
  });

  it('attributes: the configured ones with a value, in display order; image attributes are never editable', async () => {
    const { token, uid } = await visitorToken(t.url);
    // The merchant marks the image attribute editable: the server still refuses it.
    await db()
      .update(visitorAttributeDefs)
      .set({ editable: true })
      .where(and(eq(visitorAttributeDefs.merchantId, 'm_demo'), eq(visitorAttributeDefs.key, 'member_card')));
    await configChanged('m_demo');
    await setAttributes(uid, {
      orders: 7,
      member_card: '/assets/member-card-gold.svg',
      email: 'v@example.com',
      not_configured: 'hidden', // no definition for the merchant: never shown
    });

    const { body } = await visitorData(t.url, token);
    expect(body.data.visitor.attributes).toEqual([
      { key: 'email', label: 'Email', type: 'text', value: 'v@example.com', editable: true },
      {
        key: 'member_card',
        label: 'Member card',
        type: 'image',
        value: '/assets/member-card-gold.svg',
        editable: false,
      },
      { key: 'orders', label: 'Orders', type: 'number', value: 7, editable: false },
    ]);
  });

  it('attribute values keep their JSON type: string, number, boolean or null', async () => {
    const { token, uid } = await visitorToken(t.url);
    await db()
      .insert(visitorAttributeDefs)
      .values([
        { merchantId: 'm_demo', key: 'vip', label: 'VIP', type: 'boolean', editable: true, position: 10 },
        { merchantId: 'm_demo', key: 'homepage', label: 'Homepage', type: 'url', editable: true, position: 11 },
      ])
      .onConflictDoNothing();
    await configChanged('m_demo');
    await setAttributes(uid, { vip: false, homepage: null, orders: 0 });
    const { body } = await visitorData(t.url, token);
    const byKey = Object.fromEntries(body.data.visitor.attributes.map((a: { key: string }) => [a.key, a]));
    expect(byKey.vip).toMatchObject({ type: 'boolean', value: false });
    expect(byKey.homepage).toMatchObject({ type: 'url', value: null });
    expect(byKey.orders).toMatchObject({ type: 'number', value: 0 });
  });

  it('switches the merchant has not configured are absent, not null; the session invitations default to "off"', async () => {
    const { token } = await visitorToken(t.url, 'acme-appkey');
    await withSwitches('m_acme', {}, async () => {
      const { body } = await visitorData(t.url, token);
      const { setting } = body.data;
      for (const name of ['voice', 'sound', 'upload_file', 'upload_img', 'emoji']) {
        expect([name, name in setting]).toEqual([name, false]);
      }
      expect(setting.session_invite_rating).toBe('off');
      expect(setting.session_invite_resolved).toBe('off');
      expect(setting.upload_limits.video_max_bytes).toBe(104857600); // limits do not depend on switches
    });
  });

  it('a switch stored with a value other than on/off counts as not configured', async () => {
    const { token } = await visitorToken(t.url, 'acme-appkey');
    await withSwitches(
      'm_acme',
      { voice: 'maybe', sound: 'off', emoji: '', session_invite_rating: 'yes' },
      async () => {
        const { setting } = (await visitorData(t.url, token)).body.data;
        expect('voice' in setting).toBe(false);
        expect('emoji' in setting).toBe(false);
        expect(setting.sound).toBe('off');
        expect(setting.session_invite_rating).toBe('off');
      },
    );
  });

  it("upload limits are the merchant's own, in bytes, as numbers", async () => {
    const { token } = await visitorToken(t.url, 'acme-appkey');
    await db()
      .update(merchants)
      .set({ imageMaxBytes: 1048576, videoMaxBytes: 5368709120 })
      .where(eq(merchants.id, 'm_acme'));
    await configChanged('m_acme');
    try {
      const { upload_limits } = (await visitorData(t.url, token)).body.data.setting;
      expect(upload_limits).toEqual({
        image_max_bytes: 1048576,
        file_max_bytes: 20971520,
        video_max_bytes: 5368709120,
        voice_max_bytes: 20971520,
      });
    } finally {
      await db()
        .update(merchants)
        .set({ imageMaxBytes: 20971520, videoMaxBytes: 104857600 })
        .where(eq(merchants.id, 'm_acme'));
      await configChanged('m_acme');
    }
  });

  it('uid and channel are generated by the server, never taken from the request', async () => {
    const injected = { appkey: 'demo-appkey', uid: 'v_demo_lily', channel: 'agent-a_alice', id: 'v_mine' };
    const issued = await postVisitorToken(t.url, injected);
    expect(issued.body.code).toBe(0);
    expect(issued.body.data.uid).not.toBe('v_demo_lily');
    expect(issued.body.data.uid).not.toBe('v_mine');

    const plain = (await visitorData(t.url, issued.body.data.token)).body.data.visitor;
    expect(plain.uid).toBe(issued.body.data.uid);
    expect(plain.channel).not.toBe('agent-a_alice');
    expect(plain.channel).toMatch(/^visitor-[A-Za-z0-9_-]{32}$/);

    const tampered = await visitorData(
      t.url,
      issued.body.data.token,
      '/visitor/data/get?uid=v_demo_lily&channel=global-demo&visitor[uid]=x',
    );
    expect(tampered.body.data.visitor.uid).toBe(plain.uid);
    expect(tampered.body.data.visitor.channel).toBe(plain.channel);
  });

  it('ws_address is derived from the request (ws://, the Host, the WebSocket path) when PUBLIC_WS_ADDRESS is unset', async () => {
    const { token } = await visitorToken(t.url);
    const viaHost = await rawGet(t.url, '/visitor/data/get', { ...bearer(token), host: 'chat.example.com:8443' });
    expect(viaHost.body.data.setting.ws_address).toBe('ws://chat.example.com:8443/graphql');

    const direct = (await visitorData(t.url, token)).body.data.setting;
    expect(direct.ws_address).toBe(`${t.url.replace('http', 'ws')}/graphql`);

    // A Host that is not a host name is never reflected into the address.
    const forged = await rawGet(t.url, '/visitor/data/get', { ...bearer(token), host: 'evil.example/x?y=<script>' });
    expect(forged.body.data.setting.ws_address).toBe(`ws://localhost:${t.config.port}/graphql`);
    // X-Forwarded-Proto is ignored unless TRUST_PROXY says a proxy sets it.
    const proto = await rawGet(t.url, '/visitor/data/get', { ...bearer(token), 'x-forwarded-proto': 'https' });
    expect(proto.body.data.setting.ws_address).toMatch(/^ws:\/\//);
  });

  it('answers the same uid and channel on every call', async () => {
    const { token } = await visitorToken(t.url);
    const first = (await visitorData(t.url, token)).body.data.visitor;
    const second = (await visitorData(t.url, token)).body.data.visitor;
    expect(second).toEqual(first);
  });
});

describe('Visitor identity (Authorization: Bearer <VISITOR_TOKEN>)', () => {
  it('without a token, or with a token that is not one, the code is non-zero (1401) and no data', async () => {
    const client = new HttpClient(t.url);
    for (const headers of [
      {} as Record<string, string>,
      { authorization: 'Bearer not-a-real-token' },
      { authorization: 'Basic dXNlcjpwYXNz' },
      { authorization: 'Bearer ' },
    ]) {
      const { status, body } = await client.json('/visitor/data/get', { headers });
      expect(status).toBe(401);
      expect(body).toEqual({ code: 1401, msg: expect.any(String), data: [] });
    }
  });

  it('an agent Session never opens a visitor endpoint: not by cookie, token header, token query or as a Bearer', async () => {
    const { client, token } = await agentSession(t.url, 'alice');
    const attempts = [
      () => client.json('/visitor/data/get'),
      () => client.json('/visitor/data/get', { headers: { token } }),
      () => client.json(`/visitor/data/get?token=${token}`),
      () => client.json('/visitor/data/get', { headers: bearer(token) }),
    ];
    for (const attempt of attempts) {
      const { body } = await attempt();
      expect(body.code).toBe(1401);
      expect(body.data).toEqual([]);
    }
    const gql = await client.graphql('{ visitorBootstrap { visitor { uid } } }', undefined, bearer(token));
    expect(gql.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    const gqlCookie = await client.graphql('{ visitorBootstrap { visitor { uid } } }');
    expect(gqlCookie.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });
});

describe('Visitor bootstrap: tenant isolation', () => {
  it("a visitor of acme sees acme's settings only, and never another merchant's attributes", async () => {
    const { token, uid } = await visitorToken(t.url, 'acme-appkey');
    // Values under demo's attribute keys: acme configures no attributes, so none is shown.
    await setAttributes(uid, { email: 'x@acme.example', member_card: '/x.svg' });
    const { body } = await visitorData(t.url, token);
    expect(body.data.visitor.attributes).toEqual([]);
    expect(body.data.setting).toMatchObject({ appname: 'Acme Support', appkey: 'acme-appkey', verified: false });
    const text = JSON.stringify(body);
    for (const demo of ['Demo Shop', 'demo-appkey', 'm_demo', 'Member card']) expect(text).not.toContain(demo);
  });
});

describe('Visitor bootstrap in GraphQL (Query.visitorBootstrap)', () => {
  const QUERY = `{
    visitorBootstrap {
      visitor { nickname avatar uid lang channel attributes { key label type value editable } }
      setting {
        appname appkey wsAddress
        uploadLimits { imageMaxBytes fileMaxBytes videoMaxBytes voiceMaxBytes }
        voice sound uploadFile uploadImg emoji sessionInviteRating sessionInviteResolved verified paid contactFields
      }
      businessHours { open nextOpenAt timezone }
    }
  }`;

  it('REST and GraphQL give the same facts for the same visitor', async () => {
    const { token, uid } = await visitorToken(t.url);
    await setAttributes(uid, { email: 'same@example.com', member_card: '/card.svg', orders: 2 });
    const rest = (await visitorData(t.url, token)).body.data;
    const gql = await new HttpClient(t.url).graphql(QUERY, undefined, bearer(token));
    expect(gql.body.errors).toBeUndefined();
    const { visitor, setting, businessHours } = gql.body.data.visitorBootstrap;

    expect(visitor).toEqual(rest.visitor); // same names in both
    // The demo merchant has no calendar: always open.
    expect(rest.setting.business_hours).toEqual({ open: true, next_open_at: null, timezone: 'UTC' });
    expect({
      open: businessHours.open,
      next_open_at: businessHours.nextOpenAt,
      timezone: businessHours.timezone,
    }).toEqual(rest.setting.business_hours);
    expect({
      appname: setting.appname,
      appkey: setting.appkey,
      ws_address: setting.wsAddress,
      upload_limits: {
        image_max_bytes: setting.uploadLimits.imageMaxBytes,
        file_max_bytes: setting.uploadLimits.fileMaxBytes,
        video_max_bytes: setting.uploadLimits.videoMaxBytes,
        voice_max_bytes: setting.uploadLimits.voiceMaxBytes,
      },
      voice: setting.voice,
      sound: setting.sound,
      upload_file: setting.uploadFile,
      upload_img: setting.uploadImg,
      emoji: setting.emoji,
      session_invite_rating: setting.sessionInviteRating,
      session_invite_resolved: setting.sessionInviteResolved,
      verified: setting.verified,
      paid: setting.paid,
      business_hours: rest.setting.business_hours,
      contact_fields: setting.contactFields,
    }).toEqual(rest.setting);
  });

  it('an unconfigured switch is null in GraphQL where REST leaves it out', async () => {
    const { token } = await visitorToken(t.url, 'acme-appkey');
    await withSwitches('m_acme', { sound: 'off' }, async () => {
      const gql = await new HttpClient(t.url).graphql(QUERY, undefined, bearer(token));
      expect(gql.body.data.visitorBootstrap.setting).toMatchObject({
        voice: null,
        sound: 'off',
        uploadFile: null,
        uploadImg: null,
        emoji: null,
        sessionInviteRating: 'off',
        sessionInviteResolved: 'off',
      });
    });
  });
});

describe('Visitor bootstrap: data access', () => {
  it('is served with a fixed number of SQL statements, however many attributes the visitor has', async () => {
    const few = await visitorToken(t.url);
    const many = await visitorToken(t.url);
    await setAttributes(many.uid, { email: 'm@example.com', member_card: '/m.svg', orders: 9, vip: true });
    const count = async (token: string) =>
      (await statementsOf(t.app.deps.database, () => visitorData(t.url, token))).length;
    const withNone = await count(few.token);
    const withFour = await count(many.token);
    expect(withFour).toBe(withNone);
    expect(withNone).toBeGreaterThanOrEqual(2); // the counter sees them
    expect(withNone).toBeLessThanOrEqual(3); // the token, the visitor with its merchant, the attributes
  });
});
