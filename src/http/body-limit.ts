import express, { type NextFunction, type Request, type Response } from 'express';
import { DomainError } from '../errors.js';

/** Every request body is capped at this many bytes, whatever its content type (413 past it). */
const MAX_BODY_BYTES = 64 * 1024;

const tooLarge = () => new DomainError('PAYLOAD_TOO_LARGE', `Request body larger than ${MAX_BODY_BYTES / 1024}kb`);

/**
 * Refuses, before reading a byte of it, a body whose declared Content-Length exceeds
 * MAX_BODY_BYTES, on every route and for every content type (mounted first), except the
 * requests `exempt` names (streamed uploads, which enforce their own limits as they read). A
 * chunked body is capped where it is read: by the JSON and form parsers, and on /graphql by
 * `cappedRawBody`.
 */
export function declaredBodyCap(exempt: (req: Request) => boolean) {
  return (req: Request, _res: Response, next: NextFunction) => {
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > MAX_BODY_BYTES && !exempt(req)) return next(tooLarge());
    next();
  };
}

/**
 * Reads any body the JSON parser left (application/graphql, text/plain, multipart, …) into a
 * Buffer of at most MAX_BODY_BYTES (413 past it), so graphql-yoga, which reads the rest itself
 * up to its own 25 MB, never sees more than the cap.
 */
export const cappedRawBody = express.raw({ type: () => true, limit: MAX_BODY_BYTES });
