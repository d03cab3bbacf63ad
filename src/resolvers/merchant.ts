import { asc, eq, sql } from 'drizzle-orm';
import { preparedQuery } from '../db/prepared.js';
import { type Merchant, merchants, visitorAttributeDefs } from '../db/schema.js';
import type { Deps } from '../deps.js';

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

const attributeDefsOf = preparedQuery((db) =>
  db
    .select()
    .from(visitorAttributeDefs)
    .where(eq(visitorAttributeDefs.merchantId, sql.placeholder('merchantId')))
    .orderBy(asc(visitorAttributeDefs.position), asc(visitorAttributeDefs.key))
    .prepare('attribute_defs_of'),
);

/** The merchant's visitor attribute configuration, in display order. */
export async function loadAttributeDefs(deps: Deps, merchantId: string): Promise<VisitorAttributeDef[]> {
  const rows = await attributeDefsOf(deps.db).execute({ merchantId });
  return rows.map((d) => ({ key: d.key, label: d.label, type: d.type, editable: isEditable(d.type, d.editable) }));
}

export async function findMerchantByAppkey(deps: Deps, appkey: string): Promise<Merchant | undefined> {
  const [merchant] = await deps.db.select().from(merchants).where(eq(merchants.appkey, appkey)).limit(1);
  return merchant;
}
