import { createHmac, randomInt, timingSafeEqual } from 'node:crypto';
import { and, eq, gt, isNull, ne, sql } from 'drizzle-orm';
import { z } from 'zod';
import { preparedQuery } from '../db/prepared.js';
import { createRowCache, type RowCache } from '../db/row-cache.js';
import { type BusinessHoursCalendar, conversations, visitorAttributes, visitors, visitorTokens } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import { isApiKeyShaped, newId, newSecret } from '../ids.js';
import { type BusinessHoursView, businessHoursAt } from './availability/business-hours.js';
import { chargeVisitorRead } from './budgets/chat.js';
import { displayName, languageTag, parseInput, required, text } from './inputs.js';
import { enqueueWebhookEvent } from './integration/webhooks/events.js';
import { findMerchantByAppkey, merchantConfig, type UploadLimits, uploadLimitsOf } from './merchant.js';
import { announceVisitorTokenRevoked } from './merchant-config.js';
import { visitorKey } from './outbox/enqueue.js';
import { hashToken, type VisitorViewer } from './viewer.js';
import { announceOnline } from './visitor-online.js';

export type Switch = 'on' | 'off';

export interface VisitorAttribute {
  key: string;
  label: string;
  type: string;
  value: string | number | boolean | null;
  editable: boolean;
}

export interface VisitorBootstrap {
  visitor: {
    nickname: string;
    avatar: string;
    uid: string;
    lang: string;
    channel: string;
    attributes: VisitorAttribute[];
  };
  setting: {
    appname: string;
    appkey: string;
    wsAddress: string;
    uploadLimits: UploadLimits;
    /** Absent (undefined) when the merchant has not configured the switch. */
    voice?: Switch;
    sound?: Switch;
    uploadFile?: Switch;
    uploadImg?: Switch;
    emoji?: Switch;
    sessionInviteRating: Switch;
    sessionInviteResolved: Switch;
    verified: boolean;
    paid: number;
    /** Contact details asked of a visitor leaving a message (`name`, `email`, `phone`). */
    contactFields: string[];
  };
  /** Whether the merchant is open now by its business hours (always open without a calendar). */
  businessHours: BusinessHoursView;
}

/**
 * The visitor and its stored attribute values in one statement: one row per value (one row with
 * a null key when it has none). The merchant's definitions come from the configuration cache.
 */
const visitorWithValues = preparedQuery((db) =>
  db
    .select({ visitor: visitors, key: visitorAttributes.key, value: visitorAttributes.value })
    .from(visitors)
    .leftJoin(visitorAttributes, eq(visitorAttributes.visitorId, visitors.id))
    .where(and(eq(visitors.id, sql.placeholder('visitorId')), eq(visitors.merchantId, sql.placeholder('merchantId'))))
    .prepare('visitor_with_values'),
);

type VisitorRows = Awaited<ReturnType<ReturnType<typeof visitorWithValues>['execute']>>;
const visitorRowCaches = new WeakMap<Deps['database'], RowCache<VisitorRows>>();
/** Embedded only (src/db/row-cache.ts): a bootstrap repeated without a write to the visitor costs no statement. */
function visitorRows(deps: Deps): RowCache<VisitorRows> {
  let cache = visitorRowCaches.get(deps.database);
  if (!cache) {
    cache = createRowCache(deps.database, { tables: ['visitors', 'visitor_attributes'], max: 10_000 });
    visitorRowCaches.set(deps.database, cache);
  }
  return cache;
}

/**
 * The visitor chat page's first call: its profile, the real-time connection settings, the
 * feature switches and upload limits. Also announces the visitor on `global-{bid}`.
 */
export async function loadVisitorBootstrap(
  deps: Deps,
  viewer: VisitorViewer,
  opts: { wsAddress: string },
): Promise<VisitorBootstrap> {
  // A visitor's reads have a budget, counted before any statement (budgets/chat.ts).
  await chargeVisitorRead(deps, viewer);
  // The visitor's own rows from the database (or, embedded, from memory until a write to them);
  // the merchant's configuration from memory.
  const { visitorId, merchantId } = viewer;
  const [rows, config] = await Promise.all([
    visitorRows(deps).read(`${merchantId}/${visitorId}`, () =>
      visitorWithValues(deps.db).execute({ visitorId, merchantId }),
    ),
    merchantConfig(deps, merchantId),
  ]);
  const visitor = rows[0]?.visitor;
  if (!visitor || !config)
    throw new DomainError('VISITOR_UNAUTHENTICATED', 'Visitor not found: get a new visitor token');
  const { merchant } = config;
  const s = merchant.switches;
  // The configured attributes the visitor has a value for, in the definitions' display order.
  const stored = new Map(rows.flatMap((r) => (r.key === null ? [] : [[r.key, r.value] as const])));

  void announceOnline(deps, merchant.bid, visitor);

  return {
    visitor: {
      nickname: visitor.nickname,
      avatar: visitor.avatar,
      uid: visitor.id,
      lang: visitor.lang,
      channel: visitor.channel,
      attributes: config.attributeDefs
        .filter((def) => stored.has(def.key))
        .map((def) => ({
          key: def.key,
          label: def.label,
          type: def.type,
          value: stored.get(def.key) ?? null,
          editable: def.editable,
        })),
    },
    setting: {
      appname: merchant.appname,
      appkey: merchant.appkey,
      wsAddress: opts.wsAddress,
      uploadLimits: uploadLimitsOf(merchant),
      voice: asSwitch(s.voice),
      sound: asSwitch(s.sound),
      uploadFile: asSwitch(s.upload_file),
      uploadImg: asSwitch(s.upload_img),
      emoji: asSwitch(s.emoji),
      sessionInviteRating: asSwitch(s.session_invite_rating) ?? 'off',
      sessionInviteResolved: asSwitch(s.session_invite_resolved) ?? 'off',
      verified: merchant.verified,
      paid: merchant.paid,
      contactFields: merchant.contactFields,
    },
    // Computed at every bootstrap from the calendar, never a cached flag.
    businessHours: businessHoursAt(await visitorCalendar(deps, config, visitorId), deps.now()),
  };
}

/**
 * The calendar a visitor follows: its group's own, else the merchant's. Its group is that of its
 * open conversation, else the default group (where a new conversation goes). Only a merchant
 * whose groups keep different hours costs a statement (the open conversation's group).
 */
async function visitorCalendar(
  deps: Deps,
  config: NonNullable<Awaited<ReturnType<typeof merchantConfig>>>,
  visitorId: string,
): Promise<BusinessHoursCalendar | null> {
  const defaultGroup = config.groups.find((g) => g.isDefault);
  const calendarOf = (groupId: string | null) =>
    (config.groups.find((g) => g.id === groupId) ?? defaultGroup)?.businessHours ?? config.merchant.businessHours;
  const usual = calendarOf(defaultGroup?.id ?? null);
  const same = JSON.stringify(usual);
  if (config.groups.every((g) => JSON.stringify(calendarOf(g.id)) === same)) return usual;
  const [open] = await deps.db
    .select({ groupId: conversations.groupId })
    .from(conversations)
    .where(
      and(
        eq(conversations.merchantId, config.merchant.id),
        eq(conversations.visitorId, visitorId),
        ne(conversations.state, 'closed'),
      ),
    )
    .limit(1);
  return open ? calendarOf(open.groupId) : usual;
}

/** Switches are `on` or `off`; anything else stored is treated as not configured. */
const asSwitch = (value: string | undefined): Switch | undefined =>
  value === 'on' || value === 'off' ? value : undefined;

export const visitorTokenInput = z.object({
  appkey: required(128),
  /** The merchant's own user id, for an identified visitor (with `userHash`). */
  userId: text(128).optional(),
  /** Hex HMAC-SHA256 of `userId` under the merchant's identity secret. */
  userHash: text(128).optional(),
  nickname: displayName(64).optional(),
  lang: languageTag.optional(),
});
export type VisitorTokenInput = z.output<typeof visitorTokenInput>;

export interface IssuedVisitorToken {
  token: string;
  uid: string;
  expiresIn: number;
}

const TOKEN_LIMIT = { name: 'visitor-token-ip', points: 30, durationSeconds: 60 };

/**
 * Issues a visitor token for the merchant of a public `appkey`: a new anonymous visitor, or,
 * with a valid `userHash`, the same identified visitor (same uid) every time.
 */
export async function issueVisitorToken(
  deps: Deps,
  given: z.input<typeof visitorTokenInput>,
  clientIp: string,
): Promise<IssuedVisitorToken> {
  const input = parseInput(visitorTokenInput, given);
  await deps
    .rateLimiter(TOKEN_LIMIT)
    .consume(clientIp, (wait) => `Too many visitor token requests, please wait ${wait} seconds`);
  const merchant = await findMerchantByAppkey(deps, input.appkey);
  if (!merchant) throw new DomainError('APPKEY_INVALID', 'Unknown appkey');

  let visitorId: string;
  if (input.userId !== undefined || input.userHash !== undefined) {
    if (!input.userId || !input.userHash || !validUserHash(merchant.identitySecret, input.userId, input.userHash)) {
      throw new DomainError('VISITOR_IDENTITY_INVALID', 'user_hash does not match user_id');
    }
    visitorId = await findOrCreateIdentifiedVisitor(deps, merchant.id, input);
  } else {
    visitorId = await createVisitor(deps, merchant.id, input);
  }

  const token = newVisitorToken();
  const expiresIn = deps.config.visitorTokenTtlSeconds;
  await deps.db.insert(visitorTokens).values({
    tokenHash: hashToken(token),
    visitorId,
    merchantId: merchant.id,
    expiresAt: new Date(deps.now() + expiresIn * 1000),
  });
  return { token, uid: visitorId, expiresIn };
}

/**
 * A new visitor token (32 random bytes, base64url), drawn from `draw`. base64url may start with
 * `prly_` (about once in 10^9): such a token would read as an API key, so it is drawn again.
 */
export function newVisitorToken(draw = () => newSecret(32)) {
  let token = draw();
  while (isApiKeyShaped(token)) token = draw();
  return token;
}

/** Revokes one visitor token at once (e.g. the merchant's user logged out); true when it was live. */
export async function revokeVisitorToken(deps: Deps, token: string): Promise<boolean> {
  const revoked = await deps.db
    .update(visitorTokens)
    .set({ revokedAt: new Date(deps.now()) })
    .where(
      and(
        eq(visitorTokens.tokenHash, hashToken(token)),
        isNull(visitorTokens.revokedAt),
        gt(visitorTokens.expiresAt, new Date(deps.now())),
      ),
    )
    .returning({ hash: visitorTokens.tokenHash });
  // Instances that cached this token's check drop it (they would anyway within 1 s).
  if (revoked[0]) await announceVisitorTokenRevoked(deps, revoked[0].hash);
  return revoked.length > 0;
}

/** The `user_hash` a merchant's server computes for its user: hex HMAC-SHA256 of the user id. */
export function userHashFor(identitySecret: string, userId: string) {
  return createHmac('sha256', identitySecret).update(userId).digest('hex');
}

function validUserHash(secret: string, userId: string, userHash: string) {
  // Exactly 64 hex digits: Buffer.from(…, 'hex') would silently drop trailing junk.
  if (!/^[0-9a-f]{64}$/i.test(userHash)) return false;
  const expected = Buffer.from(userHashFor(secret, userId), 'hex');
  return timingSafeEqual(Buffer.from(userHash, 'hex'), expected);
}

async function createVisitor(deps: Deps, merchantId: string, input: VisitorTokenInput, externalUserId?: string) {
  const id = newId('v');
  await deps.db.transaction(async (tx) => {
    const [row] = await tx
      .insert(visitors)
      .values({
        id,
        merchantId,
        externalUserId,
        nickname: input.nickname || `Visitor ${randomInt(1000, 10000)}`,
        lang: input.lang || 'en',
        channel: `visitor-${newSecret(24)}`,
      })
      .onConflictDoNothing()
      .returning();
    // For webhooks only: sent by the outbox drain of any instance within a couple of seconds.
    if (row)
      await enqueueWebhookEvent(
        tx,
        visitorKey(id),
        merchantId,
        id,
        'visitor.created',
        { visitorId: id, nickname: row.nickname, externalUserId: row.externalUserId },
        deps.now(),
      );
  });
  return id;
}

async function findOrCreateIdentifiedVisitor(
  deps: Deps,
  merchantId: string,
  input: VisitorTokenInput & { userId?: string },
) {
  const find = () =>
    deps.db
      .select({ id: visitors.id })
      .from(visitors)
      .where(and(eq(visitors.merchantId, merchantId), eq(visitors.externalUserId, input.userId as string)))
      .limit(1);
  const [existing] = await find();
  if (existing) return existing.id;
  // Two first requests at once: the unique index lets one insert win, both read the winner.
  await createVisitor(deps, merchantId, input, input.userId);
  const [created] = await find();
  if (!created) throw new Error('identified visitor vanished after insert');
  return created.id;
}
