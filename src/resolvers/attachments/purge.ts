import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { agents, attachments, merchants } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { badInput, DomainError } from '../../errors.js';
import { parseInput, text } from '../inputs.js';
import { deleteAttachments } from './cleanup.js';

/** The operator's purge of one uploader's files (`npm run cli -- attachments:purge`). */

export const purgeUploadsInput = z.object({
  bid: text(32).refine((s) => s.length > 0, 'is required'),
  /** The visitor's uid (as agents see it). */
  visitor: text(64).optional(),
  /** The agent's login name. */
  agent: text(64).optional(),
});
export type PurgeUploadsInput = z.input<typeof purgeUploadsInput>;

/**
 * Removes every upload of one uploader of a merchant, sent as a message or not: rows and stored
 * objects (thumbnails too). Messages that carried one keep their text and lose the attachment
 * (`attachment_id` becomes null). For an abuser who filled the storage. Returns how many uploads
 * and bytes went.
 */
export async function purgeUploads(deps: Deps, raw: PurgeUploadsInput): Promise<{ removed: number; bytes: number }> {
  const input = parseInput(purgeUploadsInput, raw);
  if (!input.visitor === !input.agent) throw badInput('Name the uploader: --visitor or --agent');
  const [merchant] = await deps.db.select().from(merchants).where(eq(merchants.bid, input.bid)).limit(1);
  if (!merchant) throw new DomainError('NOT_FOUND', 'Merchant not found');
  let uploader: { type: 'visitor' | 'agent'; id: string };
  if (input.agent) {
    const [agent] = await deps.db
      .select({ id: agents.id })
      .from(agents)
      .where(and(eq(agents.merchantId, merchant.id), eq(agents.username, input.agent)))
      .limit(1);
    if (!agent) throw new DomainError('NOT_FOUND', 'No such agent of this merchant');
    uploader = { type: 'agent', id: agent.id };
  } else {
    uploader = { type: 'visitor', id: input.visitor as string };
  }
  const { removed, bytes } = await deleteAttachments(
    deps,
    deps.storage,
    and(
      eq(attachments.merchantId, merchant.id),
      eq(attachments.uploaderType, uploader.type),
      eq(attachments.uploaderId, uploader.id),
    ),
  );
  deps.log.info({ merchantId: merchant.id, uploader: uploader.type, removed, bytes }, 'uploads purged');
  return { removed, bytes };
}
