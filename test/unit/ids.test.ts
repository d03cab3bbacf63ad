import { describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';

describe('newId (src/ids.ts)', () => {
  it('gives 80 random bits in hex after the prefix, never the same twice across refills of its pool', () => {
    const ids = Array.from({ length: 2000 }, () => newId('msg'));
    for (const id of ids) expect(id).toMatch(/^msg_[0-9a-f]{20}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
