import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { and, eq, gt, isNull, sql } from 'drizzle-orm';
import { merchants, visitors, visitorTokens } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { badInput, DomainError } from '../errors.js';
import { authorizeChannel, type ChannelViewer } from './channels.js';
import type { VisitorViewer } from './viewer.js';

/**
 * Channel authorization for the Pusher protocol (docs/realtime.md "Pusher protocol"): the
 * rules of which channel a connection may read, as the Pusher transport and its channel
 * authorization endpoint need them. The rules themselves are those of channels.ts.
 */

/** Pusher's prefix of channels that need a signature from the authorization endpoint. */
export const PRIVATE_PREFIX = 'private-';

/** A Pusher socket id as the gateway issues it: two decimal numbers joined by a dot. */
const SOCKET_ID = /^\d{1,16}\.\d{1,16}$/;

/** How long a signature's identity waits, server-side, for the subscription it authorizes. */
const GRANT_TTL_SECONDS = 120;

/** The identity a signature was issued to, kept server-side until the subscription arrives. */
/** A visitor's grant holds its token's SHA-256 (`hashToken`), never the token (issue 27, row 9). */
export type ChannelGrant = { kind: 'agent'; sessionId: string } | { kind: 'visitor'; tokenHash: string };

/**
 * The merchant's Pusher app secret: derived from SESSION_SECRET and the merchant id, so it is
 * per merchant, needs no column, and never leaves the server (only signatures made with it do).
 * Rotating SESSION_SECRET rotates every app secret.
 */
function appSecretOf(deps: Pick<Deps, 'config'>, merchantId: string): Buffer {
  return createHmac('sha256', deps.config.sessionSecret).update(`pusher-app-secret:${merchantId}`).digest();
}

/** Pusher's channel signature: hex HMAC-SHA256 of `<socket_id>:<channel_name>` with the app secret. */
function signature(deps: Pick<Deps, 'config'>, merchantId: string, socketId: string, channelName: string) {
  return createHmac('sha256', appSecretOf(deps, merchantId)).update(`${socketId}:${channelName}`).digest('hex');
}

/** Where the grant of a socket's channel is kept (tests read it to see which identity it names). */
export const grantKey = (socketId: string, channelName: string) =>
  `pusher-grant:${socketId}:${createHash('sha256').update(channelName).digest('base64url')}`;

/**
 * The channel authorization endpoint's work (pusher-js `POST` with `socket_id` and
 * `channel_name`): the caller's identity must be allowed the channel without its `private-`
 * prefix (`private-agent-{its id}`, `private-global-{its bid}`, `private-<its visitor channel>`).
 * Answers Pusher's `{auth: "<appkey>:<signature>"}` and keeps which identity it was issued to,
 * so the subscription runs under that identity (Session end, revocation) like any other.
 */
export async function authorizePrivateChannel(
  deps: Deps,
  viewer: ChannelViewer,
  grant: ChannelGrant,
  input: { socketId: unknown; channelName: unknown; address?: string },
): Promise<{ auth: string }> {
  const { socketId, channelName } = input;
  // Each call stores a grant for 120 s: budgeted per client address and per identity
  // (PUSHER_AUTH_PER_MINUTE), so nobody can fill the store with grants for made-up sockets.
  const limit = { name: 'pusher-auth', points: deps.config.hardening.pusherAuthPerMinute, durationSeconds: 60 };
  const wait = (seconds: number) => `Too many channel authorizations: retry in ${seconds} s`;
  if (input.address) await deps.rateLimiter(limit).consume(`ip:${input.address}`, wait);
  await deps
    .rateLimiter(limit)
    .consume(viewer.kind === 'visitor' ? `v:${viewer.visitorId}` : `a:${viewer.agentId}`, wait);
  if (typeof socketId !== 'string' || !SOCKET_ID.test(socketId)) throw badInput('socket_id is not a socket id');
  if (typeof channelName !== 'string' || channelName.length > 200 || !channelName.startsWith(PRIVATE_PREFIX)) {
    throw badInput(`channel_name must be a ${PRIVATE_PREFIX} channel of at most 200 characters`);
  }
  authorizeChannel(viewer, channelName.slice(PRIVATE_PREFIX.length));
  const [merchant] = await deps.db
    .select({ appkey: merchants.appkey })
    .from(merchants)
    .where(eq(merchants.id, viewer.merchantId))
    .limit(1);
  if (!merchant) throw new DomainError('FORBIDDEN', 'No merchant for this identity');
  await deps.kv.set(grantKey(socketId, channelName), JSON.stringify(grant), GRANT_TTL_SECONDS);
  return { auth: `${merchant.appkey}:${signature(deps, viewer.merchantId, socketId, channelName)}` };
}

/**
 * Checks a `pusher:subscribe` to a `private-` channel: the signature must be this socket's and
 * this channel's, made with the connection's merchant's secret. Returns the identity it was
 * issued to (taken once). Throws FORBIDDEN otherwise.
 */
export async function verifyPrivateSubscription(
  deps: Deps,
  merchant: { id: string; appkey: string },
  socketId: string,
  channelName: string,
  auth: unknown,
): Promise<ChannelGrant> {
  const refused = () => new DomainError('FORBIDDEN', 'Invalid signature: authorize the channel again');
  if (typeof auth !== 'string') throw refused();
  const colon = auth.indexOf(':');
  const given = Buffer.from(auth.slice(colon + 1), 'utf8');
  const expected = Buffer.from(signature(deps, merchant.id, socketId, channelName), 'utf8');
  if (
    auth.slice(0, colon) !== merchant.appkey ||
    given.length !== expected.length ||
    !timingSafeEqual(given, expected)
  ) {
    throw refused();
  }
  const stored = await deps.kv.take(grantKey(socketId, channelName));
  if (!stored) throw refused();
  return JSON.parse(stored) as ChannelGrant;
}

/**
 * A visitor channel named as the spec names it, read by name over the Pusher protocol: the name
 * is server-generated (`visitor-` + 192 random bits) and given only to its visitor, so it is a
 * capability — valid while its visitor, of the connection's merchant, holds at least one live
 * (unrevoked, unexpired) token. Undefined otherwise.
 */
export async function visitorOfChannelCapability(
  deps: Deps,
  merchantId: string,
  channel: string,
): Promise<VisitorViewer | undefined> {
  const [row] = await deps.db
    .select({ visitorId: visitors.id, merchantId: visitors.merchantId, bid: merchants.bid, channel: visitors.channel })
    .from(visitors)
    .innerJoin(merchants, eq(merchants.id, visitors.merchantId))
    .where(
      and(
        eq(visitors.channel, channel),
        eq(visitors.merchantId, merchantId),
        sql`exists (${deps.db
          .select({ one: sql`1` })
          .from(visitorTokens)
          .where(
            and(
              eq(visitorTokens.visitorId, visitors.id),
              isNull(visitorTokens.revokedAt),
              gt(visitorTokens.expiresAt, new Date(deps.now())),
            ),
          )})`,
      ),
    )
    .limit(1);
  return row ? { kind: 'visitor', ...row } : undefined;
}

/**
 * As visitorOfChannelCapability, for a subscription a client asks for by name: a socket needs no
 * token for it, so one could ask for made-up channels one after another, a statement each; the
 * lookups are counted per client address first (PUSHER_CHANNEL_LOOKUPS_PER_MINUTE, RATE_LIMITED
 * past it). The connection's own re-checks of a channel it holds are not counted.
 */
export async function visitorOfRequestedChannel(
  deps: Deps,
  merchantId: string,
  channel: string,
  address: string,
): Promise<VisitorViewer | undefined> {
  const perMinute = deps.config.hardening.pusherChannelLookupsPerMinute;
  await deps
    .rateLimiter({ name: 'pusher-channel-lookups', points: perMinute, durationSeconds: 60 })
    .consume(address, (wait) => `Too many visitor channels asked for: retry in ${wait} s`);
  return visitorOfChannelCapability(deps, merchantId, channel);
}

/** The same identity as the one a connection already has (a socket never mixes identities). */
export function sameIdentity(a: ChannelGrant, b: ChannelGrant): boolean {
  if (a.kind === 'agent' && b.kind === 'agent') return a.sessionId === b.sessionId;
  if (a.kind === 'visitor' && b.kind === 'visitor') return a.tokenHash === b.tokenHash;
  return false;
}
