import { createHmac, randomInt, randomUUID, timingSafeEqual } from 'node:crypto';
import { maskMobile } from '../auth/sms-driver.js';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import { consumeCaptcha } from './captcha.js';
import type { SessionPort } from './session.js';

/** Spec: the SMS code is valid for 5 minutes. */
export const SMS_CODE_TTL_SECONDS = 300;
export const SMS_CODE_TRIES = 5;
const VERIFY_TRIES = { name: 'sms-verify', points: SMS_CODE_TRIES, durationSeconds: SMS_CODE_TTL_SECONDS };
const NO_TRIES_LEFT = 'No tries left for this SMS code, request a new one';
/** Mainland-China mobile numbers: 11 digits starting 13–19. */
const MAINLAND_MOBILE = /^1[3-9]\d{9}$/;

// Send limits (the spec leaves the thresholds to us; documented in docs/auth.md).
const LIMITS = {
  session: { name: 'sms-session', points: 1, durationSeconds: 60 },
  mobile: { name: 'sms-mobile', points: 1, durationSeconds: 60 },
  ip: { name: 'sms-ip', points: 10, durationSeconds: 3600 },
  mobileDaily: { name: 'sms-mobile-day', points: 10, durationSeconds: 86_400 },
  ipDaily: { name: 'sms-ip-day', points: 50, durationSeconds: 86_400 },
};

function requireSmsRegistration(deps: Deps) {
  if (!deps.config.smsRegistration) {
    throw new DomainError('SMS_DISABLED', 'SMS verification for registration is not enabled');
  }
}

/** Keyed with the session secret: a copy of the session store alone cannot brute-force the 10⁶ codes. */
const hashCode = (deps: Deps, mobile: string, code: string) =>
  createHmac('sha256', deps.config.sessionSecret).update(`${mobile}:${code}`).digest();

/**
 * Sends a registration SMS code: the registration graphic captcha is checked first (so nobody
 * can pump SMS), then every send limit, then the driver; only a code that was handed over is
 * kept in the Session.
 */
export async function sendSmsCaptcha(
  deps: Deps,
  session: SessionPort,
  input: { mobile: string; captcha: string },
  clientIp: string,
): Promise<void> {
  requireSmsRegistration(deps);
  if (!MAINLAND_MOBILE.test(input.mobile)) {
    throw new DomainError(
      'BAD_USER_INPUT',
      'mobile must be a mainland-China mobile number (11 digits, starting 13–19)',
    );
  }
  await consumeCaptcha(deps, session.id, 'join', input.captcha, clientIp);
  const wait = (seconds: number) => `Too many SMS requests, please wait ${seconds} seconds before trying again`;
  // Checked one after the other, the caller's own limits (Session, address) first: a refused
  // request does not use up the wider quotas, and a caller over its quota cannot burn the
  // quota of someone else's number.
  await deps.rateLimiter(LIMITS.session).consume(session.id, wait);
  await deps.rateLimiter(LIMITS.ip).consume(clientIp, wait);
  await deps.rateLimiter(LIMITS.ipDaily).consume(clientIp, wait);
  await deps.rateLimiter(LIMITS.mobile).consume(input.mobile, wait);
  await deps.rateLimiter(LIMITS.mobileDaily).consume(input.mobile, wait);

  const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
  try {
    await deps.sms({ mobile: input.mobile, code, purpose: 'register' });
    deps.metrics.smsSent('sent');
  } catch (error) {
    deps.metrics.smsSent('failed');
    deps.log.error({ mobile: maskMobile(input.mobile), err: (error as Error).message }, 'sms send failed');
    throw new DomainError('SMS_SEND_FAILED', 'The SMS could not be sent, please try again later');
  }
  session.state.createdAt ??= deps.now();
  session.state.sms = {
    id: randomUUID(),
    mobile: input.mobile,
    codeHash: hashCode(deps, input.mobile, code).toString('hex'),
    expiresAt: deps.now() + SMS_CODE_TTL_SECONDS * 1000,
  };
  await session.save();
}

/**
 * Checks an SMS code against the one kept in the Session for that number. A right code is
 * used up. Every comparison first takes one of the code's tries from a counter in the shared
 * store (atomic, unlike the Session, whose parallel requests would each see the same count),
 * so however many guesses arrive at once, at most SMS_CODE_TRIES are ever compared.
 */
export async function verifySmsCode(deps: Deps, session: SessionPort, input: { mobile: string; code: string }) {
  requireSmsRegistration(deps);
  const pending = session.state.sms;
  const invalid = (msg: string) => new DomainError('SMS_CODE_INVALID', msg);
  if (!pending || pending.mobile !== input.mobile)
    throw invalid('No SMS code was sent to this number, request a new one');
  const discard = async (msg: string) => {
    session.state.sms = undefined;
    await session.save();
    return invalid(msg);
  };
  if (pending.expiresAt <= deps.now()) throw await discard('The SMS code has expired, request a new one');
  try {
    await deps.rateLimiter(VERIFY_TRIES).consume(pending.id, () => NO_TRIES_LEFT);
  } catch (error) {
    if (error instanceof DomainError && error.code === 'RATE_LIMITED') throw await discard(NO_TRIES_LEFT);
    throw error;
  }
  if (!timingSafeEqual(Buffer.from(pending.codeHash, 'hex'), hashCode(deps, input.mobile, input.code))) {
    throw invalid('Wrong SMS code');
  }
  session.state.sms = undefined;
  session.state.smsVerifiedMobile = input.mobile;
  await session.save();
}
