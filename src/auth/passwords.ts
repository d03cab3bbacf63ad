import { hash, verify } from '@node-rs/argon2';

// argon2id (the library default, algorithm 2) at OWASP's recommended minimum: m=19 MiB, t=2, p=1.
const OPTIONS = { memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

export const hashPassword = (password: string) => hash(password, OPTIONS);

/** A real hash of nothing anyone knows, verified when the user does not exist so timing matches. */
let decoyHash: Promise<string> | undefined;

/**
 * Verifies `password` against `passwordHash`, or against a decoy when there is no such user,
 * so a wrong username costs the same time as a wrong password.
 */
export async function verifyPassword(passwordHash: string | undefined, password: string): Promise<boolean> {
  decoyHash ??= hash('decoy-password-for-unknown-users', OPTIONS);
  const target = passwordHash ?? (await decoyHash);
  const ok = await verify(target, password).catch(() => false);
  return ok && passwordHash !== undefined;
}
