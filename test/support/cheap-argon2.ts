import { createRequire } from 'node:module';
import type * as Argon2 from '@node-rs/argon2';

/**
 * `@node-rs/argon2` in the tests (vitest.config.ts aliases the package to this file; the
 * domain config inherits it, and the mutation config names it again): the same library and our own src/auth/passwords.ts,
 * but every new hash at argon2id's smallest cost instead of 19 MiB and 2 passes. Each factory
 * agent's hash cost about 11 ms of CPU, paid by every test that makes agents (and again by every
 * mutant). `verify` reads the cost from the hash, so logins answer as before; src/auth/ is not
 * mutated. The production cost is src/auth/passwords.ts's OPTIONS.
 */
const real = createRequire(import.meta.url)('@node-rs/argon2') as typeof Argon2;

export const hash: typeof Argon2.hash = (password, options, signal) =>
  real.hash(password, { ...options, memoryCost: 1024, timeCost: 1 }, signal);
export const verify = real.verify;
