import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import type { RateLimiter } from '../../stores/rate-limits.js';
import type { AgentViewer, VisitorViewer } from '../viewer.js';

/**
 * Download budgets (issue 27; docs/attachments.md "Download"): a signed URL needs no identity and
 * can be fetched again and again, each fetch streaming the object from storage, so downloads are
 * counted in the shared rate-limit store before the attachment is looked up or its object opened:
 * ATTACHMENT_DOWNLOADS_PER_MINUTE requests and ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR bytes (bytes are
 * what costs). Past either: RATE_LIMITED with the wait (1429, HTTP 429, Retry-After).
 *
 * Whose budget: a request with an agent's Session (the workbench sends its cookie with every
 * `<img>`) spends that agent's, so agents behind one office NAT each keep theirs and anonymous
 * clients on that address cannot spend it; everything else — no identity, or a visitor token,
 * which anyone can get afresh — spends its client address's.
 */

const MINUTE = 60;
const HOUR = 3600;

/** Who downloads: the agent of the request's Session, else its client address. */
export interface Downloader {
  subject: string;
  /** How the refusal names the budget's holder. */
  holder: 'agent' | 'client address';
}

/** The budget holder of a download request (see above). */
export const downloaderOf = (viewer: VisitorViewer | AgentViewer | undefined, address: string): Downloader =>
  viewer?.kind === 'agent'
    ? { subject: `a:${viewer.agentId}`, holder: 'agent' }
    : { subject: `ip:${address}`, holder: 'client address' };

const byteBudget = (deps: Deps): RateLimiter =>
  deps.rateLimiter({
    name: 'attachment-download-bytes',
    points: deps.config.attachments.downloadBytesPerHour,
    durationSeconds: HOUR,
  });

/** Counts one download request, before anything is looked up: RATE_LIMITED past the budget. */
export async function chargeDownload(deps: Deps, who: Downloader): Promise<void> {
  const per = deps.config.attachments.downloadsPerMinute;
  await deps
    .rateLimiter({ name: 'attachment-downloads', points: per, durationSeconds: MINUTE })
    .consume(
      who.subject,
      (wait) =>
        `Too many downloads: at most ${per} a minute per ${who.holder} (ATTACHMENT_DOWNLOADS_PER_MINUTE), retry in ${wait} s`,
    );
}

/**
 * Before the object is opened: spends the `announced` bytes (the file's length, or the range's)
 * or refuses the download (RATE_LIMITED) spending nothing; with no length known (a thumbnail,
 * a few KB) only refuses a budget already spent. Returns the settlement to call with the bytes
 * really sent: a download cut short gives back what was not sent, a thumbnail counts its bytes.
 */
export async function spendDownloadBytes(
  deps: Deps,
  who: Downloader,
  announced: number | undefined,
): Promise<(sent: number) => Promise<void>> {
  const limiter = byteBudget(deps);
  const per = deps.config.attachments.downloadBytesPerHour;
  const message = (wait: number) =>
    `Download budget used up: at most ${per} bytes an hour per ${who.holder} (ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR), retry in ${wait} s`;
  if (announced === undefined) {
    const wait = await limiter.isBlocked(who.subject);
    if (wait > 0) throw new DomainError('RATE_LIMITED', message(wait), wait);
    // Counted after the fact; a refusal then only means the next download is refused.
    return async (sent) => {
      if (sent > 0) await limiter.consume(who.subject, message, sent).catch(ignoreRefusal);
    };
  }
  if (announced > 0) {
    try {
      await limiter.consume(who.subject, message, announced);
    } catch (error) {
      // A refused consume still counted its points: the download is not made, so give them back.
      if (error instanceof DomainError && error.code === 'RATE_LIMITED') await limiter.reward(who.subject, announced);
      throw error;
    }
  }
  return async (sent) => {
    const unsent = announced - sent;
    if (unsent > 0) await limiter.reward(who.subject, unsent);
  };
}

const ignoreRefusal = (error: unknown) => {
  if (!(error instanceof DomainError && error.code === 'RATE_LIMITED')) throw error;
};
