import { randomBytes } from 'node:crypto';

/** A random identifier with a readable prefix; 80 bits is plenty for row ids. */
export const newId = (prefix: string) => `${prefix}_${randomBytes(10).toString('hex')}`;

/** 128 bits or more of randomness, URL-safe: tokens, channel names, anything a caller must not guess. */
export const newSecret = (bytes = 32) => randomBytes(bytes).toString('base64url');

/**
 * What every API key starts with (docs/integration.md "API keys"): a bearer token with it is a
 * key, never a visitor token (visitor tokens are issued so that they never start with it).
 */
export const API_KEY_PREFIX = 'prly_';

/** Whether a bearer token presents itself as an API key. */
export const isApiKeyShaped = (token: string) => token.startsWith(API_KEY_PREFIX);
