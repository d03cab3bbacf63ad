import { z } from 'zod';
import { bool, int, type Parsed, url } from './variables.js';

/** Who may call: agent Sessions, visitor tokens, captchas, SMS, registration, the internal token. */
export const authVariables = {
  SESSION_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  SESSION_TTL_SECONDS: int(60, 30 * 86400).default(8 * 3600),
  SESSION_ABSOLUTE_TTL_SECONDS: int(60, 90 * 86400).default(7 * 86400),
  VISITOR_TOKEN_TTL_SECONDS: int(60, 365 * 86400).default(30 * 86400),
  CAPTCHA_TEST_ANSWER: z
    .string()
    .regex(/^[A-Za-z0-9]{1,16}$/, 'must be 1-16 letters or digits')
    .optional(),
  SMS_DRIVER: z.enum(['log', 'webhook']).default('log'),
  SMS_WEBHOOK_URL: url(['http:', 'https:']).optional(),
  SMS_REGISTRATION: bool.default('off'),
  REGISTRATION: bool.default('off'),
  INTERNAL_API_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
};

export interface AuthSettings {
  sessionSecret: string;
  sessionTtlSeconds: number;
  sessionAbsoluteTtlSeconds: number;
  visitorTokenTtlSeconds: number;
  captchaTestAnswer?: string;
  smsDriver: 'log' | 'webhook';
  smsWebhookUrl?: string;
  smsRegistration: boolean;
  /** Merchant self-registration through /agent/join (docs/desk.md): off by default. */
  registration: boolean;
  internalApiToken?: string;
}

/** A throwaway secret for development; production refuses to start without a real one. */
const DEV_SESSION_SECRET = 'parley-development-secret-not-for-production-use';

export function authProblems(e: Parsed<typeof authVariables>): string[] {
  return e.SMS_DRIVER === 'webhook' && !e.SMS_WEBHOOK_URL ? ['SMS_WEBHOOK_URL: required when SMS_DRIVER=webhook'] : [];
}

export function readAuthSettings(e: Parsed<typeof authVariables>): AuthSettings {
  return {
    sessionSecret: e.SESSION_SECRET ?? DEV_SESSION_SECRET,
    sessionTtlSeconds: e.SESSION_TTL_SECONDS,
    sessionAbsoluteTtlSeconds: e.SESSION_ABSOLUTE_TTL_SECONDS,
    visitorTokenTtlSeconds: e.VISITOR_TOKEN_TTL_SECONDS,
    captchaTestAnswer: e.CAPTCHA_TEST_ANSWER,
    smsDriver: e.SMS_DRIVER,
    smsWebhookUrl: e.SMS_WEBHOOK_URL,
    smsRegistration: e.SMS_REGISTRATION,
    registration: e.REGISTRATION,
    internalApiToken: e.INTERNAL_API_TOKEN,
  };
}
