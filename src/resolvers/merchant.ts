import { eq } from 'drizzle-orm';
import { type FeatureSwitches, type Merchant, merchants } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { unknownAppkeys } from './budgets/failed-lookups.js';

export interface UploadLimits {
  imageMaxBytes: number;
  fileMaxBytes: number;
  videoMaxBytes: number;
  voiceMaxBytes: number;
}

export const uploadLimitsOf = (m: Merchant): UploadLimits => ({
  imageMaxBytes: m.imageMaxBytes,
  fileMaxBytes: m.fileMaxBytes,
  videoMaxBytes: m.videoMaxBytes,
  voiceMaxBytes: m.voiceMaxBytes,
});

export interface VisitorAttributeDef {
  key: string;
  label: string;
  type: string;
  /** Image attributes are never editable, whatever the configuration says. */
  editable: boolean;
}

export const isEditable = (type: string, editable: boolean) => editable && type !== 'image';

/**
 * The merchant's configuration (row, groups, attribute definitions) through the instance's
 * configuration cache (merchant-config.ts): from memory while it is fresh. Undefined: no such merchant.
 */
export function merchantConfig(deps: Deps, merchantId: string) {
  return deps.configCache.get(merchantId);
}

/** The merchant's visitor attribute configuration, in display order. */
export async function loadAttributeDefs(deps: Deps, merchantId: string): Promise<VisitorAttributeDef[]> {
  return (await merchantConfig(deps, merchantId))?.attributeDefs ?? [];
}

/**
 * What a merchant allows visitors to send: the upload limits (the bootstrap's `upload_limits`)
 * and the feature switches, through the configuration cache. The one lookup for uploads.
 */
export async function loadUploadPolicy(
  deps: Deps,
  merchantId: string,
): Promise<{ merchant: Merchant; limits: UploadLimits; switches: FeatureSwitches } | undefined> {
  const config = await merchantConfig(deps, merchantId);
  if (!config) return undefined;
  return { merchant: config.merchant, limits: uploadLimitsOf(config.merchant), switches: config.merchant.switches };
}

/** The merchant of a public appkey: from the configuration cache when it knows the appkey, else the database. */
export async function findMerchantByAppkey(deps: Deps, appkey: string): Promise<Merchant | undefined> {
  return (await cachedMerchantOfAppkey(deps, appkey)) ?? lookUpAppkey(deps, appkey);
}

/**
 * As findMerchantByAppkey, for a Pusher upgrade (`/app/{appkey}`, no identity needed): a known
 * appkey is answered from the configuration cache, and an unknown one, which costs a database
 * lookup each time, is counted against the client address (PUSHER_UNKNOWN_APPKEYS_PER_MINUTE);
 * past it the address is refused RATE_LIMITED before the lookup.
 */
export async function findPusherAppMerchant(
  deps: Deps,
  appkey: string,
  clientAddress: string,
): Promise<Merchant | undefined> {
  const cached = await cachedMerchantOfAppkey(deps, appkey);
  if (cached) return cached;
  const unknown = unknownAppkeys(deps);
  await unknown.refuseIfSpent(clientAddress);
  const merchant = await lookUpAppkey(deps, appkey);
  if (!merchant) await unknown.charge(clientAddress);
  return merchant;
}

async function cachedMerchantOfAppkey(deps: Deps, appkey: string): Promise<Merchant | undefined> {
  const merchantId = deps.configCache.merchantIdOfAppkey(appkey);
  if (merchantId === undefined) return undefined;
  const merchant = (await merchantConfig(deps, merchantId))?.merchant;
  return merchant?.appkey === appkey ? merchant : undefined;
}

async function lookUpAppkey(deps: Deps, appkey: string): Promise<Merchant | undefined> {
  const [merchant] = await deps.db.select().from(merchants).where(eq(merchants.appkey, appkey)).limit(1);
  if (merchant) deps.configCache.rememberAppkey(appkey, merchant.id);
  return merchant;
}
