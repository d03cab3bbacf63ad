import { describe, expect, it } from 'vitest';
import { isUniqueViolation, likeLiteral } from '../../../src/resolvers/desk/constraints.js';

/** The desk's constraint helpers by value (the races they decide are tested through their callers). */

/** `error` wrapped `times` times, as drizzle wraps the driver's error in its own. */
const wrapped = (error: unknown, times: number): unknown =>
  times === 0 ? error : wrapped(new Error('Failed query', { cause: error }), times - 1);
const violation = () => Object.assign(new Error('duplicate key value'), { code: '23505' });

describe('isUniqueViolation', () => {
  it('PostgreSQL’s 23505 on the error or up to five wrappers out; nothing else', () => {
    expect(isUniqueViolation(violation())).toBe(true);
    expect(isUniqueViolation(wrapped(violation(), 1))).toBe(true);
    expect(isUniqueViolation(wrapped(violation(), 5))).toBe(true);
    expect(isUniqueViolation(wrapped(violation(), 6))).toBe(false);
    expect(isUniqueViolation(Object.assign(new Error('foreign key'), { code: '23503' }))).toBe(false);
    expect(isUniqueViolation(wrapped(Object.assign(new Error('x'), { code: '23503' }), 2))).toBe(false);
    expect(isUniqueViolation(new Error('no code'))).toBe(false);
    // Not an Error, or a cause that is none, is no violation.
    expect(isUniqueViolation({ code: '23505' })).toBe(false);
    expect(isUniqueViolation(new Error('wrapper', { cause: { code: '23505' } }))).toBe(false);
    expect(isUniqueViolation(undefined)).toBe(false);
  });
});

describe('likeLiteral', () => {
  it('escapes LIKE’s %, _ and the escape character itself, and nothing else', () => {
    expect(likeLiteral('50%_off\\now')).toBe('50\\%\\_off\\\\now');
    expect(likeLiteral('plain text.*')).toBe('plain text.*');
  });
});
