import { z } from 'zod';
import type { AttachmentSettings } from './config/attachments.js';
import { attachmentProblems, attachmentVariables, readAttachmentSettings } from './config/attachments.js';
import type { AuthSettings } from './config/auth.js';
import { authProblems, authVariables, readAuthSettings } from './config/auth.js';
import type { ChatLimitSettings } from './config/chat-limits.js';
import { chatLimitVariables, readChatLimitSettings } from './config/chat-limits.js';
import type { HttpSettings } from './config/http.js';
import { httpProblems, httpVariables, readHttpSettings } from './config/http.js';
import type { IntegrationSettings } from './config/integration.js';
import { integrationVariables, readIntegrationSettings } from './config/integration.js';
import type { RealtimeSettings } from './config/realtime.js';
import { readRealtimeSettings, realtimeVariables } from './config/realtime.js';
import type { ServerSettings } from './config/server.js';
import { readServerSettings, serverVariables } from './config/server.js';

export type { AttachmentsConfig } from './config/attachments.js';
export { DEFAULT_WEBHOOK_RETRY_SCHEDULE, type WebhooksConfig } from './config/integration.js';

/**
 * Everything the gateway reads from its environment, validated once at start-up. Each concern
 * declares its variables, its part of the Config and how one is read from the other in config/.
 */
export interface Config
  extends ServerSettings,
    AuthSettings,
    HttpSettings,
    ChatLimitSettings,
    RealtimeSettings,
    AttachmentSettings,
    IntegrationSettings {}

export class ConfigError extends Error {}

const envSchema = z.object({
  ...serverVariables,
  ...authVariables,
  ...httpVariables,
  ...chatLimitVariables,
  ...realtimeVariables,
  ...attachmentVariables,
  ...integrationVariables,
});
type Environment = z.output<typeof envSchema>;

/** Every environment variable the gateway reads (.env.example documents each; a test checks it). */
export const CONFIG_VARIABLES = Object.keys(envSchema.shape);

/** What production refuses: the development fallbacks and the test-only switches. */
function productionProblems(e: Environment): string[] {
  if (e.NODE_ENV !== 'production') return [];
  const problems: string[] = [];
  if (!e.SESSION_SECRET) problems.push('SESSION_SECRET: required when NODE_ENV=production');
  if (!e.DATABASE_URL) problems.push('DATABASE_URL: required when NODE_ENV=production');
  if (!e.REDIS_URL) problems.push('REDIS_URL: required when NODE_ENV=production');
  if (e.CAPTCHA_TEST_ANSWER) problems.push('CAPTCHA_TEST_ANSWER: a test-only switch, refused when NODE_ENV=production');
  if (e.DEMO_SEED) problems.push('DEMO_SEED: demo data is never loaded when NODE_ENV=production');
  return problems;
}

/**
 * Reads and validates the environment. Throws a ConfigError whose message names every bad
 * variable, so `main.ts` can print it without a stack trace.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty variables count as unset, the way shells and .env files usually mean them.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  const problems = [...productionProblems(e), ...httpProblems(e), ...authProblems(e), ...attachmentProblems(e)];
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`);

  return {
    ...readServerSettings(e),
    ...readAuthSettings(e),
    ...readHttpSettings(e),
    ...readChatLimitSettings(e),
    ...readRealtimeSettings(e),
    ...readAttachmentSettings(e),
    ...readIntegrationSettings(e),
  };
}
