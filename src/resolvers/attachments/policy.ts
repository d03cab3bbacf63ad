import { and, eq, isNotNull, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { type AttachmentKind, attachments, type Merchant } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { badInput, DomainError } from '../../errors.js';
import { loadUploadPolicy, uploadLimitsOf } from '../merchant.js';
import type { AgentViewer, VisitorViewer } from '../viewer.js';
import { requireByteBudget } from './budgets.js';

/**
 * Attachments (this folder): what a merchant allows (policy.ts), the type of a file from its
 * bytes (sniff.ts), receiving and storing an upload (upload.ts), signed downloads and views
 * (download.ts), a message's claim on its upload (claim.ts) and the cleanup job (cleanup.ts).
 *
 * This file: the uploader, the merchant's switches and limits, the storage quota.
 */

export const ATTACHMENT_KINDS = ['image', 'file', 'video', 'voice'] as const satisfies readonly AttachmentKind[];
/** Bytes of a multipart body that are not the file (boundaries, part headers, the `kind` field). */
export const MULTIPART_ALLOWANCE = 16 * 1024;

/** Who uploads: an attachment belongs to its uploader and the uploader's merchant. */
export interface Uploader {
  type: 'visitor' | 'agent';
  id: string;
  merchantId: string;
  /** The client address the upload comes from (visitors' byte budget per address), when known. */
  address?: string;
}

export const uploaderOf = (viewer: VisitorViewer | AgentViewer, address?: string): Uploader => ({
  ...(viewer.kind === 'visitor'
    ? { type: 'visitor', id: viewer.visitorId, merchantId: viewer.merchantId }
    : { type: 'agent', id: viewer.agentId, merchantId: viewer.merchantId }),
  ...(address ? { address } : {}),
});

/** The bootstrap's switch of each kind (`upload_limits` and these switches come from the same merchant row). */
const SWITCH_OF = { image: 'upload_img', file: 'upload_file', video: 'upload_file', voice: 'voice' } as const;
const LIMIT_NAME = {
  image: 'image_max_bytes',
  file: 'file_max_bytes',
  video: 'video_max_bytes',
  voice: 'voice_max_bytes',
} as const;

/** What the merchant allows: the limits of `uploadLimitsOf` (the bootstrap's `upload_limits`) and its switches. */
export interface UploadPolicy {
  merchant: Merchant;
  declaredKind?: AttachmentKind;
  /** The most bytes any allowed kind takes (the declared kind's limit when one was given). */
  maxBytes: number;
}

export const limitOf = (m: Merchant, kind: AttachmentKind): number => {
  const limits = uploadLimitsOf(m);
  return {
    image: limits.imageMaxBytes,
    file: limits.fileMaxBytes,
    video: limits.videoMaxBytes,
    voice: limits.voiceMaxBytes,
  }[kind];
};

/** A switch counts as on only when it says `on`: absent (not configured) is off, as the bootstrap shows it. */
const switchOn = (m: Merchant, kind: AttachmentKind) => m.switches[SWITCH_OF[kind]] === 'on';

export function requireSwitch(m: Merchant, kind: AttachmentKind) {
  if (!switchOn(m, kind)) {
    throw new DomainError(
      'FORBIDDEN',
      `Uploads of kind ${kind} are switched off for this merchant (${SWITCH_OF[kind]})`,
    );
  }
}

export const tooLarge = (m: Merchant, kind: AttachmentKind) =>
  new DomainError(
    'PAYLOAD_TOO_LARGE',
    `File larger than the ${kind} limit of ${limitOf(m, kind)} bytes (upload_limits.${LIMIT_NAME[kind]})`,
  );

/**
 * Checks an upload before a byte of it is read: the identity's upload rate and byte budgets, the
 * declared kind's switch, a `Content-Length` that already says the file is too large, a storage
 * quota used up.
 */
export async function prepareUpload(
  deps: Deps,
  uploader: Uploader,
  opts: { declaredKind?: AttachmentKind; contentLength?: number },
): Promise<UploadPolicy> {
  // The bootstrap's own lookup (through the configuration cache): what is advertised is what is enforced.
  const loaded = await loadUploadPolicy(deps, uploader.merchantId);
  if (!loaded) throw new DomainError('NOT_FOUND', 'Merchant not found');
  const { merchant } = loaded;
  const policy: UploadPolicy = { merchant, maxBytes: 0 };
  if (opts.declaredKind) {
    declareKind(policy, opts.declaredKind, opts.contentLength);
  } else {
    const allowed = ATTACHMENT_KINDS.filter((k) => switchOn(merchant, k));
    if (allowed.length === 0) {
      throw new DomainError('FORBIDDEN', 'Uploads are switched off for this merchant (upload_img, upload_file, voice)');
    }
    policy.maxBytes = Math.max(...allowed.map((k) => limitOf(merchant, k)));
    if (opts.contentLength !== undefined && opts.contentLength > policy.maxBytes + MULTIPART_ALLOWANCE) {
      throw new DomainError(
        'PAYLOAD_TOO_LARGE',
        `Request larger than the largest upload limit of ${policy.maxBytes} bytes`,
      );
    }
  }
  const perMinute = deps.config.attachments.uploadsPerMinute;
  await deps
    .rateLimiter({ name: 'upload', points: perMinute, durationSeconds: 60 })
    .consume(
      `${uploader.type}:${uploader.id}`,
      (wait) => `Too many uploads: at most ${perMinute} a minute, retry in ${wait} s`,
    );
  await requireByteBudget(deps, uploader);
  if ((await storageUsed(deps.db, merchant.id)) >= merchant.storageQuotaBytes) throw quotaExceeded(merchant);
  return policy;
}

/**
 * The client says which kind it sends (before the file): that kind's switch and limit apply
 * from the first byte, and a `Content-Length` over the limit is refused without reading.
 */
export function declareKind(policy: UploadPolicy, kind: AttachmentKind, contentLength?: number) {
  if (policy.declaredKind && policy.declaredKind !== kind) throw badInput('kind given twice, differently');
  requireSwitch(policy.merchant, kind);
  policy.declaredKind = kind;
  policy.maxBytes = limitOf(policy.merchant, kind);
  if (contentLength !== undefined && contentLength > policy.maxBytes + MULTIPART_ALLOWANCE) {
    throw tooLarge(policy.merchant, kind);
  }
}

export const quotaExceeded = (m: Merchant) =>
  new DomainError(
    'PAYLOAD_TOO_LARGE',
    `The merchant's attachment storage quota of ${m.storageQuotaBytes} bytes is used up (storage_quota_bytes)`,
  );

/**
 * Bytes that count in the merchant's quota: the attachments messages carry. An upload no message
 * references yet counts only in its uploader's byte budgets and goes after
 * ATTACHMENT_UNREFERENCED_TTL_SECONDS, so anonymous uploads cannot use up a merchant's quota
 * (every upload of its agents would then be refused); sending one as a message brings it in
 * (claim.ts checks the quota then).
 */
export async function storageUsed(db: Db, merchantId: string): Promise<number> {
  const [row] = await db
    .select({ used: sql<string>`coalesce(sum(${attachments.size}), 0)` })
    .from(attachments)
    .where(and(eq(attachments.merchantId, merchantId), isNotNull(attachments.referencedAt)));
  return Number(row?.used ?? 0);
}

/** Takes the merchant's quota lock for the rest of the transaction: quota checks of a merchant run one at a time. */
export const lockQuota = (tx: Db, merchantId: string) =>
  tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`attachments:${merchantId}`}))`);
