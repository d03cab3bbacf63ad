import { timingSafeEqual } from 'node:crypto';
import { renderCaptcha } from '../auth/captcha-image.js';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import type { SessionPort } from './session.js';

/** Login and registration captchas are separate: one never satisfies the other. */
export type CaptchaPurpose = 'login' | 'join';

/** An answer not used within this time expires anyway. */
export const CAPTCHA_TTL_SECONDS = 300;

/**
 * Wrong captcha answers per client address (login and registration together), within 15
 * minutes, then refused for 15 minutes. Counted before the comparison (a right answer gives its
 * point back), so parallel guesses cannot get more compared than this.
 */
const CAPTCHA_FAILURES = { name: 'captcha-fail-ip', points: 30, durationSeconds: 900, blockSeconds: 900 };

const captchaKey = (purpose: CaptchaPurpose, sessionId: string) => `captcha:${purpose}:${sessionId}`;

/**
 * Stored as `<expiresAt ms>:<answer>`: the store's own TTL cleans up, while the expiry itself
 * is judged by the domain clock (deps.now), the same clock every other lifetime uses.
 */
const encode = (answer: string, expiresAt: number) => `${expiresAt}:${answer.toLowerCase()}`;
function decode(stored: string | null): { answer: string; expiresAt: number } | undefined {
  const colon = stored?.indexOf(':') ?? -1;
  if (!stored || colon < 1) return undefined;
  return { expiresAt: Number(stored.slice(0, colon)), answer: stored.slice(colon + 1) };
}

/**
 * Draws a new captcha for `purpose` and ties its answer to the Session, replacing (and so
 * invalidating) any earlier one. Returns the JPEG; the answer never leaves the server.
 */
export async function issueCaptcha(deps: Deps, session: SessionPort, purpose: CaptchaPurpose): Promise<Buffer> {
  // The Session must exist in the store (and its cookie be set) for the answer to be found again.
  const { answer, jpeg } = await renderCaptcha(deps.config.captchaTestAnswer);
  const expiresAt = deps.now() + CAPTCHA_TTL_SECONDS * 1000;
  // A new Session and the answer are stored in one wait (two independent keys).
  const newSession = !session.state.createdAt;
  if (newSession) session.state.createdAt = deps.now();
  await Promise.all([
    newSession ? session.save() : undefined,
    deps.kv.set(captchaKey(purpose, session.id), encode(answer, expiresAt), CAPTCHA_TTL_SECONDS),
  ]);
  deps.metrics.captchaIssued(purpose);
  return jpeg;
}

/**
 * Takes the Session's captcha answer out of the store in one atomic step and compares it:
 * right or wrong it is gone, so of parallel requests carrying one answer at most one passes.
 * A wrong answer counts toward the address's CAPTCHA_FAILURES; past it every answer is refused
 * with RATE_LIMITED until the block ends.
 */
export async function consumeCaptcha(
  deps: Deps,
  sessionId: string,
  purpose: CaptchaPurpose,
  given: string,
  clientIp: string,
) {
  await (await checkCaptcha(deps, sessionId, purpose, given, clientIp)).reward();
}

/**
 * As {@link consumeCaptcha}, but the right answer's point is given back by the caller
 * (`reward()`), so it can share a round trip with the caller's next store calls.
 */
export async function checkCaptcha(
  deps: Deps,
  sessionId: string,
  purpose: CaptchaPurpose,
  given: string,
  clientIp: string,
) {
  const failures = deps.rateLimiter(CAPTCHA_FAILURES);
  const [stored] = await Promise.all([
    deps.kv.take(captchaKey(purpose, sessionId)).then(decode),
    failures.consume(clientIp, (wait) => `Too many wrong captchas, please wait ${wait} seconds before trying again`),
  ]);
  const ok =
    stored !== undefined && stored.expiresAt > deps.now() && sameText(stored.answer, given.trim().toLowerCase());
  if (!ok && purpose === 'login') deps.metrics.loginFailed('captcha');
  if (!ok) throw new DomainError('CAPTCHA_INVALID', 'Wrong or expired captcha, please enter the new one');
  return { reward: () => failures.reward(clientIp) };
}

/**
 * The answer currently waiting for `purpose` in the Session, without consuming it. For tests
 * and diagnostics on the server only: no adapter may ever send or log it.
 */
export async function peekCaptchaAnswer(deps: Deps, sessionId: string, purpose: CaptchaPurpose) {
  return decode(await deps.kv.get(captchaKey(purpose, sessionId)))?.answer;
}

function sameText(a: string, b: string) {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}
