import { z } from 'zod';
import { publishEvent } from '../resolvers/channels.js';
import { publishEventInput } from '../resolvers/inputs.js';
import { type AnyRoute, jsonRoute } from './route.js';

/**
 * `POST /internal/events`: the publish API for the merchant's own services. Bearer
 * INTERNAL_API_TOKEN; absent entirely (404) when that variable is unset.
 */
export const internalEndpoints: AnyRoute[] = [
  jsonRoute({
    method: 'post',
    path: '/internal/events',
    identity: 'internal',
    tag: 'Internal',
    summary: 'Publish a channel event',
    description:
      'For the merchant’s own services: publishes `data` as `event` on `channel`. The gateway’s own event names (see docs/realtime.md "Events the gateway publishes") are reserved. Absent (404) when INTERNAL_API_TOKEN is unset.',
    enabled: (config) => Boolean(config.internalApiToken),
    input: publishEventInput,
    requestExample: { channel: 'global-demo', event: 'order.shipped', data: { order_id: 'o_1001' } },
    encodings: ['json'],
    output: z.object({ id: z.string().openapi({ description: 'The event id in its channel.' }) }).strict(),
    status: 202,
    example: { id: '1795443464123-0' },
    handle: async ({ deps, input }) => ({ id: (await publishEvent(deps, input)).id }),
  }),
];
