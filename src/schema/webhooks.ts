import {
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  listWebhookEndpoints,
  rotateWebhookSecret,
  setWebhookEndpointDisabled,
  type WebhookEndpointView,
} from '../resolvers/integration/webhooks/endpoints.js';
import {
  listWebhookDeliveries,
  MAX_LOG_PAGE,
  redeliverFailedWebhooks,
  redeliverWebhook,
  testWebhookEndpoint,
  type WebhookDeliveryView,
} from '../resolvers/integration/webhooks/log.js';
import { managerViewer } from './args.js';
import { builder } from './builder.js';

/** Webhooks in GraphQL (admins of the merchant): the same domain functions as /agent/webhook/* (docs/integration.md). */

const WebhookEndpoint = builder.objectRef<WebhookEndpointView>('WebhookEndpoint').implement({
  description: 'An endpoint of the merchant that receives signed events (Standard Webhooks).',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Endpoint id.' }),
    url: t.exposeString('url', { description: 'Where events are POSTed.' }),
    description: t.exposeString('description', { description: 'The admin’s note.' }),
    events: t.exposeStringList('events', { description: 'Event types delivered to it.' }),
    disabled: t.exposeBoolean('disabled', { description: 'Disabled: no new events are queued, pending ones wait.' }),
    consecutiveFailures: t.exposeInt('consecutiveFailures', {
      description: 'Failed attempts in a row; at 5 the circuit opens and attempts pause.',
    }),
    circuitOpenUntil: t.exposeFloat('circuitOpenUntil', {
      nullable: true,
      description: 'Unix ms until which attempts pause (circuit open), else null.',
    }),
    previousSecretUntil: t.exposeFloat('previousSecretUntil', {
      nullable: true,
      description: 'After a rotation: Unix ms until which the previous secret signs too, else null.',
    }),
    createdAt: t.exposeFloat('createdAt', { description: 'Unix ms.' }),
  }),
});

const WebhookEndpointWithSecret = builder
  .objectRef<{ endpoint: WebhookEndpointView; secret: string }>('WebhookEndpointWithSecret')
  .implement({
    description: 'An endpoint and its signing secret, answered only at creation and rotation.',
    fields: (t) => ({
      endpoint: t.field({ type: WebhookEndpoint, resolve: (r) => r.endpoint, description: 'The endpoint.' }),
      secret: t.exposeString('secret', {
        description:
          'The signing secret (`whsec_…`), shown once: give it to `new Webhook(secret)` of `standardwebhooks`.',
      }),
    }),
  });

const WebhookDelivery = builder.objectRef<WebhookDeliveryView>('WebhookDelivery').implement({
  description: 'One event for one endpoint, with its delivery log.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'The `webhook-id` header: the same on every attempt and redelivery.' }),
    endpointId: t.exposeID('endpointId', { description: 'The endpoint.' }),
    event: t.exposeString('event', { description: 'Event type.' }),
    state: t.exposeString('state', {
      description: '`pending` (waiting or in flight), `delivered` or `failed` (final).',
    }),
    attempts: t.exposeInt('attempts', { description: 'Attempts made.' }),
    lastStatus: t.exposeInt('lastStatus', {
      nullable: true,
      description: 'HTTP status of the last attempt; null: no answer.',
    }),
    lastError: t.exposeString('lastError', { nullable: true, description: 'Why the last attempt failed.' }),
    lastLatencyMs: t.exposeInt('lastLatencyMs', { nullable: true, description: 'Duration of the last attempt.' }),
    lastAttemptAt: t.exposeFloat('lastAttemptAt', { nullable: true, description: 'Unix ms.' }),
    nextAttemptAt: t.exposeFloat('nextAttemptAt', { nullable: true, description: 'Unix ms, while pending.' }),
    createdAt: t.exposeFloat('createdAt', { description: 'Unix ms.' }),
    body: t.exposeString('body', { description: 'The exact JSON body sent.' }),
  }),
});

builder.queryField('webhookEndpoints', (t) =>
  t.field({
    type: [WebhookEndpoint],
    description: 'The merchant’s webhook endpoints (admins, or API keys with `webhooks:manage`).',
    resolve: async (_root, _args, ctx) => listWebhookEndpoints(ctx.deps, await managerViewer(ctx)),
  }),
);

builder.queryField('webhookDeliveries', (t) =>
  t.field({
    type: [WebhookDelivery],
    description: `An endpoint’s delivery log, newest first, at most ${MAX_LOG_PAGE} (admins, or API keys with \`webhooks:manage\`).`,
    args: {
      endpointId: t.arg.id({ required: true, description: 'The endpoint.' }),
      first: t.arg.int({ description: `How many, 1–${MAX_LOG_PAGE} (20 by default).` }),
    },
    resolve: async (_root, args, ctx) =>
      listWebhookDeliveries(ctx.deps, await managerViewer(ctx), {
        endpointId: String(args.endpointId),
        first: args.first ?? undefined,
      }),
  }),
);

builder.mutationField('createWebhookEndpoint', (t) =>
  t.field({
    type: WebhookEndpointWithSecret,
    description:
      'Registers an endpoint (https; private and loopback addresses refused unless WEBHOOK_ALLOW_PRIVATE=on); answers its secret once (admins, or API keys with `webhooks:manage`).',
    args: {
      url: t.arg.string({ required: true, description: 'Where events are POSTed.' }),
      events: t.arg.stringList({ required: true, description: 'Event types (docs/integration.md "Events").' }),
      description: t.arg.string({ description: 'A note for admins.' }),
    },
    resolve: async (_root, args, ctx) =>
      createWebhookEndpoint(ctx.deps, await managerViewer(ctx), {
        url: args.url,
        events: args.events,
        description: args.description ?? undefined,
      }),
  }),
);

builder.mutationField('deleteWebhookEndpoint', (t) =>
  t.field({
    type: 'Boolean',
    description: 'Deletes an endpoint and its delivery log (admins, or API keys with `webhooks:manage`).',
    args: { endpointId: t.arg.id({ required: true, description: 'The endpoint.' }) },
    resolve: async (_root, args, ctx) =>
      deleteWebhookEndpoint(ctx.deps, await managerViewer(ctx), { endpointId: String(args.endpointId) }),
  }),
);

builder.mutationField('setWebhookEndpointDisabled', (t) =>
  t.field({
    type: WebhookEndpoint,
    description:
      'Disables (no new events queued, pending ones wait) or enables an endpoint (admins, or API keys with `webhooks:manage`).',
    args: {
      endpointId: t.arg.id({ required: true, description: 'The endpoint.' }),
      disabled: t.arg.boolean({ required: true, description: 'true disables, false enables.' }),
    },
    resolve: async (_root, args, ctx) =>
      setWebhookEndpointDisabled(ctx.deps, await managerViewer(ctx), {
        endpointId: String(args.endpointId),
        disabled: args.disabled,
      }),
  }),
);

builder.mutationField('rotateWebhookSecret', (t) =>
  t.field({
    type: WebhookEndpointWithSecret,
    description:
      'A new signing secret, answered once; the previous one signs beside it for WEBHOOK_SECRET_OVERLAP_SECONDS (admins, or API keys with `webhooks:manage`).',
    args: { endpointId: t.arg.id({ required: true, description: 'The endpoint.' }) },
    resolve: async (_root, args, ctx) =>
      rotateWebhookSecret(ctx.deps, await managerViewer(ctx), { endpointId: String(args.endpointId) }),
  }),
);

builder.mutationField('redeliverWebhook', (t) =>
  t.field({
    type: WebhookDelivery,
    description:
      'Sends a delivered or failed delivery again under the same `webhook-id` (admins, or API keys with `webhooks:manage`).',
    args: { deliveryId: t.arg.id({ required: true, description: 'The delivery (its `webhook-id`).' }) },
    resolve: async (_root, args, ctx) =>
      redeliverWebhook(ctx.deps, await managerViewer(ctx), { deliveryId: String(args.deliveryId) }),
  }),
);

builder.mutationField('redeliverFailedWebhooks', (t) =>
  t.field({
    type: 'Int',
    description:
      'Sends again every failed delivery of an endpoint created in [since, until); answers how many (admins, or API keys with `webhooks:manage`).',
    args: {
      endpointId: t.arg.id({ required: true, description: 'The endpoint.' }),
      since: t.arg.float({ required: true, description: 'Unix ms, inclusive.' }),
      until: t.arg.float({ required: true, description: 'Unix ms, exclusive.' }),
    },
    resolve: async (_root, args, ctx) =>
      redeliverFailedWebhooks(ctx.deps, await managerViewer(ctx), {
        endpointId: String(args.endpointId),
        since: args.since,
        until: args.until,
      }),
  }),
);

builder.mutationField('testWebhookEndpoint', (t) =>
  t.field({
    type: WebhookDelivery,
    description:
      'Queues a `webhook.test` ping to the endpoint; follow it in `webhookDeliveries` (admins, or API keys with `webhooks:manage`).',
    args: { endpointId: t.arg.id({ required: true, description: 'The endpoint.' }) },
    resolve: async (_root, args, ctx) =>
      testWebhookEndpoint(ctx.deps, await managerViewer(ctx), { endpointId: String(args.endpointId) }),
  }),
);
