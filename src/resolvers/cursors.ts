import { z } from 'zod';
import { badInput } from '../errors.js';

/**
 * Page cursors: opaque to clients (base64url of a JSON array), checked here, value by value, before
 * any reaches SQL. A crafted cursor (a seq of 1e308 or 2^40, a date that is not one, an empty
 * array) is the client's mistake, answered BAD_USER_INPUT — never a database error (issue 27, row 7).
 */

/** Largest value of a PostgreSQL `integer` (message seqs). */
const INT4_MAX = 2 ** 31 - 1;

const rowId = z.string().min(1).max(64);
const seq = z.number().int().min(0).max(INT4_MAX);
/** An ISO-8601 instant as `toISOString` writes it, between years 1970 and 9999. */
const instant = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/)
  .refine((s) => !Number.isNaN(Date.parse(s)));
/** Unix seconds (a conversation's `timestamp`). */
const unixSeconds = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

const shapes = {
  /** A message page: conversation id, seq. */
  message: z.tuple([rowId, seq]),
  /** A conversation list ordered by a time: the instant, conversation id. */
  instant: z.tuple([instant, rowId]),
  /** A conversation list ordered by activity: Unix seconds, conversation id. */
  seconds: z.tuple([unixSeconds, rowId]),
} as const;

export type CursorShape = keyof typeof shapes;

export const encodeCursor = (values: (string | number)[]) => Buffer.from(JSON.stringify(values)).toString('base64url');

/** The values of a cursor of the given shape, or BAD_USER_INPUT with `refusal`. */
export function decodeCursor<S extends CursorShape>(
  shape: S,
  cursor: string,
  refusal: string,
): z.infer<(typeof shapes)[S]> {
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(cursor, 'base64url').toString());
  } catch {
    values = undefined;
  }
  const parsed = shapes[shape].safeParse(values);
  if (!parsed.success) throw badInput(refusal);
  return parsed.data as z.infer<(typeof shapes)[S]>;
}
