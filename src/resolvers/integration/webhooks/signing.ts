import { createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com/): a secret `whsec_` + base64
 * of 24 random bytes; `webhook-signature` is `v1,` + base64 HMAC-SHA256, keyed by the secret's
 * bytes, of `{webhook-id}.{webhook-timestamp}.{body}`; several signatures (a rotation's overlap)
 * are separated by spaces. The `standardwebhooks` package verifies it unchanged.
 */

const PREFIX = 'whsec_';

/** A new signing secret, in the form receivers paste into their verifier. */
export const newWebhookSecret = () => `${PREFIX}${randomBytes(24).toString('base64')}`;

const keyOf = (secret: string) =>
  Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');

/** The `webhook-signature` header of one attempt, one `v1,` signature per secret. */
export function signWebhook(secrets: readonly string[], id: string, timestampSeconds: number, body: string): string {
  const content = `${id}.${timestampSeconds}.${body}`;
  return secrets.map((s) => `v1,${createHmac('sha256', keyOf(s)).update(content).digest('base64')}`).join(' ');
}

/** The three Standard Webhooks headers of an attempt (re-signed every time: the timestamp moves). */
export function webhookHeaders(secrets: readonly string[], id: string, nowMs: number, body: string) {
  const timestamp = Math.floor(nowMs / 1000);
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signWebhook(secrets, id, timestamp, body),
  };
}
