/**
 * Domain errors: thrown by src/resolvers/, translated once by each adapter (REST envelope,
 * GraphQL extensions.code). Anything that is not a DomainError is masked as INTERNAL.
 */
export type ErrorCode =
  | 'UNAUTHENTICATED'
  | 'VISITOR_UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'BAD_USER_INPUT'
  | 'CAPTCHA_INVALID'
  | 'LOGIN_FAILED'
  | 'ACCOUNT_DISABLED'
  | 'SESSION_MISMATCH'
  | 'RATE_LIMITED'
  | 'SMS_DISABLED'
  | 'SMS_CODE_INVALID'
  | 'SMS_SEND_FAILED'
  | 'APPKEY_INVALID'
  | 'VISITOR_IDENTITY_INVALID'
  | 'REGISTRATION_DISABLED'
  | 'MOBILE_ALREADY_REGISTERED'
  | 'LAST_ADMIN'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'PAYLOAD_TOO_LARGE'
  | 'CONVERSATION_CLOSED'
  | 'ALREADY_CLAIMED'
  | 'NOT_ASSIGNED'
  | 'AGENT_UNAVAILABLE'
  | 'RATING_NOT_ALLOWED'
  | 'HANDED_OFF'
  | 'LIMIT_REACHED'
  | 'API_KEY_INVALID'
  | 'INSUFFICIENT_SCOPE'
  | 'SERVICE_UNAVAILABLE'
  | 'INTERNAL';

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Seconds the caller should wait (rate limits). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

/** The legacy envelope code and HTTP status of each error, the one table REST answers from. */
export const restErrorTable: Record<ErrorCode, { code: number; status: number }> = {
  UNAUTHENTICATED: { code: -1, status: 200 }, // spec: code -1, HTTP 200 for JSON endpoints
  VISITOR_UNAUTHENTICATED: { code: 1401, status: 401 },
  FORBIDDEN: { code: 1403, status: 403 }, // spec: ticket_agent on online reception → HTTP 403
  BAD_USER_INPUT: { code: 1000, status: 400 },
  CAPTCHA_INVALID: { code: 1001, status: 200 },
  LOGIN_FAILED: { code: 1002, status: 200 },
  ACCOUNT_DISABLED: { code: 1003, status: 200 },
  SESSION_MISMATCH: { code: 1004, status: 200 },
  RATE_LIMITED: { code: 1429, status: 429 },
  SMS_DISABLED: { code: 1005, status: 200 },
  SMS_CODE_INVALID: { code: 1006, status: 200 },
  SMS_SEND_FAILED: { code: 1007, status: 502 },
  APPKEY_INVALID: { code: 1008, status: 200 },
  VISITOR_IDENTITY_INVALID: { code: 1009, status: 200 },
  // The merchant's desk (docs/desk.md): business refusals, answered HTTP 200 like the login ones.
  REGISTRATION_DISABLED: { code: 1010, status: 200 },
  MOBILE_ALREADY_REGISTERED: { code: 1011, status: 200 },
  LAST_ADMIN: { code: 1012, status: 200 },
  NOT_FOUND: { code: 1404, status: 404 },
  METHOD_NOT_ALLOWED: { code: 1405, status: 405 },
  PAYLOAD_TOO_LARGE: { code: 1413, status: 413 },
  // Chat business errors (docs/chat.md): answered like the other business errors, HTTP 200.
  CONVERSATION_CLOSED: { code: 1201, status: 200 },
  ALREADY_CLAIMED: { code: 1202, status: 200 },
  NOT_ASSIGNED: { code: 1203, status: 200 },
  AGENT_UNAVAILABLE: { code: 1204, status: 200 },
  RATING_NOT_ALLOWED: { code: 1205, status: 200 },
  // A bot's message for a conversation it does not hold (handed off to the agents): docs/integration.md "Bots".
  HANDED_OFF: { code: 1206, status: 200 },
  // A merchant's or agent's budget (canned responses, labels, notes) is used up: delete some first.
  LIMIT_REACHED: { code: 1409, status: 409 },
  // API keys (docs/integration.md "API keys"): a key missing, unknown, revoked or expired; a key without the scope.
  API_KEY_INVALID: { code: 1411, status: 401 },
  INSUFFICIENT_SCOPE: { code: 1412, status: 403 },
  SERVICE_UNAVAILABLE: { code: 1503, status: 503 },
  INTERNAL: { code: 1500, status: 500 },
};

/** Chinese "please log in", the spec's login-required message. */
export const LOGIN_REQUIRED_MSG = '请先登录';

export const notLoggedIn = () => new DomainError('UNAUTHENTICATED', LOGIN_REQUIRED_MSG);
export const badInput = (message: string) => new DomainError('BAD_USER_INPUT', message);
export const serviceUnavailable = (what: string) =>
  new DomainError('SERVICE_UNAVAILABLE', `${what} is unavailable, please retry shortly`);

/**
 * A backing service (Redis, PostgreSQL) did not answer: thrown by the stores (src/stores/redis.ts
 * wraps every failed Redis command that is not a Redis reply), so callers recognise it by its
 * class, never by its message text. `cause` keeps the original error for the log.
 */
export class BackendUnavailableError extends Error {
  constructor(
    readonly backend: 'redis' | 'postgres',
    options?: { cause?: unknown },
  ) {
    super(`${backend} is unavailable`, options);
    this.name = 'BackendUnavailableError';
  }
}

/**
 * What a thrown value means to a caller: a DomainError as it is; a backing service being
 * unreachable as SERVICE_UNAVAILABLE (retry later); anything else INTERNAL, its details masked.
 */
export function classifyError(error: unknown): DomainError {
  if (error instanceof DomainError) return error;
  if (isInfrastructureFailure(error)) return serviceUnavailable('A backing service');
  return new DomainError('INTERNAL', 'Internal error');
}

/** Error classes (by name: they come from several libraries) that mean "the backend is unreachable". */
const UNAVAILABLE_CLASSES = new Set(['BackendUnavailableError', 'MaxRetriesPerRequestError']);
/** Node's socket error codes and postgres.js's connection codes. */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
]);
/**
 * PostgreSQL SQLSTATEs: class 08 (connection exception), 53 (insufficient resources: too many
 * clients, out of memory, disk full), 57P01-57P03 (shutting down, cannot connect now), 57014
 * (statement timeout).
 */
const UNAVAILABLE_SQLSTATE = /^(08[0-9A-Z]{3}|53[0-9A-Z]{3}|57P0[1-3]|57014)$/;

/** Whether `error` (or what it wraps) says a backing service is unreachable: by class and code only. */
function isInfrastructureFailure(error: unknown, depth = 0): boolean {
  if (!(error instanceof Error) || depth > 5) return false;
  const code = (error as { code?: unknown }).code;
  return (
    error instanceof BackendUnavailableError ||
    UNAVAILABLE_CLASSES.has(error.name) ||
    (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code))) ||
    (error.cause !== undefined && isInfrastructureFailure(error.cause, depth + 1))
  );
}

/** `extensions.code` of a GraphQL error: the domain code, with the identities' "who are you" merged. */
export function graphqlCodeOf(code: ErrorCode): string {
  if (code === 'VISITOR_UNAUTHENTICATED' || code === 'API_KEY_INVALID') return 'UNAUTHENTICATED';
  if (code === 'INTERNAL') return 'INTERNAL_SERVER_ERROR';
  return code;
}
