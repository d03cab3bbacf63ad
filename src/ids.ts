import { randomBytes } from 'node:crypto';

/** A random identifier with a readable prefix; 80 bits is plenty for row ids. */
export const newId = (prefix: string) => `${prefix}_${randomBytes(10).toString('hex')}`;

/** 128 bits or more of randomness, URL-safe: tokens, channel names, anything a caller must not guess. */
export const newSecret = (bytes = 32) => randomBytes(bytes).toString('base64url');
