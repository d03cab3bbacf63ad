import { z } from 'zod';
import type { Deps } from '../deps.js';
import { agentEndpoints } from './agent.js';
import { apiKeyEndpoints } from './api-keys.js';
import { attachmentEndpoints } from './attachments.js';
import { availabilityEndpoints } from './availability.js';
import { botAdminEndpoints, botEndpoints, botVisitorEndpoints } from './bots.js';
import { chatEndpoints } from './chat.js';
import { deskEndpoints } from './desk.js';
import { deskAdminEndpoints } from './desk-admin.js';
import { deskSettingsEndpoints } from './desk-settings.js';
import { operationsEndpoints } from './health.js';
import { internalEndpoints } from './internal.js';
import { buildOpenApiDocument } from './openapi.js';
import { pusherEndpoints } from './pusher.js';
import { type AnyRoute, rawRoute } from './route.js';
import { serverApiEndpoints } from './server-api.js';
import { visitorEndpoints } from './visitor.js';
import { webhookEndpoints } from './webhooks.js';

/**
 * Every REST endpoint of the gateway, each declared once. app.ts mounts them, the OpenAPI
 * document is built from them, and the fuzz, OpenAPI and docs tests iterate them.
 */
export const endpoints: readonly AnyRoute[] = [
  ...agentEndpoints,
  ...visitorEndpoints,
  ...chatEndpoints,
  ...deskEndpoints,
  ...availabilityEndpoints,
  ...deskAdminEndpoints,
  ...deskSettingsEndpoints,
  ...attachmentEndpoints,
  ...webhookEndpoints,
  ...apiKeyEndpoints,
  ...serverApiEndpoints,
  ...botAdminEndpoints,
  ...botVisitorEndpoints,
  ...botEndpoints,
  ...internalEndpoints,
  ...pusherEndpoints,
  ...operationsEndpoints,
  rawRoute({
    method: 'get',
    path: '/openapi.json',
    identity: 'public',
    tag: 'Operations',
    summary: 'This OpenAPI document',
    raw: {
      contentType: 'application/json',
      description: 'OpenAPI 3.1.',
      schema: z.object({ openapi: z.string() }).passthrough(),
    },
    async handle({ deps, res }) {
      res.type('application/json').send(openApiJson(deps));
    },
  }),
];

/**
 * The document as served, built once per gateway (it depends on the declarations only). Per
 * gateway, not per process: a process that keeps its modules across gateways (the mutation run's
 * kept test thread) must not serve a document built by code that has changed since.
 */
const documents = new WeakMap<Deps, string>();
const openApiJson = (deps: Deps) => {
  let document = documents.get(deps);
  if (document === undefined) {
    document = JSON.stringify(buildOpenApiDocument(endpoints));
    documents.set(deps, document);
  }
  return document;
};
