import { z } from 'zod';

/**
 * The REST edge of a domain input: the domain function owns its (camelCase) zod schema; an
 * endpoint declares only the legacy names of its fields and how a form sends them. The fields
 * keep the domain's own rules (so the OpenAPI document states them and a refusal names the
 * legacy field), and the parsed input is the domain's camelCase input.
 */

/** An integer, also as the decimal string a form sends. */
export const formInt = (v: unknown) => (typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v);
/** A boolean, also as `true`/`false`/`1`/`0` from a form. */
export const formBool = (v: unknown) => (v === 'true' || v === '1' ? true : v === 'false' || v === '0' ? false : v);
/** A list, also as the comma-separated string a form sends (`a, b`). */
export const formList = (v: unknown) =>
  typeof v === 'string'
    ? v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : v;

type Coercion = (v: unknown) => unknown;
type ShapeOf<S> = S extends z.ZodObject<infer T> ? T : S extends z.ZodEffects<infer I> ? ShapeOf<I> : never;

function objectOf(schema: z.ZodTypeAny): z.AnyZodObject {
  let inner = schema;
  while (inner instanceof z.ZodEffects) inner = inner.innerType();
  if (!(inner instanceof z.ZodObject)) throw new Error('a domain input must be a zod object');
  return inner;
}

/**
 * The domain's field as a legacy field: under its form coercion, without its default (the domain
 * applies it), required when the endpoint requires it (an agent names the visitor).
 */
function legacyField(field: z.ZodTypeAny, coerce: Coercion | undefined, required: boolean): z.ZodTypeAny {
  const optional = field instanceof z.ZodOptional || field instanceof z.ZodDefault;
  let inner =
    field instanceof z.ZodOptional ? field.unwrap() : field instanceof z.ZodDefault ? field.removeDefault() : field;
  if (coerce) inner = z.preprocess(coerce, inner);
  return optional && !required ? inner.optional() : inner;
}

/**
 * A REST input over the domain schema `schema`: `keys` maps each legacy name to the domain's,
 * `form` names the fields a form sends as strings, `fixed` adds what the endpoint itself implies
 * (e.g. `pinned: false` for `/agent/chat/unpin`), `required` the legacy fields the endpoint
 * requires that the domain leaves optional.
 */
export function legacyInput<
  S extends z.ZodTypeAny,
  K extends Record<string, keyof ShapeOf<S> & string>,
  F extends Partial<z.input<S>> = Record<never, never>,
>(schema: S, keys: K, opts: { form?: { [L in keyof K]?: Coercion }; fixed?: F; required?: (keyof K & string)[] } = {}) {
  const domain = objectOf(schema).shape as Record<string, z.ZodTypeAny>;
  const shape: Record<string, z.ZodTypeAny> = {};
  for (const [legacy, key] of Object.entries(keys)) {
    const field = domain[key];
    if (!field) throw new Error(`the domain input has no field ${key}`);
    shape[legacy] = legacyField(field, opts.form?.[legacy], opts.required?.includes(legacy) ?? false);
  }
  return z.object(shape).transform((legacy) => {
    const input: Record<string, unknown> = { ...opts.fixed };
    for (const [name, key] of Object.entries(keys)) if (legacy[name] !== undefined) input[key] = legacy[name];
    return input as Pick<z.input<S>, K[keyof K] & keyof z.input<S>> & F;
  });
}
