import { z } from 'zod';
import { badInput } from '../errors.js';

/**
 * The input contracts of the domain operations, shared by the REST and GraphQL adapters (and
 * the OpenAPI document): each adapter parses raw input with these, the domain trusts the result.
 */

// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** A single, well-formed string: no arrays, no control characters, no broken UTF-16. */
export const text = (max: number) =>
  z
    .string({ invalid_type_error: 'must be a single string' })
    .max(max, `must be at most ${max} characters`)
    .refine((s) => !CONTROL.test(s), 'must not contain control characters')
    .refine((s) => !LONE_SURROGATE.test(s), 'must be valid Unicode text');

const required = (max: number) => text(max).refine((s) => s.trim().length > 0, 'is required');

export const loginInput = z.object({
  username: required(64),
  password: required(256),
  captcha: required(16),
  cid: text(128).optional(),
});

export const smsCaptchaInput = z.object({ mobile: required(20), captcha: required(16) });
export const smsVerifyInput = z.object({ mobile: required(20), code: required(6) });

/** `POST /visitor/token` fields (legacy snake_case), parsed into the domain's input. */
export const visitorTokenInput = z
  .object({
    appkey: required(128),
    user_id: text(128).optional(),
    user_hash: text(128).optional(),
    nickname: text(64).optional(),
    lang: z
      .string({ invalid_type_error: 'must be a single string' })
      .regex(/^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$/, 'must be a language code such as en or zh-CN')
      .optional(),
  })
  .transform((i) => ({
    appkey: i.appkey,
    userId: i.user_id,
    userHash: i.user_hash,
    nickname: i.nickname,
    lang: i.lang,
  }));

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
  const issue = result.error.issues[0];
  const field = issue?.path.join('.') || 'input';
  const message = issue?.code === 'invalid_type' && issue.received === 'undefined' ? 'is required' : issue?.message;
  throw badInput(`${field} ${message ?? 'is invalid'}`);
}
