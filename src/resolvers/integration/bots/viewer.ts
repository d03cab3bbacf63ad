import { and, eq } from 'drizzle-orm';
import { bots } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { DomainError } from '../../../errors.js';

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

/** What a bot request presents: an API key's identity (src/resolvers/integration/api-keys/). */
export interface BotKeyIdentity {
  kind: 'apiKey';
  keyId: string;
  merchantId: string;
  scopes: readonly string[];
}

/** The scope a bot's sends and hand-offs need. */
export const BOT_SCOPE = 'messages:write';

/**
 * The enabled bot of an API key that holds `messages:write`; FORBIDDEN for a key without the
 * scope, of no bot (a server's key), or of a disabled bot.
 */
export async function requireBot(deps: Deps, identity: BotKeyIdentity): Promise<BotViewer> {
  if (!identity.scopes.includes(BOT_SCOPE))
    throw new DomainError('FORBIDDEN', `This API key lacks the ${BOT_SCOPE} scope`);
  const [bot] = await deps.db
    .select({ id: bots.id, name: bots.name, disabled: bots.disabled })
    .from(bots)
    .where(and(eq(bots.apiKeyId, identity.keyId), eq(bots.merchantId, identity.merchantId)))
    .limit(1);
  if (!bot) throw new DomainError('FORBIDDEN', 'This API key belongs to no bot (createBot makes a bot and its key)');
  if (bot.disabled) throw new DomainError('FORBIDDEN', 'This bot is disabled');
  return { kind: 'bot', botId: bot.id, merchantId: identity.merchantId, name: bot.name };
}
