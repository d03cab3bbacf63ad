import type { Logger } from '../log.js';

type SmsPurpose = 'register';

/** Sends one SMS verification code. Rejects when the message could not be handed over. */
export type SmsDriver = (message: { mobile: string; code: string; purpose: SmsPurpose }) => Promise<void>;

/** 138****5678: enough for an operator to recognise the number, not enough to reuse it. */
export const maskMobile = (mobile: string) => `${mobile.slice(0, 3)}****${mobile.slice(-4)}`;

/**
 * `log` is for development: it writes the code to the console (never to the JSON log) so a
 * developer can register without a phone; outside development it prints no code. `webhook` POSTs the message the way SMS gateways
 * are called and expects a 2xx within 5 s.
 */
export function createSmsDriver(opts: {
  driver: 'log' | 'webhook';
  webhookUrl?: string;
  log: Logger;
  /** Print the code itself (development only: codes are secrets everywhere else). */
  printCode: boolean;
}): SmsDriver {
  if (opts.driver === 'webhook') {
    const url = opts.webhookUrl as string;
    return async (message) => {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(message),
        signal: AbortSignal.timeout(5000),
      });
      if (!res.ok) throw new Error(`SMS webhook answered HTTP ${res.status}`);
    };
  }
  return async ({ mobile, code, purpose }) => {
    opts.log.info({ mobile: maskMobile(mobile), purpose }, 'sms sent (log driver)');
    if (opts.printCode) process.stdout.write(`[sms:log] ${purpose} code for ${maskMobile(mobile)}: ${code}\n`);
  };
}
