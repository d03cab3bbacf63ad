import type { IncomingMessage } from 'node:http';
import type { WebSocket } from 'ws';
import type { Deps } from '../deps.js';
import { classifyError } from '../errors.js';
import type { SessionLayer } from '../http/session.js';
import { findPusherAppMerchant } from '../resolvers/merchant.js';
import { type Connection, type ConnectionCore, type ConnectionEnd, ConnectionRefused } from './connection.js';
import type { Fanout } from './fanout.js';
import {
  ACTIVITY_TIMEOUT_SECONDS,
  type PusherApp,
  PusherCloseCode,
  PusherConnection,
  type PusherServices,
} from './pusher-connection.js';
import { closeEverySocket, type HeldSocket } from './shutdown.js';
import { socketServer } from './socket-server.js';

/**
 * The Pusher Channels protocol, version 7, at `/app/{appkey}` on the HTTP port: the real-time
 * half of legacy clients (pusher-js configured with `ws_address` and `appkey`). A second adapter
 * on the connection core (connection.ts): same identity rules, caps, re-checks, Session end,
 * back-pressure and bus as graphql-ws; only the framing differs. Learnt from the public
 * protocol documentation and pusher-js's source (docs/realtime.md "Pusher protocol").
 */

/** The path of a Pusher connection; the appkey names the merchant. */
export const PUSHER_PATH = /^\/app\/([A-Za-z0-9_.-]{1,128})$/;
/** The only protocol version served (pusher-js 7 and 8 speak it). */
const PROTOCOL_VERSION = 7;
/** The Pusher close code of each way the core ends a connection. */
const pusherCloseCodeOf: Record<ConnectionEnd, number> = {
  session_ended: PusherCloseCode.Unauthorized,
  forbidden: PusherCloseCode.Unauthorized,
  slow_consumer: PusherCloseCode.OverCapacity,
  going_away: PusherCloseCode.Reconnect,
  subscribe_rate: PusherCloseCode.RateLimited,
  too_many_connections: PusherCloseCode.OverConnectionQuota,
  rate_limited: PusherCloseCode.RateLimited,
  try_later: PusherCloseCode.OverCapacity,
};

export function createPusherServer(
  deps: Deps,
  sessions: Pick<SessionLayer, 'sessionIdOf'>,
  core: ConnectionCore,
  fanout: Fanout,
) {
  const wss = socketServer(deps.config);
  const shared: PusherServices = { deps, sessions, core, fanout };
  const held = new Map<WebSocket, HeldSocket>();
  wss.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    let resolveDone = () => {};
    const entry: HeldSocket = {
      finished: new Promise<void>((resolve) => {
        resolveDone = resolve;
      }),
    };
    held.set(socket, entry);
    socket.on('error', (error: Error & { code?: string }) => {
      deps.log.debug({ code: error.code, reason: error.message }, 'pusher client error');
    });
    void openPusherConnection(shared, socket, request, entry)
      .catch((error: unknown) => {
        deps.log.warn({ err: (error as Error).message }, 'pusher connection failed');
        socket.close(PusherCloseCode.OverCapacity, 'Internal error: retry later');
      })
      .finally(() => {
        const done = () => {
          held.delete(socket);
          resolveDone();
        };
        if (socket.readyState === socket.CLOSED) done();
        else socket.once('close', done);
      });
  });

  return {
    wss,
    /** Closes every socket (4200: reconnect at once) and waits for them, for graceful shutdown. */
    async close() {
      await closeEverySocket(wss, (socket) => held.get(socket), PusherCloseCode.Reconnect);
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

/**
 * A new socket: the protocol version, the core's caps, the merchant of the appkey and the agent
 * Session of the upgrade, then `connection_established`. Messages that arrive meanwhile wait and
 * are handled in order once the connection is set up.
 */
async function openPusherConnection(
  shared: PusherServices,
  socket: WebSocket,
  request: IncomingMessage,
  entry: HeldSocket,
) {
  const { deps, sessions, core, fanout } = shared;
  const url = new URL(request.url ?? '/', 'http://x');
  const appkey = PUSHER_PATH.exec(url.pathname)?.[1] as string;
  const protocol = url.searchParams.get('protocol');
  if (!protocol) return socket.close(PusherCloseCode.NoProtocolVersion, 'No protocol version supplied');
  if (Number(protocol) !== PROTOCOL_VERSION) {
    return socket.close(PusherCloseCode.UnsupportedProtocolVersion, `Unsupported protocol version ${protocol}`);
  }
  const early: string[] = [];
  const collect = (raw: unknown) => early.push(String(raw));
  socket.on('message', collect);

  let pusher: PusherConnection | undefined;
  let connection: Connection;
  try {
    connection = core.open(
      {
        end: (why, reason) => socket.close(pusherCloseCodeOf[why], reason),
        activeSubscriptions: () => pusher?.subscriptions.size ?? 0,
        sessionEnded: (event) => {
          if (pusher) fanout.sessionEnded(pusher.to, event);
        },
        levelChanged: (agentId, level) => {
          if (pusher) fanout.levelChanged(pusher.to, agentId, level);
        },
      },
      request,
    );
  } catch (error) {
    if (!(error instanceof ConnectionRefused)) throw error;
    return socket.close(pusherCloseCodeOf[error.end], error.message);
  }
  entry.connection = connection;
  const opened = new PusherConnection(shared, socket, connection);
  pusher = opened;
  socket.once('close', () => opened.closed());

  let merchant: Awaited<ReturnType<typeof findPusherAppMerchant>>;
  try {
    merchant = await findPusherAppMerchant(deps, appkey, connection.address);
  } catch (error) {
    const refusal = classifyError(error);
    if (refusal.code === 'RATE_LIMITED') return connection.end('rate_limited', refusal.message);
    if (refusal.code !== 'SERVICE_UNAVAILABLE') throw error;
    return connection.end('try_later', 'Service unavailable: retry later');
  }
  if (!merchant) return socket.close(PusherCloseCode.ApplicationDoesNotExist, 'Application does not exist');
  const app: PusherApp = { id: merchant.id, appkey: merchant.appkey };

  // An agent's browser connects with its Session cookie (same origin as the workbench): its
  // own channels are then allowed by name. A stale or absent Session leaves the connection
  // anonymous (visitor channels by capability, `private-` channels by signature).
  let sessionId: string | undefined;
  try {
    sessionId = sessions.sessionIdOf(request);
  } catch {
    sessionId = undefined;
  }
  if (sessionId) {
    try {
      await connection.authenticate({ kind: 'agent', sessionId }, app.appkey);
    } catch (error) {
      if (!(error instanceof ConnectionRefused)) throw error;
      if (error.end !== 'forbidden') return connection.end(error.end, error.message);
    }
  }
  if (socket.readyState !== socket.OPEN) return;

  opened.begin(app);
  socket.off('message', collect);
  socket.on('message', (raw) => opened.receive(String(raw)));
  opened.sendEvent('pusher:connection_established', {
    socket_id: opened.socketId,
    activity_timeout: ACTIVITY_TIMEOUT_SECONDS,
  });
  for (const raw of early) opened.receive(raw);
}
