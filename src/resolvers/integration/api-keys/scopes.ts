import { z } from 'zod';
import { DomainError } from '../../../errors.js';

/** What an API key may do (docs/integration.md "API keys"), each scope named once here. */
export const API_KEY_SCOPES = {
  'conversations:read': "read the merchant's conversations and their messages",
  'messages:write': 'send messages as a bot',
  'webhooks:manage': "manage the merchant's webhook endpoints and delivery log",
  'events:publish': "publish events to the merchant's channels (as POST /internal/events does, its merchant only)",
} as const;

export type ApiKeyScope = keyof typeof API_KEY_SCOPES;
export const apiKeyScopeNames = Object.keys(API_KEY_SCOPES) as [ApiKeyScope, ...ApiKeyScope[]];

/** A list of scopes: at least one, each known (an unknown one is named in the refusal), duplicates dropped. */
export const scopesInput = z
  .array(
    z
      .string()
      .max(64)
      .superRefine((s, ctx) => {
        if (!Object.hasOwn(API_KEY_SCOPES, s))
          ctx.addIssue({
            code: z.ZodIssueCode.custom,
            message: `unknown scope ${JSON.stringify(s)}: must be one of ${apiKeyScopeNames.join(', ')}`,
          });
      }),
  )
  .min(1, 'must name at least one scope')
  .max(apiKeyScopeNames.length * 2)
  .transform((list) => [...new Set(list)] as ApiKeyScope[]);

/** Refuses (INSUFFICIENT_SCOPE) a key that lacks `scope`. */
export function requireScope<V extends { scopes: readonly string[] }>(viewer: V, scope: ApiKeyScope): V {
  if (!viewer.scopes.includes(scope))
    throw new DomainError('INSUFFICIENT_SCOPE', `This API key lacks the scope ${scope}`);
  return viewer;
}
