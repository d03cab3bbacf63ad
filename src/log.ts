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

const SECRET_PARAMS = new Set(['token', 'access_token', 'code', 'captcha', 'password', 'variables']);

/**
 * A URL with the values of secret-bearing query parameters replaced, for logging. Names are
 * compared the way the server reads them (percent-decoded, `[]` suffix ignored), so `%74oken`
 * or `token[]` cannot slip a Session ID into a log line.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const pairs = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      if (eq < 0) return pair;
      let name: string;
      try {
        name = decodeURIComponent(pair.slice(0, eq).replace(/\+/g, ' '));
      } catch {
        return `${pair.slice(0, eq)}=[redacted]`; // undecodable: never guess
      }
      return SECRET_PARAMS.has(name.trim().toLowerCase().replace(/\[\]$/, ''))
        ? `${pair.slice(0, eq)}=[redacted]`
        : pair;
    });
  return `${url.slice(0, q)}?${pairs.join('&')}`;
}
