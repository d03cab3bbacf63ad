import { type ApiKeyView, createApiKey, listApiKeys, revokeApiKey } from '../resolvers/integration/api-keys/keys.js';
import { publishMerchantEvent } from '../resolvers/integration/api-keys/publish.js';
import { apiKeyScopeNames } from '../resolvers/integration/api-keys/scopes.js';
import { builder } from './builder.js';

/** API keys in GraphQL (admins of the merchant): the same domain functions as /agent/apikey/* (docs/integration.md). */

const ApiKey = builder.objectRef<ApiKeyView>('ApiKey').implement({
  description: 'A key a server or bot of the merchant calls Parley with (`Authorization: Bearer prly_…`).',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Key id (not the key).' }),
    name: t.exposeString('name', { description: 'The admin’s name for it.' }),
    scopes: t.exposeStringList('scopes', { description: `What it may do: ${apiKeyScopeNames.join(', ')}.` }),
    displayPrefix: t.exposeString('displayPrefix', { description: 'The key’s first characters, to recognise it.' }),
    createdBy: t.exposeID('createdBy', { nullable: true, description: 'The admin agent that created it, else null.' }),
    createdAt: t.exposeFloat('createdAt', { description: 'Unix ms.' }),
    lastUsedAt: t.exposeFloat('lastUsedAt', {
      nullable: true,
      description: 'Unix ms of its last use (written at most once a minute), else null.',
    }),
    expiresAt: t.exposeFloat('expiresAt', { nullable: true, description: 'Unix ms, or null: never expires.' }),
    revokedAt: t.exposeFloat('revokedAt', { nullable: true, description: 'Unix ms, or null: live.' }),
  }),
});

const ApiKeyWithSecret = builder.objectRef<{ apiKey: ApiKeyView; key: string }>('ApiKeyWithSecret').implement({
  description: 'A new key and the key itself, answered only at creation.',
  fields: (t) => ({
    apiKey: t.field({ type: ApiKey, resolve: (r) => r.apiKey, description: 'The key’s record.' }),
    key: t.exposeString('key', { description: 'The key (`prly_…`), shown once: send it as `Authorization: Bearer`.' }),
  }),
});

builder.queryField('apiKeys', (t) =>
  t.field({
    type: [ApiKey],
    description: 'The merchant’s API keys, newest first, revoked ones too (admins only).',
    resolve: async (_root, _args, ctx) => listApiKeys(ctx.deps, await ctx.agent()),
  }),
);

builder.mutationField('createApiKey', (t) =>
  t.field({
    type: ApiKeyWithSecret,
    description: 'Creates an API key; answers the key once (admins only).',
    args: {
      name: t.arg.string({ required: true, description: 'A name for admins.' }),
      scopes: t.arg.stringList({ required: true, description: `Any of ${apiKeyScopeNames.join(', ')}.` }),
      expiresAt: t.arg.float({ description: 'Unix ms when it stops working; absent: never.' }),
    },
    resolve: async (_root, args, ctx) =>
      createApiKey(ctx.deps, await ctx.agent(), { name: args.name, scopes: args.scopes, expiresAt: args.expiresAt }),
  }),
);

builder.mutationField('revokeApiKey', (t) =>
  t.field({
    type: ApiKey,
    description: 'Revokes an API key: refused at once on every instance (admins only).',
    args: { id: t.arg.id({ required: true, description: 'The key’s id.' }) },
    resolve: async (_root, args, ctx) => revokeApiKey(ctx.deps, await ctx.agent(), { id: String(args.id) }),
  }),
);

builder.mutationField('publishEvent', (t) =>
  t.field({
    type: 'String',
    description:
      'An API key with `events:publish`: publishes `data` as `event` on a channel of its merchant (`global-{bid}`, `agent-{agent_id}`, a visitor’s channel), as POST /internal/events does; answers the event id. The gateway’s event names are reserved.',
    args: {
      channel: t.arg.string({ required: true, description: 'A channel of the key’s merchant.' }),
      event: t.arg.string({ required: true, description: '1–64 of A-Z a-z 0-9 _ . : -, not a reserved name.' }),
      data: t.arg({ type: 'JSON', required: true, description: 'Any JSON value.' }),
    },
    resolve: async (_root, args, ctx) => (await publishMerchantEvent(ctx.deps, await ctx.apiKey(), args)).id,
  }),
);
