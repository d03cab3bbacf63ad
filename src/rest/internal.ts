import { timingSafeEqual } from 'node:crypto';
import { type Request, Router } from 'express';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import { bearerToken } from '../http/request.js';
import { publishEvent } from '../resolvers/channels.js';
import { parseInput, publishEventInput } from '../resolvers/inputs.js';
import { sendError, sendOk } from './envelope.js';

/**
 * `POST /internal/events`: the publish API for the services the spec leaves out (messages,
 * assignment). Bearer INTERNAL_API_TOKEN; absent entirely when that variable is unset.
 */
export function internalRoutes(deps: Deps): Router {
  const router = Router();
  const secret = deps.config.internalApiToken;
  if (!secret) return router;

  router.post('/events', async (req, res) => {
    try {
      if (!authorized(req, secret)) throw new DomainError('FORBIDDEN', 'A valid internal API token is required');
      const event = await publishEvent(deps, parseInput(publishEventInput, req.body));
      sendOk(res, { id: event.id }, 'ok', 202);
    } catch (error) {
      sendError(res, error, deps.log);
    }
  });
  return router;
}

function authorized(req: Request, secret: string) {
  const given = Buffer.from(bearerToken(req) ?? '');
  const expected = Buffer.from(secret);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
