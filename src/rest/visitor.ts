import { Router } from 'express';
import type { Deps } from '../deps.js';
import { bearerToken, clientIp, wsAddressFor } from '../http/request.js';
import { parseInput, visitorTokenInput } from '../resolvers/inputs.js';
import { requireVisitor } from '../resolvers/viewer.js';
import { issueVisitorToken, loadVisitorBootstrap, revokeVisitorToken } from '../resolvers/visitor.js';
import { envelope } from './envelope.js';
import { legacyVisitorBootstrap } from './legacy.js';

/** The legacy `/visitor/*` endpoints and the visitor token endpoint. */
export function visitorRoutes(deps: Deps): Router {
  const router = Router();

  router.post(
    '/token',
    envelope(deps.log, async (req) => {
      const input = parseInput(visitorTokenInput, req.body);
      const issued = await issueVisitorToken(deps, input, clientIp(req, deps.config));
      return { token: issued.token, uid: issued.uid, expires_in: issued.expiresIn };
    }),
  );

  // The bearer's own token, revoked at once (e.g. the merchant's signed-in user logged out).
  router.post(
    '/token/revoke',
    envelope(deps.log, async (req) => {
      const token = bearerToken(req);
      await requireVisitor(deps, token);
      return { revoked: await revokeVisitorToken(deps, token as string) };
    }),
  );

  router.get(
    '/data/get',
    envelope(deps.log, async (req) => {
      const viewer = await requireVisitor(deps, bearerToken(req));
      return legacyVisitorBootstrap(
        await loadVisitorBootstrap(deps, viewer, { wsAddress: wsAddressFor(req, deps.config) }),
      );
    }),
  );

  return router;
}
