import { createRequire } from 'node:module';
import type * as Argon2 from '@node-rs/argon2';

/**
 * `@node-rs/argon2` for the mutation run only (vitest.mutation.config.ts aliases the package to
 * this file): the same library and our own src/auth/passwords.ts, but every new hash at argon2id's
 * smallest cost instead of 19 MiB and 2 passes. Each factory agent's hash cost about 12 ms of CPU,
 * paid again by every mutant whose tests make agents. `verify` reads the cost from the hash, so
 * logins answer as before; src/auth/ is not mutated.
 */
const real = createRequire(import.meta.url)('@node-rs/argon2') as typeof Argon2;

export const hash: typeof Argon2.hash = (password, options, signal) =>
  real.hash(password, { ...options, memoryCost: 1024, timeCost: 1 }, signal);
export const verify = real.verify;
