import { and, asc, count, eq, inArray, sql } from 'drizzle-orm';
import { z } from 'zod';
import { conversationLabels as conversationLabelRows, type Label, labels } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { newId } from '../../ids.js';
import { latestConversation, openConversation, requireMerchantVisitor } from '../chat-rows.js';
import { displayName, parseInput, required } from '../inputs.js';
import { type AgentViewer, requireAdmin, requireOnlineReception } from '../viewer.js';
import { auditedAgent, recordAudit } from './audit.js';
import { isUniqueViolation } from './constraints.js';

/**
 * Labels (docs/desk.md "Labels"): the merchant's set of labels, which its agents put on
 * conversations; the conversation list filters by one (`listConversations`' `labelId`).
 */

export const MAX_LABEL_NAME = 32;
/** Labels a merchant keeps, and labels one conversation carries. */
export const MAX_LABELS = 100;
export const MAX_LABELS_PER_CONVERSATION = 20;

export interface LabelView {
  id: string;
  name: string;
  /** `#rrggbb`. */
  color: string;
  /** Unix milliseconds. */
  createdAt: number;
}

/** A conversation's labels after a change (by name). */
export interface ConversationLabelsView {
  conversationId: string;
  visitorId: string;
  labels: LabelView[];
}

const id = required(64);
const color = z
  .string({ invalid_type_error: 'must be a single string' })
  .regex(/^#[0-9a-fA-F]{6}$/, 'must be a colour such as #2563eb');
export const createLabelInput = z.object({
  name: displayName(MAX_LABEL_NAME).refine((s) => s.trim().length > 0, 'is required'),
  color: color.optional(),
});
export const deleteLabelInput = z.object({ id });
export const labelConversationInput = z.object({ visitorId: id, labelId: id });
export type CreateLabelInput = z.input<typeof createLabelInput>;
export type DeleteLabelInput = z.input<typeof deleteLabelInput>;
export type LabelConversationInput = z.input<typeof labelConversationInput>;

export const toLabelView = (l: Label): LabelView => ({
  id: l.id,
  name: l.name,
  color: l.color,
  createdAt: l.createdAt.getTime(),
});

/** The merchant's labels, by name. */
export async function listLabels(deps: Deps, viewer: AgentViewer): Promise<LabelView[]> {
  requireOnlineReception(viewer);
  const rows = await deps.db
    .select()
    .from(labels)
    .where(eq(labels.merchantId, viewer.merchantId))
    .orderBy(asc(sql`lower(${labels.name})`), asc(labels.id))
    .limit(MAX_LABELS);
  return rows.map(toLabelView);
}

/** Creates a label of the merchant (any agent; names are unique case-insensitively). */
export async function createLabel(deps: Deps, viewer: AgentViewer, input: CreateLabelInput): Promise<LabelView> {
  requireOnlineReception(viewer);
  const i = parseInput(createLabelInput, input);
  const name = i.name.trim();
  const taken = () => new DomainError('BAD_USER_INPUT', `a label named ${name} already exists`);
  try {
    return await deps.db.transaction(async (tx) => {
      const [held] = await tx.select({ n: count() }).from(labels).where(eq(labels.merchantId, viewer.merchantId));
      if (Number(held?.n ?? 0) >= MAX_LABELS)
        throw new DomainError('LIMIT_REACHED', `A merchant keeps at most ${MAX_LABELS} labels: delete one first`);
      const [same] = await tx
        .select({ id: labels.id })
        .from(labels)
        .where(and(eq(labels.merchantId, viewer.merchantId), sql`lower(${labels.name}) = lower(${name})`))
        .limit(1);
      if (same) throw taken();
      const [row] = await tx
        .insert(labels)
        .values({
          id: newId('label'),
          merchantId: viewer.merchantId,
          name,
          ...(i.color ? { color: i.color.toLowerCase() } : {}),
          createdAt: new Date(deps.now()),
        })
        .returning();
      if (!row) throw new Error('label insert returned nothing');
      return toLabelView(row);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw taken();
    throw error;
  }
}

/** Deletes a label of the merchant and takes it off every conversation (administrators only). */
export async function deleteLabel(deps: Deps, viewer: AgentViewer, input: DeleteLabelInput): Promise<LabelView> {
  requireAdmin(viewer);
  const i = parseInput(deleteLabelInput, input);
  return deps.db.transaction(async (tx) => {
    const [row] = await tx
      .delete(labels)
      .where(and(eq(labels.id, i.id), eq(labels.merchantId, viewer.merchantId)))
      .returning();
    if (!row) throw new DomainError('NOT_FOUND', 'No such label');
    // Deleting one takes it off every conversation: a privileged action, recorded with the change.
    await recordAudit(tx, {
      ...auditedAgent(viewer),
      action: 'label.deleted',
      target: { type: 'label', id: row.id },
      before: { name: row.name, color: row.color },
      after: null,
    });
    return toLabelView(row);
  });
}

/** The labels of conversations (of one merchant), by conversation id. */
export async function labelsOfConversations(
  deps: Deps,
  merchantId: string,
  conversationIds: readonly string[],
): Promise<Map<string, LabelView[]>> {
  const byConversation = new Map<string, LabelView[]>(conversationIds.map((cid) => [cid, []]));
  if (conversationIds.length === 0) return byConversation;
  const rows = await deps.db
    .select({ conversationId: conversationLabelRows.conversationId, label: labels })
    .from(conversationLabelRows)
    .innerJoin(labels, and(eq(labels.id, conversationLabelRows.labelId), eq(labels.merchantId, merchantId)))
    .where(inArray(conversationLabelRows.conversationId, [...new Set(conversationIds)]))
    .orderBy(asc(sql`lower(${labels.name})`), asc(labels.id));
  for (const r of rows) byConversation.get(r.conversationId)?.push(toLabelView(r.label));
  return byConversation;
}

/** The visitor's open conversation, else its latest: the one an agent labels. */
async function currentConversationId(deps: Deps, viewer: AgentViewer, visitorId: string): Promise<string> {
  await requireMerchantVisitor(deps.db, viewer.merchantId, visitorId);
  const ctx =
    (await openConversation(deps.db, viewer.merchantId, visitorId)) ??
    (await latestConversation(deps.db, viewer.merchantId, visitorId));
  if (!ctx) throw new DomainError('NOT_FOUND', 'This visitor has no conversation to label yet');
  return ctx.conversation.id;
}

async function requireLabel(deps: Deps, viewer: AgentViewer, labelId: string) {
  const [label] = await deps.db
    .select()
    .from(labels)
    .where(and(eq(labels.id, labelId), eq(labels.merchantId, viewer.merchantId)))
    .limit(1);
  if (!label) throw new DomainError('NOT_FOUND', 'No such label');
  return label;
}

async function conversationLabelsView(deps: Deps, viewer: AgentViewer, conversationId: string, visitorId: string) {
  const current = await labelsOfConversations(deps, viewer.merchantId, [conversationId]);
  return { conversationId, visitorId, labels: current.get(conversationId) ?? [] };
}

export const conversationLabelsInput = z.object({ visitorId: id });
export type ConversationLabelsInput = z.input<typeof conversationLabelsInput>;

/** The labels of the visitor's conversation (its open one, else its latest). */
export async function conversationLabels(
  deps: Deps,
  viewer: AgentViewer,
  input: ConversationLabelsInput,
): Promise<ConversationLabelsView> {
  requireOnlineReception(viewer);
  const { visitorId } = parseInput(conversationLabelsInput, input);
  const conversationId = await currentConversationId(deps, viewer, visitorId);
  return conversationLabelsView(deps, viewer, conversationId, visitorId);
}

/**
 * Puts a label on the visitor's conversation (its open one, else its latest); idempotent. A
 * conversation carries at most MAX_LABELS_PER_CONVERSATION labels.
 */
export async function labelConversation(
  deps: Deps,
  viewer: AgentViewer,
  input: LabelConversationInput,
): Promise<ConversationLabelsView> {
  requireOnlineReception(viewer);
  const i = parseInput(labelConversationInput, input);
  const label = await requireLabel(deps, viewer, i.labelId);
  const conversationId = await currentConversationId(deps, viewer, i.visitorId);
  await deps.db.transaction(async (tx) => {
    const [held] = await tx
      .select({ n: count() })
      .from(conversationLabelRows)
      .where(eq(conversationLabelRows.conversationId, conversationId));
    if (Number(held?.n ?? 0) >= MAX_LABELS_PER_CONVERSATION)
      throw new DomainError(
        'LIMIT_REACHED',
        `A conversation carries at most ${MAX_LABELS_PER_CONVERSATION} labels: remove one first`,
      );
    await tx
      .insert(conversationLabelRows)
      .values({ conversationId, labelId: label.id, agentId: viewer.agentId, createdAt: new Date(deps.now()) })
      .onConflictDoNothing();
  });
  return conversationLabelsView(deps, viewer, conversationId, i.visitorId);
}

/** Takes a label off the visitor's conversation (its open one, else its latest); idempotent. */
export async function unlabelConversation(
  deps: Deps,
  viewer: AgentViewer,
  input: LabelConversationInput,
): Promise<ConversationLabelsView> {
  requireOnlineReception(viewer);
  const i = parseInput(labelConversationInput, input);
  const label = await requireLabel(deps, viewer, i.labelId);
  const conversationId = await currentConversationId(deps, viewer, i.visitorId);
  await deps.db
    .delete(conversationLabelRows)
    .where(and(eq(conversationLabelRows.conversationId, conversationId), eq(conversationLabelRows.labelId, label.id)));
  return conversationLabelsView(deps, viewer, conversationId, i.visitorId);
}
