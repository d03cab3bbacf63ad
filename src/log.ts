import { type DestinationStream, type Logger, pino } from 'pino';

export type { Logger };

/**
 * Structured JSON logs. Secrets never reach a log line: the session id (cookie, `token` header
 * or query), visitor tokens, API keys (`Authorization`, a `key` field), passwords, captcha
 * answers and SMS codes are censored wherever they may appear in a logged object.
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
          '*.key',
          'password',
          'captcha',
          'token',
          'key',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}

const SECRET_PARAMS = new Set(['token', 'access_token', 'code', 'captcha', 'password', 'variables', 'key', 'api_key']);

/** Paths whose whole query string is left out of the log: a GraphQL document may carry anything (a login's password). */
const UNLOGGED_QUERY_PATHS = new Set(['/graphql']);

/**
 * Values that look like a secret whatever their parameter's name: a long run of token
 * characters (Session IDs are 32 base64url characters, visitor tokens 43, JWTs longer), or any
 * value that mentions a password or secret.
 */
const SECRET_SHAPE = /^[A-Za-z0-9_\-+/=.~%]{20,}$/;
const SECRET_WORDS = /pass(word|wd)?|secret|token|captcha|authorization|prly_/i;

/**
 * A URL for logging, secrets left out. The query string of /graphql is dropped whole. Elsewhere
 * the values of secret-bearing parameters are replaced, the names compared the way the server
 * reads them (percent-decoded, `[]` suffix ignored, so `%74oken` or `token[]` cannot slip a
 * Session ID in), and so is any value shaped like a secret (SECRET_SHAPE, SECRET_WORDS) under
 * whatever name.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  if (UNLOGGED_QUERY_PATHS.has(url.slice(0, q).replace(/\/+$/, '').toLowerCase()))
    return `${url.slice(0, q)}?[redacted]`;
  const pairs = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      let name: string;
      let value: string;
      try {
        name = decodeURIComponent((eq < 0 ? pair : pair.slice(0, eq)).replace(/\+/g, ' '));
        value = eq < 0 ? '' : decodeURIComponent(pair.slice(eq + 1).replace(/\+/g, ' '));
      } catch {
        return eq < 0 ? '[redacted]' : `${pair.slice(0, eq)}=[redacted]`; // undecodable: never guess
      }
      if (eq < 0) return SECRET_SHAPE.test(name) || SECRET_WORDS.test(name) ? '[redacted]' : pair;
      const secret =
        SECRET_PARAMS.has(name.trim().toLowerCase().replace(/\[\]$/, '')) ||
        SECRET_SHAPE.test(value) ||
        SECRET_WORDS.test(value);
      return secret ? `${pair.slice(0, eq)}=[redacted]` : pair;
    });
  return `${url.slice(0, q)}?${pairs.join('&')}`;
}

/** How much of an error's message is logged: enough to recognise it, never a whole payload. */
const LOGGED_MESSAGE_MAX = 300;

/**
 * An unexpected error as it may be logged: its class, driver codes and a message, never the data
 * it was about. A failed query's message carries its parameters (a message's text, a token's
 * hash), and a PostgreSQL error's `detail`/`where` quote the offending value: both are left out,
 * and a quoted value in a message is replaced. The stack keeps its frames only.
 */
export function loggableError(error: unknown, depth = 0): unknown {
  if (!(error instanceof Error)) return typeof error === 'string' ? '[non-Error thrown]' : error;
  const e = error as Error & { code?: unknown; constraint?: unknown; query?: unknown; params?: unknown };
  let message = e.message;
  // drizzle's DrizzleQueryError: "Failed query: <sql>\nparams: <values>".
  const params = message.indexOf('\nparams:');
  if (params >= 0) message = message.slice(0, params);
  message = message.replace(/: "(?:[^"\\]|\\.)*"/g, ': "[value]"').slice(0, LOGGED_MESSAGE_MAX);
  const frames = e.stack?.indexOf('\n    at ') ?? -1;
  return {
    name: e.name,
    message,
    ...(typeof e.code === 'string' || typeof e.code === 'number' ? { code: e.code } : {}),
    ...(typeof e.constraint === 'string' ? { constraint: e.constraint } : {}),
    ...(frames >= 0 && e.stack ? { stack: e.stack.slice(frames + 1) } : {}),
    ...(e.cause !== undefined && depth < 3 ? { cause: loggableError(e.cause, depth + 1) } : {}),
  };
}
