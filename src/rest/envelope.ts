import type { Response } from 'express';
import { classifyError, restErrorTable } from '../errors.js';
import { type Logger, loggableError } from '../log.js';

/** The legacy response shape of every JSON endpoint. */
export interface Envelope<T = unknown> {
  code: number;
  msg: string;
  data: T;
}

export function sendOk(res: Response, data: unknown, msg = 'ok', status = 200) {
  res.status(status).json({ code: 0, msg, data } satisfies Envelope);
}

/** Sends any thrown value as an envelope; unknown errors are logged and masked. */
export function sendError(res: Response, error: unknown, log: Logger) {
  const domain = classifyError(error);
  // A deliberate "busy, retry later" (it names its wait) is load, not a fault: one line, no stack.
  if (domain.code === 'SERVICE_UNAVAILABLE' && domain.retryAfterSeconds) {
    log.warn({ code: domain.code, retryAfterSeconds: domain.retryAfterSeconds }, domain.message);
  } else if (domain.code === 'INTERNAL' || domain.code === 'SERVICE_UNAVAILABLE') {
    log.error({ err: loggableError(error) }, domain.message);
  }
  const { code, status } = restErrorTable[domain.code];
  if (domain.retryAfterSeconds) res.setHeader('Retry-After', String(domain.retryAfterSeconds));
  if (res.headersSent) return;
  res.status(status).json({ code, msg: domain.message, data: [] } satisfies Envelope);
}
