import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Response } from 'express';
import { classifyError, restErrorTable } from '../errors.js';
import { writeJson } from '../http/front.js';
import { type Logger, loggableError } from '../log.js';

/** The legacy response shape of every JSON endpoint. */
export interface Envelope<T = unknown> {
  code: number;
  msg: string;
  data: T;
}

/**
 * Sends a success envelope. A POST's answer is written with node's own methods, byte for byte as
 * express's `res.json` writes it (a POST's answer is never "fresh", express's 304 being for GET
 * and HEAD), so it also answers a request the front door took before express (src/http/front.ts).
 */
export function sendOk(req: IncomingMessage, res: Response, data: unknown, msg = 'ok', status = 200) {
  const envelope = { code: 0, msg, data } satisfies Envelope;
  if (req.method === 'POST') writeJson(res, status, JSON.stringify(envelope));
  else res.status(status).json(envelope);
}

/**
 * Sends any thrown value as an envelope; unknown errors are logged and masked. Written with node's
 * own response methods (as express's `res.json` would write it), so it also answers a request the
 * front door took before express (src/http/front.ts).
 */
export function sendError(res: ServerResponse, error: unknown, log: Logger) {
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
  writeJson(res, status, JSON.stringify({ code, msg: domain.message, data: [] } satisfies Envelope));
}
