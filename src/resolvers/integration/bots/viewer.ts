import { and, eq } from 'drizzle-orm';
import { bots } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { DomainError } from '../../../errors.js';
import type { ApiKeyViewer } from '../api-keys/authenticate.js';
import { requireScope } from '../api-keys/scopes.js';

/**
 * A bot as the chat sees it: the merchant's participant behind an API key (docs/integration.md
 * "Bots"). Built once per request from the key's identity by `requireBot`.
 */
export interface BotViewer {
  kind: 'bot';
  botId: string;
  merchantId: string;
  name: string;
}

/**
 * The enabled bot of an API key holding `messages:write`: INSUFFICIENT_SCOPE without the scope;
 * FORBIDDEN for a key of no bot (a server's key) or of a disabled bot.
 */
export async function requireBot(
  deps: Deps,
  key: Pick<ApiKeyViewer, 'keyId' | 'merchantId' | 'scopes'>,
): Promise<BotViewer> {
  requireScope(key, 'messages:write');
  const [bot] = await deps.db
    .select({ id: bots.id, name: bots.name, disabled: bots.disabled })
    .from(bots)
    .where(and(eq(bots.apiKeyId, key.keyId), eq(bots.merchantId, key.merchantId)))
    .limit(1);
  if (!bot) throw new DomainError('FORBIDDEN', 'This API key belongs to no bot (createBot makes a bot and its key)');
  if (bot.disabled) throw new DomainError('FORBIDDEN', 'This bot is disabled');
  return { kind: 'bot', botId: bot.id, merchantId: key.merchantId, name: bot.name };
}
