import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { Deps } from '../deps.js';
import { classifyError, restErrorTable } from '../errors.js';
import { bearerToken } from '../http/request.js';
import { requestSessionPort, type SessionLayer } from '../http/session.js';
import { authorizePrivateChannel, type ChannelGrant } from '../resolvers/channel-auth.js';
import type { ChannelViewer } from '../resolvers/channels.js';
import { requireAgent, requireVisitor } from '../resolvers/viewer.js';

/** Where pusher-js asks for channel signatures by default (`channelAuthorization.endpoint`). */
export const PUSHER_AUTH_PATH = '/pusher/auth';

/**
 * `POST /pusher/auth`: the channel authorization endpoint pusher-js calls for a `private-`
 * channel, with `socket_id` and `channel_name` (form or JSON) and the caller's identity in
 * headers — a visitor `Authorization: Bearer`, else the agent Session (cookie or `token`).
 * 200 `{auth}`; a refusal answers `{error, code}` with 400, 401, 403, 429 or 503, which
 * pusher-js reports as `pusher:subscription_error` with that status.
 * Interim wiring: the REST route declarations will own it (README "Real-time").
 */
export function pusherAuthRoute(deps: Deps, sessions: Pick<SessionLayer, 'middleware'>): RequestHandler[] {
  const agentSession = express.Router().use(sessions.middleware);
  return [
    express.urlencoded({ extended: false, limit: '4kb' }),
    express.json({ limit: '4kb' }),
    // One identity per request: a visitor bearer never runs the agent Session layer.
    (req: Request, res: Response, next: NextFunction) => (bearerToken(req) ? next() : agentSession(req, res, next)),
    async (req: Request, res: Response) => {
      res.set('cache-control', 'no-store');
      try {
        const bearer = bearerToken(req);
        let viewer: ChannelViewer;
        let grant: ChannelGrant;
        if (bearer) {
          viewer = await requireVisitor(deps, bearer);
          grant = { kind: 'visitor', bearer };
        } else {
          viewer = await requireAgent(deps, requestSessionPort(req));
          grant = { kind: 'agent', sessionId: req.sessionID };
        }
        const body = (req.body ?? {}) as { socket_id?: unknown; channel_name?: unknown };
        res.json(
          await authorizePrivateChannel(deps, viewer, grant, {
            socketId: body.socket_id,
            channelName: body.channel_name,
          }),
        );
      } catch (error) {
        const domain = classifyError(error);
        if (domain.code === 'INTERNAL') deps.log.error({ err: (error as Error).message }, 'pusher auth failed');
        const status =
          domain.code === 'UNAUTHENTICATED' ||
          domain.code === 'VISITOR_UNAUTHENTICATED' ||
          domain.code === 'SESSION_MISMATCH'
            ? 401
            : restErrorTable[domain.code].status === 200
              ? 403
              : restErrorTable[domain.code].status;
        res.status(status).json({ error: domain.message, code: domain.code });
      }
    },
  ];
}
