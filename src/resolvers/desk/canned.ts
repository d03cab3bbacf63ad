import { and, asc, count, eq, ilike, isNull, or, type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';
import { type CannedResponse, cannedResponses } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { newId } from '../../ids.js';
import { parseInput, required, text } from '../inputs.js';
import type { Tx } from '../outbox/enqueue.js';
import { type AgentViewer, requireAdmin, requireOnlineReception } from '../viewer.js';
import { auditedAgent, recordAudit } from './audit.js';
import { isUniqueViolation, likeLiteral } from './constraints.js';

/**
 * Canned responses (docs/desk.md "Canned responses"): the merchant's, managed by its
 * administrators, and each agent's personal ones. Agents search both by shortcut or text and
 * insert them in the workbench (`/shortcut`). A shortcut is unique within its owner.
 */

/** Longest content and shortcut, in characters; most responses a merchant and an agent keep. */
export const MAX_CANNED_CONTENT = 2000;
export const MAX_SHORTCUT = 32;
export const MAX_MERCHANT_CANNED = 500;
export const MAX_PERSONAL_CANNED = 200;

export type CannedScope = 'merchant' | 'personal';

export interface CannedResponseView {
  id: string;
  scope: CannedScope;
  /** The owner of a personal response; null for the merchant's. */
  agentId: string | null;
  shortcut: string;
  content: string;
  /** Unix milliseconds. */
  createdAt: number;
  updatedAt: number;
}

const shortcut = z
  .string({ invalid_type_error: 'must be a single string' })
  .regex(
    new RegExp(`^[\\p{L}\\p{N}_-]{1,${MAX_SHORTCUT}}$`, 'u'),
    `must be 1-${MAX_SHORTCUT} letters, digits, _ or - (no spaces)`,
  );
const id = required(64);
export const cannedListInput = z.object({
  search: text(100).optional(),
  scope: z.enum(['merchant', 'personal']).optional(),
});
export const cannedCreateInput = z.object({
  shortcut,
  content: required(MAX_CANNED_CONTENT),
  scope: z.enum(['merchant', 'personal']).default('personal'),
});
export const cannedUpdateInput = z
  .object({ id, shortcut: shortcut.optional(), content: required(MAX_CANNED_CONTENT).optional() })
  .refine((i) => i.shortcut !== undefined || i.content !== undefined, 'give shortcut or content');
export const cannedDeleteInput = z.object({ id });
export type CannedListInput = z.input<typeof cannedListInput>;
export type CannedCreateInput = z.input<typeof cannedCreateInput>;
export type CannedUpdateInput = z.input<typeof cannedUpdateInput>;
export type CannedDeleteInput = z.input<typeof cannedDeleteInput>;

export const toCannedView = (r: CannedResponse): CannedResponseView => ({
  id: r.id,
  scope: r.agentId ? 'personal' : 'merchant',
  agentId: r.agentId,
  shortcut: r.shortcut,
  content: r.content,
  createdAt: r.createdAt.getTime(),
  updatedAt: r.updatedAt.getTime(),
});

/** The merchant's responses are its administrators' to change. */
function requireMayManage(viewer: AgentViewer, scope: CannedScope) {
  if (scope === 'merchant') requireAdmin(viewer);
}

/** What the audit log keeps of a response. */
const audited = (r: CannedResponse) => ({ shortcut: r.shortcut, content: r.content });

/**
 * A change to the merchant's responses is a privileged action: recorded in the same
 * transaction (src/resolvers/desk/audit.ts). An agent's own responses are not audited.
 */
async function auditMerchantResponse(
  tx: Tx,
  viewer: AgentViewer,
  what: 'created' | 'updated' | 'deleted',
  before: CannedResponse | null,
  after: CannedResponse | null,
) {
  const row = after ?? before;
  if (!row || row.agentId !== null) return;
  await recordAudit(tx, {
    ...auditedAgent(viewer),
    action: `canned_response.${what}`,
    target: { type: 'canned_response', id: row.id },
    before: before && audited(before),
    after: after && audited(after),
  });
}

const ownerIs = (viewer: AgentViewer, scope: CannedScope) =>
  and(
    eq(cannedResponses.merchantId, viewer.merchantId),
    scope === 'merchant' ? isNull(cannedResponses.agentId) : eq(cannedResponses.agentId, viewer.agentId),
  );

/**
 * The responses an agent may insert: the merchant's and its own, shortcut order. `search`
 * matches the start of a shortcut (a leading `/` is ignored) or any part of the content.
 */
export async function listCannedResponses(
  deps: Deps,
  viewer: AgentViewer,
  input: CannedListInput = {},
): Promise<CannedResponseView[]> {
  requireOnlineReception(viewer);
  const { search, scope } = parseInput(cannedListInput, input);
  const where: (SQL | undefined)[] = [
    eq(cannedResponses.merchantId, viewer.merchantId),
    scope ? ownerIs(viewer, scope) : or(isNull(cannedResponses.agentId), eq(cannedResponses.agentId, viewer.agentId)),
  ];
  const term = search?.trim().replace(/^\//, '');
  if (term)
    where.push(
      or(
        ilike(cannedResponses.shortcut, `${likeLiteral(term)}%`),
        ilike(cannedResponses.content, `%${likeLiteral(term)}%`),
      ),
    );
  const rows = await deps.db
    .select()
    .from(cannedResponses)
    .where(and(...where))
    .orderBy(asc(sql`lower(${cannedResponses.shortcut})`), asc(cannedResponses.agentId), asc(cannedResponses.id))
    .limit(MAX_MERCHANT_CANNED + MAX_PERSONAL_CANNED);
  return rows.map(toCannedView);
}

/** Refuses a shortcut its owner already uses (case-insensitively), other than `exceptId`'s. */
async function requireFreeShortcut(tx: Tx, viewer: AgentViewer, scope: CannedScope, value: string, exceptId?: string) {
  const [taken] = await tx
    .select({ id: cannedResponses.id })
    .from(cannedResponses)
    .where(and(ownerIs(viewer, scope), sql`lower(${cannedResponses.shortcut}) = lower(${value})`))
    .limit(1);
  if (taken && taken.id !== exceptId) throw new DomainError('BAD_USER_INPUT', `shortcut /${value} is already used`);
}

/** Turns the index's verdict on a race into the same answer as the pre-check. */
async function shortcutGuard<T>(value: string | undefined, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (isUniqueViolation(error)) throw new DomainError('BAD_USER_INPUT', `shortcut /${value} is already used`);
    throw error;
  }
}

/** Creates a response: personal (any agent, for itself) or the merchant's (administrators). */
export async function createCannedResponse(
  deps: Deps,
  viewer: AgentViewer,
  input: CannedCreateInput,
): Promise<CannedResponseView> {
  requireOnlineReception(viewer);
  const i = parseInput(cannedCreateInput, input);
  requireMayManage(viewer, i.scope);
  return shortcutGuard(i.shortcut, () =>
    deps.db.transaction(async (tx) => {
      const cap = i.scope === 'merchant' ? MAX_MERCHANT_CANNED : MAX_PERSONAL_CANNED;
      const [held] = await tx.select({ n: count() }).from(cannedResponses).where(ownerIs(viewer, i.scope));
      if (Number(held?.n ?? 0) >= cap)
        throw new DomainError(
          'LIMIT_REACHED',
          i.scope === 'merchant'
            ? `A merchant keeps at most ${cap} canned responses: delete one first`
            : `An agent keeps at most ${cap} personal canned responses: delete one first`,
        );
      await requireFreeShortcut(tx, viewer, i.scope, i.shortcut);
      const now = new Date(deps.now());
      const [row] = await tx
        .insert(cannedResponses)
        .values({
          id: newId('canned'),
          merchantId: viewer.merchantId,
          agentId: i.scope === 'merchant' ? null : viewer.agentId,
          shortcut: i.shortcut,
          content: i.content,
          createdAt: now,
          updatedAt: now,
        })
        .returning();
      if (!row) throw new Error('canned response insert returned nothing');
      await auditMerchantResponse(tx, viewer, 'created', null, row);
      return toCannedView(row);
    }),
  );
}

/** A response the viewer may change, locked; another agent's personal one does not exist here. */
async function ownedResponse(tx: Tx, viewer: AgentViewer, responseId: string): Promise<CannedResponse> {
  const [row] = await tx
    .select()
    .from(cannedResponses)
    .where(
      and(
        eq(cannedResponses.id, responseId),
        eq(cannedResponses.merchantId, viewer.merchantId),
        or(isNull(cannedResponses.agentId), eq(cannedResponses.agentId, viewer.agentId)),
      ),
    )
    .for('update')
    .limit(1);
  if (!row) throw new DomainError('NOT_FOUND', 'No such canned response');
  requireMayManage(viewer, row.agentId ? 'personal' : 'merchant');
  return row;
}

/** Changes a response's shortcut and/or content. */
export async function updateCannedResponse(
  deps: Deps,
  viewer: AgentViewer,
  input: CannedUpdateInput,
): Promise<CannedResponseView> {
  requireOnlineReception(viewer);
  const i = parseInput(cannedUpdateInput, input);
  return shortcutGuard(i.shortcut, () =>
    deps.db.transaction(async (tx) => {
      const row = await ownedResponse(tx, viewer, i.id);
      const scope: CannedScope = row.agentId ? 'personal' : 'merchant';
      if (i.shortcut !== undefined) await requireFreeShortcut(tx, viewer, scope, i.shortcut, row.id);
      const [updated] = await tx
        .update(cannedResponses)
        .set({
          ...(i.shortcut !== undefined ? { shortcut: i.shortcut } : {}),
          ...(i.content !== undefined ? { content: i.content } : {}),
          updatedAt: new Date(deps.now()),
        })
        .where(eq(cannedResponses.id, row.id))
        .returning();
      if (!updated) throw new DomainError('NOT_FOUND', 'No such canned response');
      await auditMerchantResponse(tx, viewer, 'updated', row, updated);
      return toCannedView(updated);
    }),
  );
}

/** Deletes a response; answers what it was. */
export async function deleteCannedResponse(
  deps: Deps,
  viewer: AgentViewer,
  input: CannedDeleteInput,
): Promise<CannedResponseView> {
  requireOnlineReception(viewer);
  const i = parseInput(cannedDeleteInput, input);
  return deps.db.transaction(async (tx) => {
    const row = await ownedResponse(tx, viewer, i.id);
    await tx.delete(cannedResponses).where(eq(cannedResponses.id, row.id));
    await auditMerchantResponse(tx, viewer, 'deleted', row, null);
    return toCannedView(row);
  });
}
