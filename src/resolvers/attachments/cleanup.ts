import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { and, eq, inArray, isNull, lt, type SQL } from 'drizzle-orm';
import { attachments } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import type { ObjectStorage } from '../../stores/storage/index.js';
import { incomingDir } from './upload.js';

/** The cleanup job: uploads no message claimed, scratch files and objects a crash left behind. */

/**
 * Scratch files older than this, and stored objects this old that no attachment row names, are
 * leftovers of a crash (an upload takes far less), removed by the cleanup job.
 */
export const CRASH_LEFTOVER_MS = 3600_000;

/**
 * Removes the uploads no message referenced within ATTACHMENT_UNREFERENCED_TTL_SECONDS (rows
 * and objects), and scratch files that a crash left behind. Returns how many uploads went.
 */
export async function removeUnreferencedAttachments(deps: Deps, storage: ObjectStorage): Promise<number> {
  const cutoff = new Date(deps.now() - deps.config.attachments.unreferencedTtlSeconds * 1000);
  // A claim locks the row and sets referenced_at in its transaction: this delete skips it or waits for it.
  const { removed } = await deleteAttachments(
    deps,
    storage,
    and(isNull(attachments.referencedAt), lt(attachments.createdAt, cutoff)),
  );
  const entries = await readdir(incomingDir(deps)).catch(() => [] as string[]);
  for (const entry of entries) {
    const path = join(incomingDir(deps), entry);
    const info = await stat(path).catch(() => undefined);
    if (info && Date.now() - info.mtimeMs > CRASH_LEFTOVER_MS) await rm(path, { force: true });
  }
  if (removed > 0) deps.log.info({ removed }, 'unreferenced attachments removed');
  return removed;
}

/**
 * Deletes the uploads matching `where`, 200 rows a statement, and their stored objects (thumbnails
 * too). Returns how many uploads and bytes went.
 */
export async function deleteAttachments(
  deps: Deps,
  storage: ObjectStorage,
  where: SQL | undefined,
): Promise<{ removed: number; bytes: number }> {
  let removed = 0;
  let bytes = 0;
  for (;;) {
    const batch = await deps.db
      .delete(attachments)
      .where(inArray(attachments.id, deps.db.select({ id: attachments.id }).from(attachments).where(where).limit(200)))
      .returning({
        size: attachments.size,
        storageKey: attachments.storageKey,
        thumbnailKey: attachments.thumbnailKey,
      });
    for (const a of batch) {
      await storage.delete(a.storageKey);
      if (a.thumbnailKey) await storage.delete(a.thumbnailKey);
      bytes += a.size;
    }
    removed += batch.length;
    if (batch.length < 200) break;
  }
  return { removed, bytes };
}

/**
 * Removes one upload no message carries yet (row and objects): an upload that finished while its
 * request was being refused (the adapter answers the refusal, so the file must not stay).
 */
export async function discardUpload(deps: Deps, storage: ObjectStorage, attachmentId: string): Promise<void> {
  const gone = await deps.db
    .delete(attachments)
    .where(and(eq(attachments.id, attachmentId), isNull(attachments.referencedAt)))
    .returning({ storageKey: attachments.storageKey, thumbnailKey: attachments.thumbnailKey });
  for (const a of gone) {
    await storage.delete(a.storageKey);
    if (a.thumbnailKey) await storage.delete(a.thumbnailKey);
  }
}

/** An object key of an upload (`{merchant_id}/{attachment_id}`, or its thumbnail's): the attachment id. */
const UPLOAD_KEY = /^[^/]+\/(att_[A-Za-z0-9_-]+)(\.thumb\.webp)?$/;

/**
 * Removes stored objects that no attachment row names, written more than CRASH_LEFTOVER_MS ago:
 * an upload's object is stored before its row is written, so a crash in between (or a failed
 * removal) leaves one. Only keys shaped as an upload's are considered, so other objects in a
 * shared bucket are never touched. Returns how many objects went.
 */
export async function removeOrphanObjects(deps: Deps, storage: ObjectStorage): Promise<number> {
  const before = new Date(deps.now() - CRASH_LEFTOVER_MS);
  let removed = 0;
  for await (const keys of storage.listWrittenBefore('', before)) {
    const idOfKey = new Map<string, string>();
    for (const key of keys) {
      const id = UPLOAD_KEY.exec(key)?.[1];
      if (id) idOfKey.set(key, id);
    }
    if (idOfKey.size === 0) continue;
    const rows = await deps.db
      .select({ id: attachments.id })
      .from(attachments)
      .where(inArray(attachments.id, [...new Set(idOfKey.values())]));
    const recorded = new Set(rows.map((r) => r.id));
    for (const [key, id] of idOfKey) {
      if (recorded.has(id)) continue;
      await storage.delete(key);
      removed++;
    }
  }
  if (removed > 0) deps.log.info({ removed }, 'attachment objects without a row removed');
  return removed;
}

/**
 * The periodic cleanup, started and stopped by the composition root: unreferenced uploads and
 * scratch files on every run, objects without a row on the first run and then once an hour
 * (that lists the whole bucket).
 */
export function startAttachmentCleanup(
  deps: Deps,
  storage: ObjectStorage,
  opts: { intervalMs?: number } = {},
): { stop(): Promise<void> } {
  const intervalMs = opts.intervalMs ?? Math.min(300_000, deps.config.attachments.unreferencedTtlSeconds * 250);
  let orphansDue = 0;
  const run = async () => {
    await removeUnreferencedAttachments(deps, storage);
    if (Date.now() < orphansDue) return;
    orphansDue = Date.now() + CRASH_LEFTOVER_MS;
    await removeOrphanObjects(deps, storage);
  };
  let running: Promise<unknown> | undefined;
  const timer = setInterval(() => {
    running ??= run()
      .catch((error) => deps.log.warn({ err: String(error) }, 'attachment cleanup failed'))
      .finally(() => {
        running = undefined;
      });
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
