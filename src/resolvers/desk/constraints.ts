/**
 * Whether `error` (or what it wraps: drizzle wraps the driver's error) is PostgreSQL's
 * unique_violation (23505): two writers raced past a pre-check, and the index decided.
 */
export function isUniqueViolation(error: unknown, depth = 0): boolean {
  if (!(error instanceof Error) || depth > 5) return false;
  if ((error as { code?: unknown }).code === '23505') return true;
  return error.cause !== undefined && isUniqueViolation(error.cause, depth + 1);
}

/** `value` as a LIKE pattern that matches it literally (its `%`, `_` and `\` escaped). */
export const likeLiteral = (value: string) => value.replace(/[\\%_]/g, (c) => `\\${c}`);
