import { readFileSync } from 'node:fs';
import {
  buildSchema,
  type GraphQLField,
  type GraphQLNamedType,
  getNamedType,
  isLeafType,
  isNonNullType,
  isObjectType,
} from 'graphql';

// Helpers of the REST ↔ GraphQL differential test (differential.test.ts, docs/testing.md).

export const schema = buildSchema(readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8'));

/** Every field of `type` down to `depth` levels, arguments left at their defaults. */
export function selection(type: GraphQLNamedType, depth = 3): string {
  if (isLeafType(type) || !isObjectType(type)) return '';
  const fields = Object.values(type.getFields()).filter(
    (f: GraphQLField<unknown, unknown>) => !f.args.some((a) => isNonNullType(a.type)),
  );
  const parts: string[] = [];
  for (const f of fields) {
    const named = getNamedType(f.type);
    if (isLeafType(named)) parts.push(f.name);
    else if (depth > 1) {
      const inner = selection(named, depth - 1);
      if (inner) parts.push(`${f.name} { ${inner} }`);
    }
  }
  return parts.join(' ');
}

/** `query { field(args) { every field } }` for one Query field. */
export function queryOf(field: string, args = ''): string {
  const f = schema.getQueryType()?.getFields()[field];
  if (!f) throw new Error(`no Query.${field}`);
  const inner = selection(getNamedType(f.type));
  return `query { ${field}${args ? `(${args})` : ''}${inner ? ` { ${inner} }` : ''} }`;
}

/** The items of a list answer: the array itself, or its first array-valued field. */
export const itemsOf = (value: unknown): unknown[] | undefined =>
  Array.isArray(value)
    ? value
    : (Object.values((value ?? {}) as Record<string, unknown>).find(Array.isArray) as unknown[] | undefined);

type Leaves = Map<string, unknown>;
const normKey = (k: string) => k.replace(/_/g, '').toLowerCase();
/** Legacy encodings: booleans are 0/1, numeric strings numbers. */
export function normValue(v: unknown): unknown {
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'string' && v.trim() !== '' && /^-?\d+(\.\d+)?$/.test(v)) return Number(v);
  return v;
}
/** Leaf paths of a JSON value (keys normalised, array indices kept); empty containers are leaves. */
export function flatten(value: unknown, path = '', out: Leaves = new Map()): Leaves {
  if (Array.isArray(value)) {
    if (!value.length) out.set(path, '[]');
    for (const [i, v] of value.entries()) flatten(v, `${path}[${i}]`, out);
  } else if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value);
    if (!entries.length) out.set(path, '{}');
    for (const [k, v] of entries) flatten(v, path ? `${path}.${normKey(k)}` : normKey(k), out);
  } else out.set(path, normValue(value));
  return out;
}
/** A path with its array indices wildcarded, as the exception tables name them. */
export const pattern = (path: string) => path.replace(/\[\d+\]/g, '[]');
