import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import type { RateLimiter } from '../../stores/rate-limits.js';
import type { Uploader } from './policy.js';

/**
 * Byte budgets of visitors' uploads (README "Security and reliability"): anyone can get a visitor
 * token, so bytes are counted per visitor (UPLOAD_BYTES_PER_VISITOR_PER_HOUR) and per client
 * address whatever the tokens (UPLOAD_BYTES_PER_ADDRESS_PER_HOUR), over a window of an hour, in
 * the shared rate-limit store. Every byte stored counts, whether a message carries it or not.
 * Agents are held by their upload rate only.
 */

const HOUR = 3600;

interface Budget {
  limiter: RateLimiter;
  subject: string;
  message: (wait: number) => string;
}

/** The budgets an upload spends: none for an agent; the visitor's, and its address's when known. */
function budgetsOf(deps: Deps, uploader: Uploader): Budget[] {
  if (uploader.type !== 'visitor') return [];
  const c = deps.config.attachments;
  const budgets: Budget[] = [
    {
      limiter: deps.rateLimiter({
        name: 'upload-bytes-visitor',
        points: c.uploadBytesPerVisitorPerHour,
        durationSeconds: HOUR,
      }),
      subject: uploader.id,
      message: (wait) =>
        `Upload budget used up: at most ${c.uploadBytesPerVisitorPerHour} bytes an hour per visitor (UPLOAD_BYTES_PER_VISITOR_PER_HOUR), retry in ${wait} s`,
    },
  ];
  if (uploader.address) {
    budgets.push({
      limiter: deps.rateLimiter({
        name: 'upload-bytes-address',
        points: c.uploadBytesPerAddressPerHour,
        durationSeconds: HOUR,
      }),
      subject: uploader.address,
      message: (wait) =>
        `Upload budget used up: at most ${c.uploadBytesPerAddressPerHour} bytes an hour per client address (UPLOAD_BYTES_PER_ADDRESS_PER_HOUR), retry in ${wait} s`,
    });
  }
  return budgets;
}

/** Before a byte is read: a budget already used up is refused (RATE_LIMITED, with the wait). */
export async function requireByteBudget(deps: Deps, uploader: Uploader): Promise<void> {
  for (const b of budgetsOf(deps, uploader)) {
    const wait = await b.limiter.isBlocked(b.subject);
    if (wait > 0) throw new DomainError('RATE_LIMITED', b.message(wait), wait);
  }
}

/**
 * Spends `bytes` of every budget once the upload's size is known, or refuses it (RATE_LIMITED)
 * without spending anything. Returns the refund to call when the upload fails later on.
 */
export async function spendByteBudget(deps: Deps, uploader: Uploader, bytes: number): Promise<() => Promise<void>> {
  const spent: Budget[] = [];
  const refund = () => Promise.all(spent.map((b) => b.limiter.reward(b.subject, bytes))).then(() => {});
  for (const b of budgetsOf(deps, uploader)) {
    try {
      await b.limiter.consume(b.subject, b.message, bytes);
      spent.push(b);
    } catch (error) {
      // A refused consume still counted its points: give them back, and the other budgets' too.
      if (error instanceof DomainError && error.code === 'RATE_LIMITED') spent.push(b);
      await refund();
      throw error;
    }
  }
  return refund;
}
