import { z } from 'zod';
import { badInput } from '../errors.js';

/**
 * The input contracts of the domain operations, shared by the REST and GraphQL adapters (and
 * the OpenAPI document): each adapter parses raw input with these, the domain trusts the result.
 */

// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/**
 * The same rules as patterns, so the OpenAPI document states them (a refinement is invisible
 * there): no control character; and for a required field, at least one non-space character.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: as above
const NO_CONTROL = /^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]*$/;
const NOT_BLANK =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: as above
  /^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]*[^\s\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f][^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]*$/;

/** Messages that name the rule a value broke (one pattern may carry two rules). */
const stringErrors: z.ZodErrorMap = (issue, ctx) => {
  if (issue.code === 'invalid_type') return { message: 'must be a single string' };
  if (issue.code === 'invalid_string' && issue.validation === 'regex') {
    const value = typeof ctx.data === 'string' ? ctx.data : '';
    return { message: CONTROL.test(value) ? 'must not contain control characters' : 'is required' };
  }
  // Every other check of `text`/`required` names its rule itself, so nothing reaches this line
  // today; it is kept for a new check without a message.
  // Stryker disable next-line ObjectLiteral: unreached (see above), so equivalent
  return { message: ctx.defaultError };
};

/** A single, well-formed string: no arrays, no control characters, no broken UTF-16. */
export const text = (max: number) =>
  z
    .string({ errorMap: stringErrors })
    .max(max, `must be at most ${max} characters`)
    .regex(NO_CONTROL)
    .refine((s) => !LONE_SURROGATE.test(s), 'must be valid Unicode text');

/**
 * Characters a display name may not hold: every control character (tab and line breaks too:
 * a name is one line) and the bidirectional controls (U+061C, U+200E-U+200F, U+202A-U+202E,
 * U+2066-U+2069), which would make a name shown in an agent's feed read as something else.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
export const UNSAFE_IN_NAMES = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** A display name (nicknames): `text`, on one line, without bidirectional controls. */
export const displayName = (max: number) =>
  text(max).refine(
    (s) => !new RegExp(UNSAFE_IN_NAMES.source).test(s),
    'must not contain control or bidirectional characters',
  );

/** A BCP 47 language tag such as `en` or `zh-CN`, at most 35 characters. */
export const languageTag = z
  .string({ invalid_type_error: 'must be a single string' })
  .max(35, 'must be at most 35 characters')
  .regex(/^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,4}$/, 'must be a language code such as en or zh-CN');

/** A boolean (the REST edge also reads `true`/`false`/`1`/`0` from a form). */
export const flag = z.boolean({ invalid_type_error: 'must be true or false' });

/** As `text`, and not empty or blank. */
export const required = (max: number) =>
  z
    .string({ errorMap: stringErrors })
    .min(1, 'is required')
    .max(max, `must be at most ${max} characters`)
    .regex(NOT_BLANK)
    .refine((s) => !LONE_SURROGATE.test(s), 'must be valid Unicode text');

export const loginInput = z.object({
  username: required(64),
  password: required(256),
  captcha: required(16),
  cid: text(128).optional(),
});

export const smsCaptchaInput = z.object({ mobile: required(20), captcha: required(16) });
export const smsVerifyInput = z.object({ mobile: required(20), code: required(6) });

export const channelName = required(200);
export const eventId = z.string().regex(/^\d{1,16}-\d{1,16}$/, 'must be an event id such as 1700000000000-0');

export const publishEventInput = z.object({
  channel: channelName,
  event: z
    .string({ invalid_type_error: 'must be a single string' })
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be 1-64 letters, digits or _ . : -'),
  data: z.unknown().refine((d) => d !== undefined, 'is required'),
});

/** Parses `raw` with `schema`, or throws BAD_USER_INPUT naming the first bad field. */
export function parseInput<S extends z.ZodTypeAny>(schema: S, raw: unknown): z.output<S> {
  const result = schema.safeParse(raw ?? {});
  if (result.success) return result.data;
  // A failed parse has at least one issue, with a message: the `?.` and `??` below only satisfy
  // the types (Stryker: equivalent).
  const issue = result.error.issues[0];
  // Stryker disable next-line OptionalChaining: see above
  const field = issue?.path.join('.') || 'input';
  // Stryker disable next-line OptionalChaining: see above
  const message = issue?.code === 'invalid_type' && issue.received === 'undefined' ? 'is required' : issue?.message;
  // Stryker disable next-line StringLiteral: see above
  throw badInput(`${field} ${message ?? 'is invalid'}`);
}
