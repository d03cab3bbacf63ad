import { Router } from 'express';
import type { Deps } from '../deps.js';
import { DomainError, notLoggedIn } from '../errors.js';
import { sendError } from '../rest/envelope.js';

/** Browser pages. TODO(pages issue): the real pages. */
export function pageRoutes(deps: Deps): Router {
  const router = Router();
  // Unknown JSON under /agent/*: not logged in → -1 (spec), logged in → 404.
  router.use('/agent', (req, res) => {
    sendError(res, req.session?.agent ? new DomainError('NOT_FOUND', 'Not found') : notLoggedIn(), deps.log);
  });
  return router;
}
