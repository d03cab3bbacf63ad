import { z } from 'zod';
import { notLoggedIn, restErrorTable } from '../errors.js';
import { bearerToken, clientIp } from '../http/request.js';
import { authorizePrivateChannel, type ChannelGrant, PRIVATE_PREFIX } from '../resolvers/channel-auth.js';
import { text } from '../resolvers/inputs.js';
import { hashToken } from '../resolvers/viewer.js';
import { type AnyRoute, rawRoute } from './route.js';

/** The endpoint pusher-js calls for a `private-` channel (its default `authEndpoint` path). */
const PUSHER_AUTH_PATH = '/pusher/auth';

const pusherAuthInput = z.object({
  socket_id: text(40),
  channel_name: text(PRIVATE_PREFIX.length + 200),
});

/**
 * Pusher channel authorization (docs/realtime.md "Pusher protocol"): answers in Pusher's own shapes,
 * `{auth}` or `{error, code}` with an HTTP status pusher-js reports as the subscription error.
 */
export const pusherEndpoints: AnyRoute[] = [
  rawRoute({
    method: 'post',
    path: PUSHER_AUTH_PATH,
    identity: 'participant',
    tag: 'Real-time',
    summary: 'Pusher channel authorization',
    description:
      'pusher-js posts `socket_id` and `channel_name` (a `private-` channel) with the caller’s identity in headers: a visitor bearer, else the agent Session. Answers `{auth: "<appkey>:<hex HMAC-SHA256>"}`; refusals `{error, code}` with 400, 401, 403, 429 or 503 (not the envelope).',
    input: pusherAuthInput,
    encodings: ['form', 'json'],
    requestExample: { socket_id: '1234.5678', channel_name: 'private-agent-a_alice' },
    raw: {
      contentType: 'application/json',
      description: 'The signature for this socket and channel.',
      schema: z.object({ auth: z.string() }).strict(),
    },
    errors: { 403: 'Not allowed this channel (any refusal that is not about identity or input).' },
    errorSchema: z.object({ error: z.string(), code: z.string() }).strict(),
    onError({ res }, error) {
      const unauthenticated = ['UNAUTHENTICATED', 'VISITOR_UNAUTHENTICATED', 'SESSION_MISMATCH'].includes(error.code);
      const status = restErrorTable[error.code].status;
      res.set('Cache-Control', 'no-store');
      if (error.retryAfterSeconds) res.set('Retry-After', String(error.retryAfterSeconds));
      res
        .status(unauthenticated ? 401 : status === 200 ? 403 : status)
        .json({ error: error.message, code: error.code });
    },
    async handle({ deps, req, res, viewer, input }) {
      if (!viewer) throw notLoggedIn();
      const grant: ChannelGrant =
        viewer.kind === 'visitor'
          ? { kind: 'visitor', tokenHash: hashToken(bearerToken(req) as string) }
          : { kind: 'agent', sessionId: req.sessionID };
      const signed = await authorizePrivateChannel(deps, viewer, grant, {
        socketId: input.socket_id,
        channelName: input.channel_name,
        address: clientIp(req, deps.config),
      });
      res.set('Cache-Control', 'no-store').json(signed);
    },
  }),
];
