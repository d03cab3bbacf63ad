import type { z } from 'zod';
import { agentBriefWire, attachmentWire, eventCatalog, messageWire, noteWire } from '../resolvers/event-catalog.js';
import type { ChannelEvent } from '../stores/bus.js';
import { builder } from './builder.js';

/**
 * `ChannelEvent.payload`: each catalogued event's wire payload as a typed GraphQL object with
 * camelCase fields, generated from the event catalog's zod schema (the one declaration), so a
 * GraphQL client reads `payload { ... on MessageCreatedPayload { message { seq content } } }`
 * while REST and Pusher keep their snake_case `data`. Numbers are Float (Unix milliseconds and
 * byte sizes pass GraphQL's 32-bit Int); free-form values (a message's `meta`) stay JSON.
 */

// biome-ignore lint/suspicious/noExplicitAny: generated types hold camelized JSON read field by field
type Json = any;
// biome-ignore lint/suspicious/noExplicitAny: Pothos refs of generated types
type AnyRef = any;

/** Shapes several events share get one name of their own. */
const sharedNames = new Map<z.ZodTypeAny, string>([
  [messageWire, 'EventMessage'],
  [attachmentWire, 'EventAttachment'],
  [agentBriefWire, 'EventAgent'],
  [noteWire, 'EventNote'],
]);
const built = new Map<string, AnyRef>();

const camel = (name: string) => name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
const pascal = (name: string) =>
  name
    .split(/[._-]/)
    .filter(Boolean)
    .map((part) => part[0]?.toUpperCase() + part.slice(1))
    .join('');

/** The GraphQL type of a zod schema and whether it may be null, naming objects after `path`. */
function graphqlTypeOf(schema: z.ZodTypeAny, path: string): { type: AnyRef; nullable: boolean } {
  const def = schema._def as { typeName: string; innerType?: z.ZodTypeAny; type?: z.ZodTypeAny; schema?: z.ZodTypeAny };
  switch (def.typeName) {
    case 'ZodNullable':
    case 'ZodOptional':
    case 'ZodDefault':
      return { type: graphqlTypeOf(def.innerType as z.ZodTypeAny, path).type, nullable: true };
    case 'ZodEffects':
      return graphqlTypeOf(def.schema as z.ZodTypeAny, path);
    case 'ZodString':
    case 'ZodEnum':
      return { type: 'String', nullable: false };
    case 'ZodNumber':
      return { type: 'Float', nullable: false };
    case 'ZodBoolean':
      return { type: 'Boolean', nullable: false };
    case 'ZodArray': {
      const item = graphqlTypeOf(def.type as z.ZodTypeAny, path);
      return { type: [item.type], nullable: false };
    }
    case 'ZodObject':
      return { type: objectType(schema as z.AnyZodObject, sharedNames.get(schema) ?? path), nullable: false };
    default:
      return { type: 'JSON', nullable: false };
  }
}

function objectType(schema: z.AnyZodObject, name: string): AnyRef {
  const existing = built.get(name);
  if (existing) return existing;
  const ref = builder.objectRef<Json>(name);
  built.set(name, ref);
  const shape = schema.shape as Record<string, z.ZodTypeAny>;
  ref.implement({
    description: `Generated from the event catalog's wire shape (snake_case there, camelCase here).`,
    fields: (t) =>
      Object.fromEntries(
        Object.entries(shape).map(([wireName, field]) => {
          const key = camel(wireName);
          const { type, nullable } = graphqlTypeOf(field, `${name}${pascal(wireName)}`);
          const description = field.description ?? `\`${wireName}\` of the event's \`data\`.`;
          return [key, t.field({ type, nullable, description, resolve: (parent: Json) => parent[key] ?? null })];
        }),
      ),
  });
  return ref;
}

/** snake_case keys to camelCase, deeply, leaving free-form values (JSON fields) as they are. */
function camelize(value: unknown, schema: z.ZodTypeAny): unknown {
  const def = schema._def as { typeName: string; innerType?: z.ZodTypeAny; type?: z.ZodTypeAny; schema?: z.ZodTypeAny };
  if (value === null || value === undefined) return value;
  switch (def.typeName) {
    case 'ZodNullable':
    case 'ZodOptional':
    case 'ZodDefault':
      return camelize(value, def.innerType as z.ZodTypeAny);
    case 'ZodEffects':
      return camelize(value, def.schema as z.ZodTypeAny);
    case 'ZodArray':
      return Array.isArray(value) ? value.map((item) => camelize(item, def.type as z.ZodTypeAny)) : value;
    case 'ZodObject': {
      const shape = (schema as z.AnyZodObject).shape as Record<string, z.ZodTypeAny>;
      const source = value as Record<string, unknown>;
      return Object.fromEntries(
        Object.entries(shape).map(([wireName, field]) => [camel(wireName), camelize(source[wireName], field)]),
      );
    }
    default:
      return value;
  }
}

/** The member type of each payload handed to GraphQL. */
const typeOfPayload = new WeakMap<object, string>();

/** One payload type per catalogued event a client can receive whose payload has fields. */
const payloadTypes = Object.entries(eventCatalog).flatMap(([event, declaration]) => {
  const schema = declaration.payload as unknown as z.ZodTypeAny;
  const def = schema._def as { typeName: string };
  // Events of the instances' own channel and webhook-only events reach no subscriber.
  if (declaration.audiences.every((audience) => audience === 'internal' || audience === 'webhook')) return [];
  if (def.typeName !== 'ZodObject' || Object.keys((schema as z.AnyZodObject).shape).length === 0) return [];
  const name = `${pascal(event)}Payload`;
  return [{ event, name, schema, ref: objectType(schema as z.AnyZodObject, name) }];
});
const byEvent = new Map(payloadTypes.map((p) => [p.event, p]));

export const EventPayloadRef = builder.unionType('EventPayload', {
  description:
    'The typed payload of a gateway event (one member per event of the catalog, camelCase); null for events posted to POST /internal/events and for the `subscribed` marker.',
  types: payloadTypes.map((p) => p.ref),
  resolveType: (payload: object) => typeOfPayload.get(payload) ?? null,
});

/** The typed payload of `event`, or null when the catalog types none (events of POST /internal/events). */
export function typedPayload(event: ChannelEvent): Json | null {
  const type = byEvent.get(event.event);
  if (!type) return null;
  const payload = camelize(event.data, type.schema) as Json;
  typeOfPayload.set(payload, type.name);
  return payload;
}
