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
 * are handled in order once the connection is set up. Each step closes the socket itself when it
 * refuses it and then returns undefined.
 */
async function openPusherConnection(
  shared: PusherServices,
  socket: WebSocket,
  request: IncomingMessage,
  entry: HeldSocket,
) {
  const url = new URL(request.url ?? '/', 'http://x');
  const appkey = PUSHER_PATH.exec(url.pathname)?.[1] as string;
  if (!acceptsProtocol(socket, url.searchParams.get('protocol'))) return;
  const early: string[] = [];
  const collect = (raw: unknown) => early.push(String(raw));
  socket.on('message', collect);

  const opened = openOnCore(shared, socket, request);
  if (!opened) return;
  entry.connection = opened.connection;
  socket.once('close', () => opened.closed());
  const app = await appOf(shared.deps, appkey, opened.connection, socket);
  if (!app) return;
  if (!(await authenticateAgentSession(shared.sessions, request, opened.connection, app))) return;
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

/** The `protocol` query parameter must name the version served; otherwise the socket is closed. */
function acceptsProtocol(socket: WebSocket, protocol: string | null): boolean {
  if (!protocol) {
    socket.close(PusherCloseCode.NoProtocolVersion, 'No protocol version supplied');
    return false;
  }
  if (Number(protocol) !== PROTOCOL_VERSION) {
    socket.close(PusherCloseCode.UnsupportedProtocolVersion, `Unsupported protocol version ${protocol}`);
    return false;
  }
  return true;
}

/**
 * The socket on the connection core (its caps checked now), as a PusherConnection; the core
 * reaches the socket through the hooks below. Closes the socket if the core refuses it.
 */
function openOnCore(shared: PusherServices, socket: WebSocket, request: IncomingMessage): PusherConnection | undefined {
  const { core, fanout } = shared;
  // The PusherConnection needs the core's Connection: the hooks reach it once it is made.
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
    socket.close(pusherCloseCodeOf[error.end], error.message);
    return undefined;
  }
  pusher = new PusherConnection(shared, socket, connection);
  return pusher;
}

/**
 * The merchant of the appkey, as the app the socket serves. An unknown appkey closes the socket
 * (4001); a lookup refused by the failed-lookup budget or an unavailable database ends it.
 */
async function appOf(
  deps: Deps,
  appkey: string,
  connection: Connection,
  socket: WebSocket,
): Promise<PusherApp | undefined> {
  let merchant: Awaited<ReturnType<typeof findPusherAppMerchant>>;
  try {
    merchant = await findPusherAppMerchant(deps, appkey, connection.address);
  } catch (error) {
    const refusal = classifyError(error);
    if (refusal.code === 'RATE_LIMITED') connection.end('rate_limited', refusal.message);
    else if (refusal.code === 'SERVICE_UNAVAILABLE') connection.end('try_later', 'Service unavailable: retry later');
    else throw error;
    return undefined;
  }
  if (!merchant) {
    socket.close(PusherCloseCode.ApplicationDoesNotExist, 'Application does not exist');
    return undefined;
  }
  return { id: merchant.id, appkey: merchant.appkey };
}

/**
 * An agent's browser connects with its Session cookie (same origin as the workbench): its own
 * channels are then allowed by name. A stale or absent Session leaves the connection anonymous
 * (visitor channels by capability, `private-` channels by signature). False when the core ended
 * the connection for another reason (a cap, a budget).
 */
async function authenticateAgentSession(
  sessions: PusherServices['sessions'],
  request: IncomingMessage,
  connection: Connection,
  app: PusherApp,
): Promise<boolean> {
  let sessionId: string | undefined;
  try {
    sessionId = sessions.sessionIdOf(request);
  } catch {
    sessionId = undefined;
  }
  if (!sessionId) return true;
  try {
    await connection.authenticate({ kind: 'agent', sessionId }, app.appkey);
  } catch (error) {
    if (!(error instanceof ConnectionRefused)) throw error;
    if (error.end !== 'forbidden') {
      connection.end(error.end, error.message);
      return false;
    }
  }
  return true;
}
