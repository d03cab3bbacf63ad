import type { NextFunction, Request, Response } from 'express';
import { badInput } from '../errors.js';
import { writeJson } from '../http/front.js';
import { bearerToken, pathOf, queryOf, TWO_IDENTITIES } from '../http/request.js';
import { hasSessionCookie } from '../http/session.js';
import { isApiKeyShaped } from '../ids.js';
import type { Logger } from '../log.js';
import { sendError } from './envelope.js';

/** What a request carrying an API key and an agent Session is told. */
export const KEY_AND_SESSION =
  'Send one identity: an API key (Authorization: Bearer prly_…) or an agent Session, never both';

/**
 * The spec's two identities cannot be exchanged, so a request that names both explicitly — a
 * visitor bearer and an agent `token` header or query parameter — is refused rather than
 * guessed at: REST answers 400 (1000) in the envelope, GraphQL 400 BAD_USER_INPUT; the
 * WebSocket adapters close such a connection_init with 4403 (src/subscriptions/). A Session
 * cookie alone is ambient, not a claim: beside a visitor bearer the request is the visitor's.
 * An API key (`Bearer prly_…`) beside any agent Session — `token` header, query or cookie — is
 * refused the same way (docs/integration.md "API keys").
 */
export function refuseTwoIdentities(log: Logger) {
  return (req: Request, res: Response, next: NextFunction) => {
    let bearer: string | undefined;
    try {
      bearer = bearerToken(req);
    } catch {
      return next(); // a repeated Authorization header is refused where it is read
    }
    if (!bearer) return next();
    const explicitSession = req.headers.token !== undefined || queryOf(req).has('token');
    // An API key is a server's credential: beside any Session (even the ambient cookie) it is refused.
    const key = isApiKeyShaped(bearer);
    if (!explicitSession && !(key && hasSessionCookie(req))) return next();
    const message = key ? KEY_AND_SESSION : TWO_IDENTITIES;
    if (pathOf(req) === '/graphql') {
      writeJson(res, 400, JSON.stringify({ errors: [{ message, extensions: { code: 'BAD_USER_INPUT' } }] }));
      return;
    }
    sendError(res, badInput(message), log);
  };
}
