import { describe, expect, it } from 'vitest';
import { TWO_IDENTITIES } from '../../src/http/request.js';
import { hashToken } from '../../src/resolvers/viewer.js';
import { API_KEYS_OVER_HTTP_ONLY, presentedIdentity } from '../../src/subscriptions/ws-identity.js';

/** src/subscriptions/ws-identity.ts: which identity a `connection_init` presents, each mistake by its own reason. */

const SESSION = 'abcdefghijklmnop1234'; // 20 characters of the Session ID alphabet
const NO_APPKEY = "appkey missing: send the merchant's appkey in connection_init";
const BAD_BEARER = 'authorization must be "Bearer <visitor token>"';
const BAD_TOKEN = 'token must be an agent Session ID (a visitor token goes in authorization as Bearer)';
const TWICE = 'token given more than once on the upgrade request';
const NONE = 'No identity: send token (agent) or authorization (Bearer visitor token), or log in';

describe('presentedIdentity', () => {
  it('reads members in any capitalisation, the exact name first', () => {
    expect(presentedIdentity({ AppKey: 'app', Authorization: 'Bearer vt1' }, undefined)).toEqual({
      identity: { kind: 'visitor', tokenHash: hashToken('vt1') },
      appkey: 'app',
    });
    expect(presentedIdentity({ APPKEY: 'other', appkey: 'exact', token: SESSION }, undefined)).toEqual({
      identity: { kind: 'agent', sessionId: SESSION },
      appkey: 'exact',
    });
    expect(presentedIdentity({ APPKEY: 'upper', TOKEN: SESSION }, undefined)).toEqual({
      identity: { kind: 'agent', sessionId: SESSION },
      appkey: 'upper',
    });
  });

  it('refuses a missing, empty or non-string appkey', () => {
    expect(presentedIdentity({ token: SESSION }, undefined)).toEqual({ mistake: NO_APPKEY });
    expect(presentedIdentity({ appkey: '', token: SESSION }, undefined)).toEqual({ mistake: NO_APPKEY });
    expect(presentedIdentity({ appkey: 7, token: SESSION }, undefined)).toEqual({ mistake: NO_APPKEY });
  });

  it('refuses two identities, but an empty token beside a Bearer is no second one', () => {
    expect(presentedIdentity({ appkey: 'a', authorization: 'Bearer vt1', token: SESSION }, undefined)).toEqual({
      mistake: TWO_IDENTITIES,
    });
    expect(presentedIdentity({ appkey: 'a', authorization: 'Bearer vt1', token: '' }, undefined)).toEqual({
      identity: { kind: 'visitor', tokenHash: hashToken('vt1') },
      appkey: 'a',
    });
  });

  it('takes only "Bearer <token>", whole, with any spacing', () => {
    expect(presentedIdentity({ appkey: 'a', authorization: 'bearer   vt2' }, undefined)).toEqual({
      identity: { kind: 'visitor', tokenHash: hashToken('vt2') },
      appkey: 'a',
    });
    for (const authorization of ['xBearer vt', 'Bearer vt extra', 'Bearervt', 'Basic vt', 'Bearer ', 42]) {
      expect(presentedIdentity({ appkey: 'a', authorization }, undefined), String(authorization)).toEqual({
        mistake: BAD_BEARER,
      });
    }
    expect(presentedIdentity({ appkey: 'a', authorization: `Bearer ${'t'.repeat(513)}` }, undefined)).toEqual({
      mistake: BAD_BEARER,
    });
  });

  it('refuses an API key with its own reason', () => {
    expect(presentedIdentity({ appkey: 'a', authorization: 'Bearer prly_abc' }, undefined)).toEqual({
      mistake: API_KEYS_OVER_HTTP_ONLY,
    });
  });

  it('takes a token only when it is a Session ID', () => {
    for (const token of ['short', 'has spaces in it here', 1234567890123456, `${'x'.repeat(129)}`]) {
      expect(presentedIdentity({ appkey: 'a', token }, undefined), String(token)).toEqual({ mistake: BAD_TOKEN });
    }
  });

  it('falls back to the upgrade Session, refuses a repeated one, and names a missing identity', () => {
    expect(presentedIdentity({ appkey: 'a' }, SESSION)).toEqual({
      identity: { kind: 'agent', sessionId: SESSION },
      appkey: 'a',
    });
    expect(presentedIdentity({ appkey: 'a', token: '' }, SESSION)).toEqual({
      identity: { kind: 'agent', sessionId: SESSION },
      appkey: 'a',
    });
    expect(presentedIdentity({ appkey: 'a' }, false)).toEqual({ mistake: TWICE });
    expect(presentedIdentity({ appkey: 'a' }, undefined)).toEqual({ mistake: NONE });
    // A member named "undefined" is no member of any other name.
    expect(presentedIdentity({ appkey: 'a', undefined: SESSION }, undefined)).toEqual({ mistake: NONE });
    // A token given in connection_init wins over a repeated one on the upgrade.
    expect(presentedIdentity({ appkey: 'a', token: SESSION }, false)).toEqual({
      identity: { kind: 'agent', sessionId: SESSION },
      appkey: 'a',
    });
  });
});
