import { createHash, randomBytes } from 'node:crypto';
import { and, count, desc, eq, isNull } from 'drizzle-orm';
import { z } from 'zod';
import type { Db } from '../../../db/client.js';
import { type ApiKey, apiKeys } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { DomainError } from '../../../errors.js';
import { API_KEY_PREFIX, newId } from '../../../ids.js';
import { type AuditActor, auditedAgent, recordAudit } from '../../desk/audit.js';
import { parseInput, required } from '../../inputs.js';
import type { Tx } from '../../outbox/enqueue.js';
import { type AgentViewer, requireAdmin } from '../../viewer.js';
import { type ApiKeyScope, scopesInput } from './scopes.js';

/** A merchant's API keys, managed by its admins (docs/integration.md "API keys"). */

/** Live (unrevoked) keys a merchant may hold at once. */
export const MAX_API_KEYS = 50;
/** Characters of a key kept to recognise it in a list (`prly_` and 6 more). */
const DISPLAY_PREFIX_LENGTH = API_KEY_PREFIX.length + 6;

/** A key as admins see it: never the key itself (shown once, at creation). */
export interface ApiKeyView {
  id: string;
  name: string;
  scopes: ApiKeyScope[];
  /** The key's first characters, e.g. `prly_Ab3dE9`. */
  displayPrefix: string;
  /** The admin agent that created it; null for a key made otherwise (a bot's) or whose creator was deleted. */
  createdBy: string | null;
  createdAt: number;
  /** Unix ms of its last use (written at most once a minute); null: never used. */
  lastUsedAt: number | null;
  expiresAt: number | null;
  revokedAt: number | null;
}

export const toApiKeyView = (k: ApiKey): ApiKeyView => ({
  id: k.id,
  name: k.name,
  scopes: k.scopes as ApiKeyScope[],
  displayPrefix: k.displayPrefix,
  createdBy: k.createdBy,
  createdAt: k.createdAt.getTime(),
  lastUsedAt: k.lastUsedAt?.getTime() ?? null,
  expiresAt: k.expiresAt?.getTime() ?? null,
  revokedAt: k.revokedAt?.getTime() ?? null,
});

/** SHA-256 (hex) of a whole key: what the table keeps. A key has 256 random bits, so no salt or stretching is needed. */
export const hashApiKey = (key: string) => createHash('sha256').update(key).digest('hex');

/** A new key: the prefix and 256 random bits, base64url. */
export const newApiKey = () => `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;

export const createApiKeyInput = z.object({
  name: required(100),
  scopes: scopesInput,
  /** Unix ms; absent or null: the key never expires. */
  expiresAt: z.number().int().positive().max(8.64e15).nullish(),
});
export type CreateApiKeyInput = z.input<typeof createApiKeyInput>;

export const apiKeyIdInput = z.object({ id: z.string().min(1).max(64) });
export type ApiKeyIdInput = z.input<typeof apiKeyIdInput>;

/** What the audit log records of a key (never the key or its hash). */
const audited = (k: ApiKey) => ({
  name: k.name,
  scopes: k.scopes,
  display_prefix: k.displayPrefix,
  expires_at: k.expiresAt?.toISOString() ?? null,
  revoked_at: k.revokedAt?.toISOString() ?? null,
});

export interface IssueApiKeyInput {
  merchantId: string;
  name: string;
  scopes: ApiKeyScope[];
  /** Unix ms, or null/absent for a key that never expires. */
  expiresAt?: number | null;
  /** The admin agent creating it, if any. */
  createdBy?: string | null;
  /** Who the audit row names (the creating agent, the operator…). */
  actor: AuditActor;
  clientAddress?: string | null;
  now: number;
}

/**
 * Stores a new key and its audit row inside `tx` (the caller's transaction, e.g. a bot's
 * creation) and answers it with the key, which is never available again. Checks nothing of
 * the caller: the caller authorizes, and gives a parsed name and known scopes.
 */
export async function issueApiKey(tx: Tx | Db, input: IssueApiKeyInput): Promise<{ apiKey: ApiKeyView; key: string }> {
  const key = newApiKey();
  const [row] = await tx
    .insert(apiKeys)
    .values({
      id: newId('key'),
      merchantId: input.merchantId,
      name: input.name,
      scopes: input.scopes,
      hash: hashApiKey(key),
      displayPrefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
      createdBy: input.createdBy ?? null,
      createdAt: new Date(input.now),
      expiresAt: input.expiresAt == null ? null : new Date(input.expiresAt),
    })
    .returning();
  if (!row) throw new Error('api key insert returned nothing');
  await recordAudit(tx, {
    merchantId: input.merchantId,
    actor: input.actor,
    clientAddress: input.clientAddress ?? null,
    action: 'api_key.created',
    target: { type: 'api_key', id: row.id },
    before: null,
    after: audited(row),
  });
  return { apiKey: toApiKeyView(row), key };
}

/** Refuses a new key (an admin's or a bot's) to a merchant holding MAX_API_KEYS live ones. */
export async function requireKeyRoom(db: Tx | Db, merchantId: string): Promise<void> {
  const [live] = await db
    .select({ n: count() })
    .from(apiKeys)
    .where(and(eq(apiKeys.merchantId, merchantId), isNull(apiKeys.revokedAt)));
  if ((live?.n ?? 0) >= MAX_API_KEYS)
    throw new DomainError('LIMIT_REACHED', `A merchant has at most ${MAX_API_KEYS} API keys: revoke one first`);
}

/** Creates a key for the admin's merchant; the key is answered here and never again. */
export async function createApiKey(
  deps: Deps,
  viewer: AgentViewer,
  raw: CreateApiKeyInput,
): Promise<{ apiKey: ApiKeyView; key: string }> {
  requireAdmin(viewer);
  const input = parseInput(createApiKeyInput, raw);
  const now = deps.now();
  if (input.expiresAt != null && input.expiresAt <= now)
    throw new DomainError('BAD_USER_INPUT', 'expiresAt must be in the future');
  await requireKeyRoom(deps.db, viewer.merchantId);
  const { actor, clientAddress } = auditedAgent(viewer);
  return deps.db.transaction((tx) =>
    issueApiKey(tx, {
      merchantId: viewer.merchantId,
      name: input.name,
      scopes: input.scopes,
      expiresAt: input.expiresAt ?? null,
      createdBy: viewer.agentId,
      actor,
      clientAddress,
      now,
    }),
  );
}

/** The merchant's keys (revoked ones too, with their revocation time), newest first. */
export async function listApiKeys(deps: Deps, viewer: AgentViewer): Promise<ApiKeyView[]> {
  requireAdmin(viewer);
  const rows = await deps.db
    .select()
    .from(apiKeys)
    .where(eq(apiKeys.merchantId, viewer.merchantId))
    .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id));
  return rows.map(toApiKeyView);
}

/**
 * Revokes a key of the admin's merchant: from the commit on, every instance refuses it (keys
 * are checked against the table on every request, nothing is cached). Revoking a revoked key
 * answers it unchanged.
 */
export async function revokeApiKey(deps: Deps, viewer: AgentViewer, raw: ApiKeyIdInput): Promise<ApiKeyView> {
  requireAdmin(viewer);
  const { id } = parseInput(apiKeyIdInput, raw);
  const where = and(eq(apiKeys.id, id), eq(apiKeys.merchantId, viewer.merchantId));
  return deps.db.transaction(async (tx) => {
    const [current] = await tx.select().from(apiKeys).where(where).for('update');
    if (!current) throw new DomainError('NOT_FOUND', 'No such API key');
    if (current.revokedAt) return toApiKeyView(current);
    const [updated] = await tx
      .update(apiKeys)
      .set({ revokedAt: new Date(deps.now()) })
      .where(where)
      .returning();
    if (!updated) throw new Error('api key update returned nothing');
    await recordAudit(tx, {
      ...auditedAgent(viewer),
      action: 'api_key.revoked',
      target: { type: 'api_key', id },
      before: audited(current),
      after: audited(updated),
    });
    return toApiKeyView(updated);
  });
}
