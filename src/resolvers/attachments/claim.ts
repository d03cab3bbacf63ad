import { and, eq } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { type AttachmentKind, attachments, merchants } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { badInput, DomainError } from '../../errors.js';
import type { AttachmentView } from '../event-catalog.js';
import { attachmentViewOf } from './download.js';
import { lockQuota, quotaExceeded, storageUsed, type Uploader } from './policy.js';

/** The message domain's claim on an upload (marks it referenced, out of the cleanup's reach). */

/**
 * For the message domain, inside its send transaction: the attachment a message refers to must
 * be a finished upload of the same sender (uploader and merchant) and, when given, of the
 * message's kind; it is then marked referenced, which keeps the cleanup job away from it and
 * brings its bytes into the merchant's storage quota (refused when they do not fit).
 */
export async function claimAttachmentForMessage(
  deps: Deps,
  tx: Db,
  sender: Uploader,
  attachmentId: string,
  expectedKind?: AttachmentKind,
): Promise<AttachmentView> {
  const [row] = await tx
    .select()
    .from(attachments)
    .where(
      and(
        eq(attachments.id, attachmentId),
        eq(attachments.merchantId, sender.merchantId),
        eq(attachments.uploaderType, sender.type),
        eq(attachments.uploaderId, sender.id),
      ),
    )
    .for('update')
    .limit(1);
  if (!row)
    throw new DomainError('NOT_FOUND', 'No such attachment: upload the file first (only its uploader may send it)');
  if (expectedKind && row.kind !== expectedKind) {
    throw badInput(`The attachment is of kind ${row.kind}, not ${expectedKind}`);
  }
  if (!row.referencedAt) {
    // From now on its bytes count in the merchant's quota (policy.ts storageUsed): it must fit.
    await lockQuota(tx, sender.merchantId);
    const [merchant] = await tx.select().from(merchants).where(eq(merchants.id, sender.merchantId)).limit(1);
    if (merchant && (await storageUsed(tx, sender.merchantId)) + row.size > merchant.storageQuotaBytes)
      throw quotaExceeded(merchant);
    await tx
      .update(attachments)
      .set({ referencedAt: new Date(deps.now()) })
      .where(eq(attachments.id, row.id));
  }
  return attachmentViewOf(deps, row);
}
