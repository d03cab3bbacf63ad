import { z } from 'zod';
import {
  type ApiKeyView,
  apiKeyIdInput,
  createApiKey,
  createApiKeyInput,
  listApiKeys,
  revokeApiKey,
} from '../resolvers/integration/api-keys/keys.js';
import { apiKeyScopeNames } from '../resolvers/integration/api-keys/scopes.js';
import { formInt, formList, legacyInput } from './legacy-input.js';
import { type AnyRoute, jsonRoute } from './route.js';

/**
 * `/agent/apikey/*`: the merchant's API keys, for its admins (docs/integration.md "API keys");
 * the same domain functions as the GraphQL fields.
 */

const apiKeyData = z
  .object({
    id: z.string(),
    name: z.string(),
    scopes: z.array(z.enum(apiKeyScopeNames)),
    display_prefix: z.string().openapi({ description: 'The key’s first characters, to recognise it.' }),
    created_by: z.string().nullable().openapi({ description: 'The admin agent that created it, else null.' }),
    created_at: z.number().openapi({ description: 'Unix ms.' }),
    last_used_at: z.number().nullable().openapi({ description: 'Unix ms (written at most once a minute), else null.' }),
    expires_at: z.number().nullable().openapi({ description: 'Unix ms, or null: never expires.' }),
    revoked_at: z.number().nullable().openapi({ description: 'Unix ms, or null: live.' }),
  })
  .strict();
const legacyApiKey = (k: ApiKeyView): z.input<typeof apiKeyData> => ({
  id: k.id,
  name: k.name,
  scopes: k.scopes,
  display_prefix: k.displayPrefix,
  created_by: k.createdBy,
  created_at: k.createdAt,
  last_used_at: k.lastUsedAt,
  expires_at: k.expiresAt,
  revoked_at: k.revokedAt,
});

const exampleKey: z.input<typeof apiKeyData> = {
  id: 'key_3f9a1c0d2b7e4a5c6d8e',
  name: 'CRM sync',
  scopes: ['conversations:read', 'webhooks:manage'],
  display_prefix: 'prly_Xq3vR7',
  created_by: 'a_ada',
  created_at: 1764150000000,
  last_used_at: null,
  expires_at: null,
  revoked_at: null,
};

const tag = 'API keys (admin)';
const adminOnly = { 403: 'Not an admin of the merchant (1403).' };

export const apiKeyEndpoints: AnyRoute[] = [
  jsonRoute({
    method: 'post',
    path: '/agent/apikey/create',
    identity: 'agent',
    tag,
    summary: 'Create an API key',
    description: `\`scopes\`: a list (or comma-separated in a form) of ${apiKeyScopeNames.map((s) => `\`${s}\``).join(', ')}. \`expires_at\`: Unix ms, optional. The key is answered here only.`,
    errors: { ...adminOnly, 409: 'The merchant holds 50 live keys: revoke one first (1409).' },
    input: legacyInput(
      createApiKeyInput,
      { name: 'name', scopes: 'scopes', expires_at: 'expiresAt' },
      { form: { scopes: formList, expires_at: formInt } },
    ),
    requestExample: { name: 'CRM sync', scopes: ['conversations:read', 'webhooks:manage'] },
    output: z
      .object({
        api_key: apiKeyData,
        key: z.string().openapi({ description: 'The key (`prly_…`), shown once: send it as `Authorization: Bearer`.' }),
      })
      .strict(),
    example: { api_key: exampleKey, key: 'prly_Xq3vR7kU2m9T0bYh4Lw8sNcEaJdFgPiOzV5x1yQ6rB' },
    async handle({ deps, viewer, input }) {
      const r = await createApiKey(deps, viewer, input);
      return { api_key: legacyApiKey(r.apiKey), key: r.key };
    },
  }),
  jsonRoute({
    method: 'get',
    path: '/agent/apikey/list',
    identity: 'agent',
    tag,
    summary: 'The merchant’s API keys',
    description: 'Newest first, revoked ones too; never a key itself.',
    errors: adminOnly,
    output: z.array(apiKeyData),
    example: [exampleKey],
    async handle({ deps, viewer }) {
      return (await listApiKeys(deps, viewer)).map(legacyApiKey);
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/apikey/revoke',
    identity: 'agent',
    tag,
    summary: 'Revoke an API key',
    description: 'Refused at once on every instance from then on. Revoking a revoked key answers it unchanged.',
    errors: adminOnly,
    input: legacyInput(apiKeyIdInput, { id: 'id' }),
    requestExample: { id: exampleKey.id },
    output: apiKeyData,
    example: { ...exampleKey, revoked_at: 1764160000000 },
    async handle({ deps, viewer, input }) {
      return legacyApiKey(await revokeApiKey(deps, viewer, input));
    },
  }),
];
