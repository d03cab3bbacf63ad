import { TWO_IDENTITIES } from '../http/request.js';
import { isApiKeyShaped } from '../ids.js';
import { hashToken } from '../resolvers/viewer.js';
import type { SocketIdentity } from './connection.js';

const SESSION_ID = /^[A-Za-z0-9_-]{16,128}$/;

/** Why a socket presenting an API key is refused (docs/integration.md "API keys"). */
export const API_KEYS_OVER_HTTP_ONLY =
  'API keys are for server-to-server HTTP (REST, GraphQL over HTTP), not sockets: receive events by webhook';

/** A `connection_init` member by name, in any capitalisation (`Authorization`, as HTTP headers are usually written). */
function param(params: Record<string, unknown>, name: string): unknown {
  if (name in params) return params[name];
  const key = Object.keys(params).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : params[key];
}

/**
 * Which identity a socket presents: a visitor Bearer token, else an agent Session (the `token`,
 * else the Session cookie of the upgrade). A mistake is named in the close reason, without
 * saying whether an identity exists.
 */
export function presentedIdentity(
  params: Record<string, unknown>,
  upgradeSession: string | undefined | false,
): { identity: SocketIdentity; appkey: string } | { mistake: string } {
  const appkey = param(params, 'appkey');
  if (typeof appkey !== 'string' || appkey === '') {
    return { mistake: "appkey missing: send the merchant's appkey in connection_init" };
  }
  const authorization = param(params, 'authorization');
  const token = param(params, 'token');
  if (authorization !== undefined && token !== undefined && token !== '') return { mistake: TWO_IDENTITIES };
  if (authorization !== undefined) {
    const bearer = typeof authorization === 'string' && /^Bearer\s+(\S{1,512})$/i.exec(authorization)?.[1];
    if (bearer && isApiKeyShaped(bearer)) return { mistake: API_KEYS_OVER_HTTP_ONLY };
    return bearer
      ? { identity: { kind: 'visitor', tokenHash: hashToken(bearer) }, appkey }
      : { mistake: 'authorization must be "Bearer <visitor token>"' };
  }
  if (token !== undefined && token !== '') {
    return typeof token === 'string' && SESSION_ID.test(token)
      ? { identity: { kind: 'agent', sessionId: token }, appkey }
      : { mistake: 'token must be an agent Session ID (a visitor token goes in authorization as Bearer)' };
  }
  if (upgradeSession === false) return { mistake: 'token given more than once on the upgrade request' };
  return upgradeSession
    ? { identity: { kind: 'agent', sessionId: upgradeSession }, appkey }
    : { mistake: 'No identity: send token (agent) or authorization (Bearer visitor token), or log in' };
}
