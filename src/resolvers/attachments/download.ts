import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { and, eq, inArray } from 'drizzle-orm';
import { attachments, messages } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import type { AttachmentView } from '../event-catalog.js';
import { type AgentViewer, requireOnlineReception, type VisitorViewer } from '../viewer.js';
import { IMAGE_MIMES } from './sniff.js';

/** Downloads: signed expiring URLs, the views clients see, who may fetch an attachment. */

export type AttachmentVariant = 'file' | 'thumbnail';

const urlKeys = new Map<string, Buffer>();
/** The URL signing key, derived from SESSION_SECRET (never the secret itself). */
function urlKey(secret: string): Buffer {
  let key = urlKeys.get(secret);
  if (!key) {
    key = Buffer.from(hkdfSync('sha256', secret, 'parley', 'attachment download urls v1', 32));
    urlKeys.set(secret, key);
  }
  return key;
}

const signature = (deps: Deps, id: string, variant: AttachmentVariant, expires: number) =>
  createHmac('sha256', urlKey(deps.config.sessionSecret)).update(`${id}\n${variant}\n${expires}`).digest('base64url');

/** Expiry rounded up to 5 minutes, so a browser can cache the same URL for a while. */
const EXPIRY_STEP_SECONDS = 300;

/** A signed, expiring download path; whoever holds it may fetch the attachment until it expires. */
export function signedAttachmentPath(deps: Deps, id: string, variant: AttachmentVariant = 'file'): string {
  const earliest = Math.floor(deps.now() / 1000) + deps.config.attachments.urlTtlSeconds;
  const expires = Math.ceil(earliest / EXPIRY_STEP_SECONDS) * EXPIRY_STEP_SECONDS;
  const path = variant === 'file' ? `/attachments/${id}` : `/attachments/${id}/thumbnail`;
  return `${path}?expires=${expires}&sig=${signature(deps, id, variant, expires)}`;
}

/** Whether a download's `expires` and `sig` are this server's and still valid. */
export function verifyAttachmentSignature(
  deps: Deps,
  id: string,
  variant: AttachmentVariant,
  expires: string | undefined,
  sig: string | undefined,
): boolean {
  if (!expires || !sig || !/^\d{1,12}$/.test(expires)) return false;
  const at = Number(expires);
  if (at * 1000 < deps.now()) return false;
  const expected = Buffer.from(signature(deps, id, variant, at));
  const given = Buffer.from(sig);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

type AttachmentRow = typeof attachments.$inferSelect;

/** An attachment as clients see it, with freshly signed URLs. */
export const attachmentViewOf = (deps: Deps, a: AttachmentRow): AttachmentView => ({
  attachmentId: a.id,
  kind: a.kind,
  mime: a.mime,
  size: a.size,
  name: a.name,
  url: signedAttachmentPath(deps, a.id),
  thumbnailUrl: a.thumbnailKey ? signedAttachmentPath(deps, a.id, 'thumbnail') : null,
});

/** The views of several attachments (history pages), keyed by id, scoped by the merchant. */
export async function loadAttachmentViews(
  deps: Deps,
  merchantId: string,
  ids: string[],
): Promise<Map<string, AttachmentView>> {
  if (ids.length === 0) return new Map();
  const rows = await deps.db
    .select()
    .from(attachments)
    .where(and(eq(attachments.merchantId, merchantId), inArray(attachments.id, ids)));
  return new Map(rows.map((r) => [r.id, attachmentViewOf(deps, r)]));
}

/**
 * Authorizes a download: a valid signed URL, or an identity that may see the attachment (any
 * agent of its merchant with online reception; the visitor who uploaded it or whose conversation
 * carries it). A ticket agent of its merchant is refused as on every chat endpoint (FORBIDDEN);
 * anything else, another merchant included, is "not found", so ids leak nothing.
 */
export async function authorizeDownload(
  deps: Deps,
  request: {
    id: string;
    variant: AttachmentVariant;
    expires?: string;
    sig?: string;
    /** Resolved only when the URL is not validly signed. */
    viewer: () => Promise<VisitorViewer | AgentViewer | undefined>;
  },
): Promise<AttachmentRow> {
  const notFound = () => new DomainError('NOT_FOUND', 'No such attachment');
  const [row] = await deps.db.select().from(attachments).where(eq(attachments.id, request.id)).limit(1);
  if (verifyAttachmentSignature(deps, request.id, request.variant, request.expires, request.sig)) {
    if (!row) throw notFound();
    return row;
  }
  const viewer = await request.viewer().catch(() => undefined);
  if (!row || !viewer || viewer.merchantId !== row.merchantId) throw notFound();
  // The chat's rule: a ticket agent has no online reception (1403), so no unsigned download either.
  if (viewer.kind === 'agent') {
    requireOnlineReception(viewer);
    return row;
  }
  if (row.uploaderType === 'visitor' && row.uploaderId === viewer.visitorId) return row;
  const [carried] = await deps.db
    .select({ id: messages.id })
    .from(messages)
    .where(
      and(
        eq(messages.attachmentId, row.id),
        eq(messages.visitorId, viewer.visitorId),
        eq(messages.merchantId, viewer.merchantId),
      ),
    )
    .limit(1);
  if (!carried) throw notFound();
  return row;
}

/** Whether a browser may show the attachment in place: re-encoded images, audio and video only. */
export const rendersInline = (a: Pick<AttachmentRow, 'kind' | 'mime'>) =>
  (a.kind === 'image' && (IMAGE_MIMES as readonly string[]).includes(a.mime)) ||
  ((a.kind === 'video' || a.kind === 'voice') && /^(audio|video)\//.test(a.mime));
