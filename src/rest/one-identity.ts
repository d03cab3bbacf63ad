import type { NextFunction, Request, Response } from 'express';
import { badInput } from '../errors.js';
import { bearerToken, queryOf, TWO_IDENTITIES } from '../http/request.js';
import type { Logger } from '../log.js';
import { sendError } from './envelope.js';

/**
 * The spec's two identities cannot be exchanged, so a request that names both explicitly — a
 * visitor bearer and an agent `token` header or query parameter — is refused rather than
 * guessed at: REST answers 400 (1000) in the envelope, GraphQL 400 BAD_USER_INPUT; the
 * WebSocket adapters close such a connection_init with 4403 (src/subscriptions/). A Session
 * cookie alone is ambient, not a claim: beside a bearer the request is the visitor's.
 */
export function refuseTwoIdentities(log: Logger) {
  return (req: Request, res: Response, next: NextFunction) => {
    let bearer: string | undefined;
    try {
      bearer = bearerToken(req);
    } catch {
      return next(); // a repeated Authorization header is refused where it is read
    }
    if (!bearer || (req.headers.token === undefined && !queryOf(req).has('token'))) return next();
    if (req.path === '/graphql') {
      res.status(400).json({ errors: [{ message: TWO_IDENTITIES, extensions: { code: 'BAD_USER_INPUT' } }] });
      return;
    }
    sendError(res, badInput(TWO_IDENTITIES), log);
  };
}
