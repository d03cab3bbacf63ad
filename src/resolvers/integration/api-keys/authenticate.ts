import { and, eq, isNull, lt, or, sql } from 'drizzle-orm';
import { preparedQuery } from '../../../db/prepared.js';
import { apiKeys } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { DomainError } from '../../../errors.js';
import { isApiKeyShaped } from '../../../ids.js';
import { hashApiKey } from './keys.js';
import type { ApiKeyScope } from './scopes.js';

/** Who calls with an API key: the key, its merchant and what it may do (docs/integration.md "API keys"). */
export interface ApiKeyViewer {
  kind: 'apiKey';
  keyId: string;
  merchantId: string;
  /** The key's name, as its admin gave it. */
  name: string;
  scopes: ApiKeyScope[];
  /** The request's client address, for the audit log of what the key does (null when not given). */
  clientAddress?: string | null;
}

/** `last_used_at` is written at most once per this many seconds per key. */
export const API_KEY_LAST_USED_WRITE_SECONDS = 60;

const keyByHash = preparedQuery((db) =>
  db
    .select({
      id: apiKeys.id,
      merchantId: apiKeys.merchantId,
      name: apiKeys.name,
      scopes: apiKeys.scopes,
      lastUsedAt: apiKeys.lastUsedAt,
      expiresAt: apiKeys.expiresAt,
      revokedAt: apiKeys.revokedAt,
    })
    .from(apiKeys)
    .where(eq(apiKeys.hash, sql.placeholder('hash')))
    .limit(1)
    .prepare('api_key_by_hash'),
);

const invalid = (message: string) => new DomainError('API_KEY_INVALID', message);

/**
 * The identity of an `Authorization: Bearer prly_…` key, or API_KEY_INVALID (no key, not a key
 * — a visitor token is never one —, unknown, revoked, expired). The key is read from the table
 * on every call, nothing cached, so a revocation is refused at once on every instance. Each call
 * counts one request against the key's budget (API_KEY_REQUESTS_PER_MINUTE, across instances:
 * RATE_LIMITED beyond it) and keeps `last_used_at` within a minute.
 */
export async function authenticateApiKey(
  deps: Deps,
  bearer: string | undefined,
  clientAddress: string | null = null,
): Promise<ApiKeyViewer> {
  if (!bearer) throw invalid('API key missing: send Authorization: Bearer prly_…');
  if (!isApiKeyShaped(bearer)) throw invalid('Not an API key (prly_…): a visitor token is not accepted here');
  const now = deps.now();
  const [row] = await keyByHash(deps.db).execute({ hash: hashApiKey(bearer) });
  if (!row) throw invalid('Unknown API key');
  if (row.revokedAt) throw invalid('This API key was revoked');
  if (row.expiresAt && row.expiresAt.getTime() <= now) throw invalid('This API key expired');
  await deps
    .rateLimiter({ name: 'api_key', points: deps.config.apiKeyRequestsPerMinute, durationSeconds: 60 })
    .consume(row.id, (wait) => `Too many requests with this API key: retry in ${wait} s`);
  const stale = now - API_KEY_LAST_USED_WRITE_SECONDS * 1000;
  if (!row.lastUsedAt || row.lastUsedAt.getTime() <= stale) {
    // Conditional, so instances racing in the same minute write once.
    await deps.db
      .update(apiKeys)
      .set({ lastUsedAt: new Date(now) })
      .where(and(eq(apiKeys.id, row.id), or(isNull(apiKeys.lastUsedAt), lt(apiKeys.lastUsedAt, new Date(stale + 1)))));
  }
  return {
    kind: 'apiKey',
    keyId: row.id,
    merchantId: row.merchantId,
    name: row.name,
    scopes: row.scopes as ApiKeyScope[],
    clientAddress,
  };
}
