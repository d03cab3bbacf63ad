import { timingSafeEqual } from 'node:crypto';
import { renderCaptcha } from '../auth/captcha-image.js';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import type { SessionPort } from './session.js';

/** Login and registration captchas are separate: one never satisfies the other. */
export type CaptchaPurpose = 'login' | 'join';

/** An answer not used within this time expires anyway. */
export const CAPTCHA_TTL_SECONDS = 300;

const captchaKey = (purpose: CaptchaPurpose, sessionId: string) => `captcha:${purpose}:${sessionId}`;

/**
 * Draws a new captcha for `purpose` and ties its answer to the Session, replacing (and so
 * invalidating) any earlier one. Returns the JPEG; the answer never leaves the server.
 */
export async function issueCaptcha(deps: Deps, session: SessionPort, purpose: CaptchaPurpose): Promise<Buffer> {
  // The Session must exist in the store (and its cookie be set) for the answer to be found again.
  if (!session.state.createdAt) {
    session.state.createdAt = deps.now();
    await session.save();
  }
  const { answer, jpeg } = await renderCaptcha(deps.config.captchaTestAnswer);
  await deps.kv.set(captchaKey(purpose, session.id), answer.toLowerCase(), CAPTCHA_TTL_SECONDS);
  return jpeg;
}

/**
 * Takes the Session's captcha answer out of the store in one atomic step and compares it:
 * right or wrong it is gone, so of parallel requests carrying one answer at most one passes.
 */
export async function consumeCaptcha(deps: Deps, sessionId: string, purpose: CaptchaPurpose, given: string) {
  const expected = await deps.kv.take(captchaKey(purpose, sessionId));
  if (!expected || !sameText(expected, given.trim().toLowerCase())) {
    throw new DomainError('CAPTCHA_INVALID', 'Wrong or expired captcha, please enter the new one');
  }
}

function sameText(a: string, b: string) {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}
