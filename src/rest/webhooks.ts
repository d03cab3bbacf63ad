import { z } from 'zod';
import {
  createEndpointInput,
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  endpointIdInput,
  listWebhookEndpoints,
  rotateWebhookSecret,
  setWebhookEndpointDisabled,
  type WebhookEndpointView,
} from '../resolvers/integration/webhooks/endpoints.js';
import {
  deliveriesInput,
  listWebhookDeliveries,
  MAX_LOG_PAGE,
  redeliverFailedWebhooks,
  redeliverInput,
  redeliverRangeInput,
  redeliverWebhook,
  testWebhookEndpoint,
  type WebhookDeliveryView,
} from '../resolvers/integration/webhooks/log.js';
import { formInt, formList, legacyInput } from './legacy-input.js';
import { type AnyRoute, type JsonRoute, jsonRoute } from './route.js';

/**
 * `/agent/webhook/*`: the merchant's webhook endpoints and delivery log, for its admins and its
 * API keys with `webhooks:manage` (docs/integration.md "Webhooks"); the same domain functions as
 * the GraphQL fields.
 */

const endpointData = z
  .object({
    id: z.string(),
    url: z.string(),
    description: z.string(),
    events: z.array(z.string()),
    disabled: z.boolean(),
    consecutive_failures: z.number().int(),
    circuit_open_until: z.number().nullable().openapi({ description: 'Unix ms while attempts pause, else null.' }),
    previous_secret_until: z
      .number()
      .nullable()
      .openapi({ description: 'Unix ms until which the previous secret signs too, else null.' }),
    created_at: z.number().openapi({ description: 'Unix ms.' }),
  })
  .strict();
const legacyEndpoint = (e: WebhookEndpointView): z.input<typeof endpointData> => ({
  id: e.id,
  url: e.url,
  description: e.description,
  events: e.events,
  disabled: e.disabled,
  consecutive_failures: e.consecutiveFailures,
  circuit_open_until: e.circuitOpenUntil,
  previous_secret_until: e.previousSecretUntil,
  created_at: e.createdAt,
});
const withSecretData = z
  .object({
    endpoint: endpointData,
    secret: z.string().openapi({ description: 'The `whsec_…` signing secret, shown once.' }),
  })
  .strict();

const deliveryData = z
  .object({
    id: z.string().openapi({ description: 'The `webhook-id`: the same on every attempt and redelivery.' }),
    endpoint_id: z.string(),
    event: z.string(),
    state: z.enum(['pending', 'delivered', 'failed']),
    attempts: z.number().int(),
    last_status: z.number().int().nullable(),
    last_error: z.string().nullable(),
    last_latency_ms: z.number().int().nullable(),
    last_attempt_at: z.number().nullable(),
    next_attempt_at: z.number().nullable(),
    created_at: z.number(),
    body: z.string(),
  })
  .strict();
const legacyDelivery = (d: WebhookDeliveryView): z.input<typeof deliveryData> => ({
  id: d.id,
  endpoint_id: d.endpointId,
  event: d.event,
  state: d.state,
  attempts: d.attempts,
  last_status: d.lastStatus,
  last_error: d.lastError,
  last_latency_ms: d.lastLatencyMs,
  last_attempt_at: d.lastAttemptAt,
  next_attempt_at: d.nextAttemptAt,
  created_at: d.createdAt,
  body: d.body,
});

const exampleEndpoint: z.input<typeof endpointData> = {
  id: 'whep_3f9a1c0d2b7e4a5c6d8e',
  url: 'https://localhost/parley/webhooks',
  description: 'CRM',
  events: ['message.created', 'conversation.closed'],
  disabled: false,
  consecutive_failures: 0,
  circuit_open_until: null,
  previous_secret_until: null,
  created_at: 1764150000000,
};
const exampleDelivery: z.input<typeof deliveryData> = {
  id: 'msg_0c1d2e3f4a5b6c7d8e9f',
  endpoint_id: exampleEndpoint.id,
  event: 'webhook.test',
  state: 'delivered',
  attempts: 1,
  last_status: 200,
  last_error: null,
  last_latency_ms: 42,
  last_attempt_at: 1764150000100,
  next_attempt_at: null,
  created_at: 1764150000000,
  body: '{"type":"webhook.test","version":1,"timestamp":"2025-11-26T09:40:00.000Z","data":{"endpoint_id":"whep_3f9a1c0d2b7e4a5c6d8e"}}',
};
const exampleSecret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

const endpointIdFields = legacyInput(endpointIdInput, { endpoint_id: 'endpointId' });

/** Every webhook operation: an admin's Session or an API key with `webhooks:manage`. */
const webhookRoute = <O extends z.ZodTypeAny, S extends z.ZodTypeAny | undefined = undefined>(
  route: Omit<JsonRoute<'adminOrApiKey', S, O>, 'identity' | 'scope' | 'tag' | 'errors'>,
) =>
  jsonRoute<'adminOrApiKey', O, S>({
    identity: 'adminOrApiKey',
    scope: 'webhooks:manage',
    tag: 'Webhooks (admin)',
    errors: { 403: 'Not an admin of the merchant (1403), or an API key without `webhooks:manage` (1412).' },
    ...route,
  });

export const webhookEndpoints: AnyRoute[] = [
  webhookRoute({
    method: 'post',
    path: '/agent/webhook/create',
    summary: 'Register a webhook endpoint',
    description:
      'https (http outside production); private and loopback addresses refused unless WEBHOOK_ALLOW_PRIVATE=on. `events`: a list, or comma-separated in a form. The secret is answered here only.',
    input: legacyInput(
      createEndpointInput,
      { url: 'url', events: 'events', description: 'description' },
      { form: { events: formList } },
    ),
    requestExample: {
      url: exampleEndpoint.url,
      events: ['message.created', 'conversation.closed'],
      description: 'CRM',
    },
    output: withSecretData,
    example: { endpoint: exampleEndpoint, secret: exampleSecret },
    async handle({ deps, viewer, input }) {
      const r = await createWebhookEndpoint(deps, viewer, input);
      return { endpoint: legacyEndpoint(r.endpoint), secret: r.secret };
    },
  }),
  webhookRoute({
    method: 'get',
    path: '/agent/webhook/list',
    summary: 'The merchant’s webhook endpoints',
    output: z.array(endpointData),
    example: [exampleEndpoint],
    async handle({ deps, viewer }) {
      return (await listWebhookEndpoints(deps, viewer)).map(legacyEndpoint);
    },
  }),
  webhookRoute({
    method: 'get',
    path: '/agent/webhook/deliveries',
    summary: 'An endpoint’s delivery log',
    description: `Newest first; \`first\` 1–${MAX_LOG_PAGE} (20 by default).`,
    input: legacyInput(deliveriesInput, { endpoint_id: 'endpointId', first: 'first' }, { form: { first: formInt } }),
    requestExample: { endpoint_id: exampleEndpoint.id },
    output: z.array(deliveryData),
    example: [exampleDelivery],
    async handle({ deps, viewer, input }) {
      return (await listWebhookDeliveries(deps, viewer, input)).map(legacyDelivery);
    },
  }),
  webhookRoute({
    method: 'post',
    path: '/agent/webhook/redeliver',
    summary: 'Send one delivery again',
    description: 'A delivered or failed delivery, under the same `webhook-id`, with a fresh retry schedule.',
    input: legacyInput(redeliverInput, { delivery_id: 'deliveryId' }),
    requestExample: { delivery_id: exampleDelivery.id },
    output: deliveryData,
    example: { ...exampleDelivery, state: 'pending', attempts: 0, next_attempt_at: 1764150000000 },
    async handle({ deps, viewer, input }) {
      return legacyDelivery(await redeliverWebhook(deps, viewer, input));
    },
  }),
  webhookRoute({
    method: 'post',
    path: '/agent/webhook/redeliver_failed',
    summary: 'Send again the failed deliveries of a time range',
    description: 'Every failed delivery of the endpoint created in [since, until) (Unix ms); answers how many.',
    input: legacyInput(
      redeliverRangeInput,
      { endpoint_id: 'endpointId', since: 'since', until: 'until' },
      { form: { since: formInt, until: formInt } },
    ),
    requestExample: { endpoint_id: exampleEndpoint.id, since: 1764100000000, until: 1764150000000 },
    output: z.object({ redelivered: z.number().int() }).strict(),
    example: { redelivered: 3 },
    async handle({ deps, viewer, input }) {
      return { redelivered: await redeliverFailedWebhooks(deps, viewer, input) };
    },
  }),
  webhookRoute({
    method: 'post',
    path: '/agent/webhook/rotate',
    summary: 'Rotate an endpoint’s signing secret',
    description:
      'The new secret is answered once; the previous one signs beside it for WEBHOOK_SECRET_OVERLAP_SECONDS.',
    input: endpointIdFields,
    requestExample: { endpoint_id: exampleEndpoint.id },
    output: withSecretData,
    example: { endpoint: { ...exampleEndpoint, previous_secret_until: 1764236400000 }, secret: exampleSecret },
    async handle({ deps, viewer, input }) {
      const r = await rotateWebhookSecret(deps, viewer, input);
      return { endpoint: legacyEndpoint(r.endpoint), secret: r.secret };
    },
  }),
  webhookRoute({
    method: 'post',
    path: '/agent/webhook/delete',
    summary: 'Delete an endpoint and its delivery log',
    input: endpointIdFields,
    requestExample: { endpoint_id: exampleEndpoint.id },
    output: z.array(z.unknown()).max(0),
    example: [],
    async handle({ deps, viewer, input }) {
      await deleteWebhookEndpoint(deps, viewer, input);
      return [];
    },
  }),
  ...(['disable', 'enable'] as const).map((action) =>
    webhookRoute({
      method: 'post',
      path: `/agent/webhook/${action}`,
      summary: action === 'disable' ? 'Disable an endpoint' : 'Enable an endpoint',
      description:
        action === 'disable'
          ? 'No new events are queued for it; pending deliveries wait.'
          : 'Deliveries resume; the circuit is closed.',
      input: endpointIdFields,
      requestExample: { endpoint_id: exampleEndpoint.id },
      output: endpointData,
      example: { ...exampleEndpoint, disabled: action === 'disable' },
      async handle({ deps, viewer, input }) {
        return legacyEndpoint(
          await setWebhookEndpointDisabled(deps, viewer, { ...input, disabled: action === 'disable' }),
        );
      },
    }),
  ),
  webhookRoute({
    method: 'post',
    path: '/agent/webhook/test',
    summary: 'Send a test ping',
    description: 'Queues a `webhook.test` delivery to the endpoint; follow it in the delivery log.',
    input: endpointIdFields,
    requestExample: { endpoint_id: exampleEndpoint.id },
    output: deliveryData,
    example: { ...exampleDelivery, state: 'pending', attempts: 0, last_status: null, next_attempt_at: 1764150000000 },
    async handle({ deps, viewer, input }) {
      return legacyDelivery(await testWebhookEndpoint(deps, viewer, input));
    },
  }),
];
