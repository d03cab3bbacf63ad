import { type DestinationStream, type Logger, pino } from 'pino';

export type { Logger };

/**
 * Structured JSON logs. Secrets never reach a log line: the session id (cookie, `token` header
 * or query), visitor tokens, passwords, captcha answers and SMS codes are censored wherever
 * they may appear in a logged object.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      redact: {
        paths: [
          'req.headers.cookie',
          'req.headers.token',
          'req.headers.authorization',
          'res.headers["set-cookie"]',
          '*.password',
          '*.captcha',
          '*.code',
          '*.token',
          'password',
          'captcha',
          'token',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}

/** A URL with the values of secret-bearing query parameters replaced, for logging. */
export function redactUrl(url: string): string {
  return url.replace(/([?&](?:token|access_token|code|captcha|password)(?:%5B%5D|\[\])?=)[^&#]*/gi, '$1[redacted]');
}
