import { z } from 'zod';
import { hashPassword } from '../../auth/passwords.js';
import { agentGroups, agents, merchants } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { newId, newSecret } from '../../ids.js';
import { consumeCaptcha } from '../captcha.js';
import { displayName, parseInput, required, text } from '../inputs.js';
import { startAgentSession } from '../login.js';
import { announceMerchantConfigChanged } from '../merchant-config.js';
import type { SessionPort } from '../session.js';
import { verifySmsCode } from '../sms.js';
import { passwordInput, usernameInput } from './agents.js';
import { recordAudit } from './audit.js';

/**
 * Merchant self-registration (docs/desk.md "Registration"): after the join captcha — or, with
 * SMS_REGISTRATION=on, the SMS code (whose send took the captcha) — the applicant names the
 * merchant and its first agent; the merchant, its Default group and that agent (level admin)
 * are made in one transaction with their audit row, and the agent is logged in.
 */

/** Where a new merchant's admin lands: the admin page, to set the desk up. */
export const ADMIN_PAGE_PATH = '/agent/admin';

const REGISTER_LIMIT = { name: 'register-ip', points: 10, durationSeconds: 3600 };

export const registerMerchantInput = z.object({
  merchantName: displayName(64).refine((s) => s.trim().length > 0, 'is required'),
  username: usernameInput,
  nickname: displayName(64).refine((s) => s.trim().length > 0, 'is required'),
  password: passwordInput,
  /** With SMS registration on: the number the SMS code was sent to, and the code. */
  mobile: text(20).optional(),
  code: text(6).optional(),
  /** With SMS registration off: the join captcha of the same Session. */
  captcha: text(16).optional(),
  /** Wanted bid and appkey; generated when absent. Taken ones are refused. */
  bid: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]{1,31}$/, 'must be 2-32 lowercase letters, digits, _ or -')
    .optional(),
  appkey: z
    .string()
    .regex(/^[A-Za-z0-9_-]{8,128}$/, 'must be 8-128 letters, digits, _ or -')
    .optional(),
});
export type RegisterMerchantInput = z.input<typeof registerMerchantInput>;

export interface Registration {
  /** The new Session ID (the admin is logged in). */
  token: string;
  redirect: string;
  bid: string;
  appkey: string;
}

/** The caller proved what the mode asks: the join captcha (SMS off) or the SMS code of `mobile` (SMS on). */
async function proveApplicant(
  deps: Deps,
  session: SessionPort,
  input: z.output<typeof registerMerchantInput>,
  clientIp: string,
) {
  if (!deps.config.smsRegistration) {
    await consumeCaptcha(deps, session.id, 'join', input.captcha ?? '', clientIp);
    return undefined;
  }
  const mobile = input.mobile ?? '';
  if (!mobile) throw new DomainError('BAD_USER_INPUT', 'mobile: is required');
  // A code verified earlier in this Session (POST /agent/login/smsverify) counts; else it is checked now.
  if (session.state.smsVerifiedMobile !== mobile) {
    const { code } = parseInput(z.object({ code: required(6) }), { code: input.code ?? '' });
    await verifySmsCode(deps, session, { mobile, code });
  }
  return mobile;
}

/** PostgreSQL's unique_violation, and which constraint (drizzle wraps the driver's error). */
function uniqueViolation(error: unknown, depth = 0): string | undefined {
  if (!(error instanceof Error) || depth > 3) return undefined;
  const e = error as { code?: unknown; constraint_name?: unknown; constraint?: unknown };
  if (e.code === '23505') return String(e.constraint_name ?? e.constraint ?? '');
  return uniqueViolation(error.cause, depth + 1);
}

const TAKEN: Record<string, () => DomainError> = {
  registered_mobile: () =>
    new DomainError(
      'MOBILE_ALREADY_REGISTERED',
      'This mobile number has already registered a merchant: log in with that merchant’s admin account',
    ),
  username: () => new DomainError('BAD_USER_INPUT', 'username is already taken'),
  bid: () => new DomainError('BAD_USER_INPUT', 'bid is already taken'),
  appkey: () => new DomainError('BAD_USER_INPUT', 'appkey is already taken'),
};
const takenError = (constraint: string) =>
  Object.entries(TAKEN).find(([key]) => constraint.includes(key))?.[1]() ??
  new DomainError('BAD_USER_INPUT', 'bid, appkey or username is already taken');

/**
 * Registers a merchant and logs its first admin in. Refused when REGISTRATION is off (1010), for
 * a mobile number that already registered a merchant (1011), or a taken username, bid or appkey;
 * a refusal leaves nothing behind.
 */
export async function registerMerchant(
  deps: Deps,
  session: SessionPort,
  raw: RegisterMerchantInput,
  clientIp: string,
): Promise<Registration> {
  if (!deps.config.registration) {
    throw new DomainError('REGISTRATION_DISABLED', 'Merchant registration is turned off on this server');
  }
  const input = parseInput(registerMerchantInput, raw);
  await deps
    .rateLimiter(REGISTER_LIMIT)
    .consume(clientIp, (wait) => `Too many registrations, please wait ${wait} seconds`);
  const mobile = await proveApplicant(deps, session, input, clientIp);

  const merchantId = newId('m');
  const bid =
    input.bid ??
    `m${newSecret(9)
      .toLowerCase()
      .replace(/[^a-z0-9]/g, '0')}`;
  const appkey = input.appkey ?? `${bid}-${newSecret(12)}`;
  const agent = {
    id: newId('a'),
    merchantId,
    username: input.username,
    nickname: input.nickname,
    level: 'admin',
    passwordHash: await hashPassword(input.password),
  };
  try {
    await deps.db.transaction(async (tx) => {
      await tx.insert(merchants).values({
        id: merchantId,
        bid,
        appname: input.merchantName,
        appkey,
        identitySecret: newSecret(32),
        registeredMobile: mobile ?? null,
      });
      const groupId = newId('g');
      await tx.insert(agentGroups).values({ id: groupId, merchantId, name: 'Default', isDefault: true });
      await tx.insert(agents).values({ ...agent, groupId });
      await recordAudit(tx, {
        merchantId,
        actor: { kind: 'agent', id: agent.id, name: agent.nickname },
        clientAddress: clientIp,
        action: 'merchant.registered',
        target: { type: 'merchant', id: merchantId },
        before: null,
        after: { bid, appname: input.merchantName, adminUsername: input.username, smsVerified: mobile !== undefined },
      });
    });
  } catch (error) {
    const constraint = uniqueViolation(error);
    if (constraint !== undefined) throw takenError(constraint);
    throw error;
  }
  await announceMerchantConfigChanged(deps, merchantId);
  await session.regenerate();
  await startAgentSession(deps, session, agent, bid);
  return { token: session.id, redirect: ADMIN_PAGE_PATH, bid, appkey };
}
