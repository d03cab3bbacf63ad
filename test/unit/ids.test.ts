import { createRequire, syncBuiltinESMExports } from 'node:module';
import { describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';

// node:crypto's CommonJS object: its functions, replaced and synced, are what an ES import of
// `randomBytes` calls too (node's builtins keep both views in step).
const crypto = createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto');

describe('newId (src/ids.ts)', () => {
  it('gives 80 random bits in hex after the prefix, never the same twice across refills of its pool', () => {
    const ids = Array.from({ length: 2000 }, () => newId('msg'));
    for (const id of ids) expect(id).toMatch(/^msg_[0-9a-f]{20}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('draws its random bytes 4 kB at a time: 1,000 ids cost two or three draws, not one each', () => {
    const real = crypto.randomBytes;
    const draws: number[] = [];
    crypto.randomBytes = ((size: number, ...rest: unknown[]) => {
      draws.push(size);
      return (real as (...a: unknown[]) => unknown)(size, ...rest);
    }) as typeof crypto.randomBytes;
    syncBuiltinESMExports();
    try {
      for (let i = 0; i < 1000; i++) newId('msg');
    } finally {
      crypto.randomBytes = real;
      syncBuiltinESMExports();
    }
    // A pool of 4,096 bytes holds 409 ids of 10 bytes: 1,000 ids refill it twice, or three times
    // if the pool the worker's earlier ids left was nearly used up.
    expect(draws.length).toBeGreaterThanOrEqual(2);
    expect(draws.length).toBeLessThanOrEqual(3);
    for (const size of draws) expect(size).toBe(4096);
  });
});
