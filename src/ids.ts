import { randomBytes } from 'node:crypto';

/** Random bytes drawn 4 kB at a time for `newId`: one draw per message cost more than its insert's SQL. */
const ID_POOL_BYTES = 4096;
const ID_BYTES = 10;
let idPool = Buffer.alloc(0);
let idOffset = 0;

/**
 * A random identifier with a readable prefix; 80 bits is plenty for row ids. The bytes come from
 * the same CSPRNG, taken from a pool as node's `randomUUID` does (each used once); row ids are not
 * secrets (`newSecret` draws its own).
 */
export const newId = (prefix: string) => {
  if (idOffset + ID_BYTES > idPool.length) {
    idPool = randomBytes(ID_POOL_BYTES);
    idOffset = 0;
  }
  const hex = idPool.toString('hex', idOffset, idOffset + ID_BYTES);
  idOffset += ID_BYTES;
  return `${prefix}_${hex}`;
};

/** 128 bits or more of randomness, URL-safe: tokens, channel names, anything a caller must not guess. */
export const newSecret = (bytes = 32) => randomBytes(bytes).toString('base64url');

/**
 * What every API key starts with (docs/integration.md "API keys"): a bearer token with it is a
 * key, never a visitor token (visitor tokens are issued so that they never start with it).
 */
export const API_KEY_PREFIX = 'prly_';

/** Whether a bearer token presents itself as an API key. */
export const isApiKeyShaped = (token: string) => token.startsWith(API_KEY_PREFIX);
