import { randomInt } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { type WebSocket, WebSocketServer } from 'ws';
import type { Deps } from '../deps.js';
import { classifyError, DomainError } from '../errors.js';
import type { SessionLayer } from '../http/session.js';
import {
  type ChannelGrant,
  PRIVATE_PREFIX,
  sameIdentity,
  verifyPrivateSubscription,
  visitorOfChannelCapability,
} from '../resolvers/channel-auth.js';
import { authorizeChannel, type ChannelViewer } from '../resolvers/channels.js';
import { findMerchantByAppkey } from '../resolvers/merchant.js';
import { type ChannelEvent, HISTORY_GAP, SUBSCRIBED } from '../stores/bus.js';
import { type Connection, type ConnectionCore, type ConnectionEnd, ConnectionRefused } from './connection.js';
import type { ChannelSubscription, Fanout, FanoutSocket, FrameFormat } from './fanout.js';
import { MAX_WS_PAYLOAD_BYTES } from './limits.js';
import { verifyOrigin } from './origin.js';

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
/** Seconds of silence after which a client should ping (sent in `connection_established`). */
export const ACTIVITY_TIMEOUT_SECONDS = 120;
/** After pinging a silent client, the time it has to answer before the socket is closed 4201. */
const PONG_WAIT_MS = 30_000;
/** On shutdown, a socket that does not finish the close handshake in this time is cut. */
const SHUTDOWN_CLOSE_MS = 3000;

/**
 * Pusher close codes (protocol: 4000–4099 the client must not reconnect, 4100–4199 reconnect
 * after backing off, 4200–4299 reconnect at once). pusher-js acts on exactly these ranges.
 */
export const PusherCloseCode = {
  /** The appkey names no merchant. */
  ApplicationDoesNotExist: 4001,
  /** Over a per-identity or per-address socket cap. */
  OverConnectionQuota: 4004,
  UnsupportedProtocolVersion: 4007,
  NoProtocolVersion: 4008,
  /** The identity is no longer valid: the agent Session ended, a visitor token was revoked. */
  Unauthorized: 4009,
  /** The instance is at capacity, a backing service is unavailable, or this client is too slow. */
  OverCapacity: 4100,
  /** Graceful shutdown of this instance: reconnect at once (to another). */
  Reconnect: 4200,
  /** A ping went unanswered. */
  PongNotReceived: 4201,
  /** Too many `pusher:subscribe` messages in the window. */
  RateLimited: 4301,
} as const;

const pusherCloseCodeOf: Record<ConnectionEnd, number> = {
  session_ended: PusherCloseCode.Unauthorized,
  forbidden: PusherCloseCode.Unauthorized,
  slow_consumer: PusherCloseCode.OverCapacity,
  going_away: PusherCloseCode.Reconnect,
  subscribe_rate: PusherCloseCode.RateLimited,
  too_many_connections: PusherCloseCode.OverConnectionQuota,
  try_later: PusherCloseCode.OverCapacity,
};

/** The HTTP-like `status` of a `pusher:subscription_error` for a refusal of ours. */
const statusOf = (error: DomainError) =>
  error.code === 'RATE_LIMITED'
    ? 429
    : error.code === 'SERVICE_UNAVAILABLE'
      ? 503
      : error.code === 'BAD_USER_INPUT'
        ? 400
        : 403;

interface PusherMessage {
  event?: unknown;
  channel?: unknown;
  data?: unknown;
}

export function createPusherServer(
  deps: Deps,
  sessions: Pick<SessionLayer, 'sessionIdOf'>,
  core: ConnectionCore,
  fanout: Fanout,
) {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_WS_PAYLOAD_BYTES,
    perMessageDeflate: false,
    verifyClient: verifyOrigin(deps.config),
  });
  const finished = new Map<WebSocket, { connection?: Connection; done: Promise<void> }>();
  wss.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    let resolveDone = () => {};
    const entry: { connection?: Connection; done: Promise<void> } = {
      done: new Promise<void>((resolve) => {
        resolveDone = resolve;
      }),
    };
    finished.set(socket, entry);
    socket.on('error', (error: Error & { code?: string }) => {
      deps.log.debug({ code: error.code, reason: error.message }, 'pusher client error');
    });
    void serve(socket, request, entry)
      .catch((error: unknown) => {
        deps.log.warn({ err: (error as Error).message }, 'pusher connection failed');
        socket.close(PusherCloseCode.OverCapacity, 'Internal error: retry later');
      })
      .finally(() => {
        const done = () => {
          finished.delete(socket);
          resolveDone();
        };
        if (socket.readyState === socket.CLOSED) done();
        else socket.once('close', done);
      });
  });

  async function serve(socket: WebSocket, request: IncomingMessage, entry: { connection?: Connection }) {
    const url = new URL(request.url ?? '/', 'http://x');
    const appkey = PUSHER_PATH.exec(url.pathname)?.[1] as string;
    const protocol = url.searchParams.get('protocol');
    if (!protocol) return socket.close(PusherCloseCode.NoProtocolVersion, 'No protocol version supplied');
    if (Number(protocol) !== PROTOCOL_VERSION) {
      return socket.close(PusherCloseCode.UnsupportedProtocolVersion, `Unsupported protocol version ${protocol}`);
    }
    // Messages that arrive while the connection is being set up wait for it.
    const early: string[] = [];
    const collect = (raw: unknown) => early.push(String(raw));
    socket.on('message', collect);

    // Pusher channel name (with its `private-` prefix) -> its subscription; undefined while authorizing.
    const subscriptions = new Map<string, ChannelSubscription | undefined>();
    let to: FanoutSocket | undefined;
    let connection: Connection;
    try {
      connection = core.open(
        {
          end: (why, reason) => socket.close(pusherCloseCodeOf[why], reason),
          activeSubscriptions: () => subscriptions.size,
          sessionEnded: (event) => {
            if (to) fanout.sessionEnded(to, event);
          },
        },
        request,
      );
    } catch (error) {
      if (!(error instanceof ConnectionRefused)) throw error;
      return socket.close(pusherCloseCodeOf[error.end], error.message);
    }
    entry.connection = connection;
    const fanoutSocket: FanoutSocket = {
      socket,
      connection,
      slowReason: 'Slow consumer: reconnect',
      subscriptions: new Set(),
    };
    to = fanoutSocket;
    socket.once('close', () => {
      for (const sub of [...fanoutSocket.subscriptions]) fanout.end(sub);
      subscriptions.clear();
      void connection.closed();
    });

    let merchant: Awaited<ReturnType<typeof findMerchantByAppkey>>;
    try {
      merchant = await findMerchantByAppkey(deps, appkey);
    } catch (error) {
      if (classifyError(error).code !== 'SERVICE_UNAVAILABLE') throw error;
      return connection.end('try_later', 'Service unavailable: retry later');
    }
    if (!merchant) return socket.close(PusherCloseCode.ApplicationDoesNotExist, 'Application does not exist');
    const app = { id: merchant.id, appkey: merchant.appkey };

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

    const socketId = `${randomInt(1, 2 ** 47)}.${randomInt(1, 2 ** 47)}`;
    const send = (frame: string) => {
      if (socket.readyState === socket.OPEN) socket.send(frame);
    };
    const sendEvent = (event: string, data: unknown, channel?: string) =>
      send(JSON.stringify({ event, ...(channel === undefined ? {} : { channel }), data: JSON.stringify(data) }));
    const subscriptionError = (channel: string, error: DomainError) =>
      sendEvent(
        'pusher:subscription_error',
        { type: 'AuthError', error: error.message, status: statusOf(error) },
        channel,
      );

    // Liveness: a client silent for the activity timeout is pinged and must answer in PONG_WAIT_MS.
    let lastActivity = Date.now();
    let pongDeadline: NodeJS.Timeout | undefined;
    const activity = setInterval(() => {
      if (Date.now() - lastActivity < ACTIVITY_TIMEOUT_SECONDS * 1000 || pongDeadline) return;
      sendEvent('pusher:ping', {});
      pongDeadline = setTimeout(
        () => socket.close(PusherCloseCode.PongNotReceived, 'Pong reply not received'),
        PONG_WAIT_MS,
      );
    }, ACTIVITY_TIMEOUT_SECONDS * 1000);
    activity.unref();
    socket.once('close', () => {
      clearInterval(activity);
      clearTimeout(pongDeadline);
    });

    /** The identity a subscription runs under: the connection's, bound on first use of a signature. */
    async function viewerFor(channel: string, auth: unknown): Promise<ChannelViewer> {
      if (channel.startsWith(PRIVATE_PREFIX)) {
        const grant = await verifyPrivateSubscription(deps, app, socketId, channel, auth);
        const current = connection.identity as ChannelGrant | undefined;
        if (!current) {
          try {
            await connection.authenticate(
              grant.kind === 'agent'
                ? { kind: 'agent', sessionId: grant.sessionId }
                : { kind: 'visitor', bearer: grant.bearer },
              app.appkey,
            );
          } catch (error) {
            if (!(error instanceof ConnectionRefused)) throw error;
            if (error.end !== 'forbidden') connection.end(error.end, error.message);
            throw new DomainError('FORBIDDEN', error.message);
          }
        } else if (!sameIdentity(current, grant)) {
          throw new DomainError('FORBIDDEN', 'A connection has one identity: this signature is for another');
        }
        const viewer = connection.viewer as ChannelViewer;
        authorizeChannel(viewer, channel.slice(PRIVATE_PREFIX.length));
        return viewer;
      }
      if (connection.viewer) {
        try {
          authorizeChannel(connection.viewer, channel);
          return connection.viewer;
        } catch (error) {
          if (!channel.startsWith('visitor-')) throw error;
        }
      }
      const visitor = channel.startsWith('visitor-')
        ? await visitorOfChannelCapability(deps, app.id, channel)
        : undefined;
      if (!visitor)
        throw new DomainError('FORBIDDEN', `Not allowed to subscribe to channel ${JSON.stringify(channel)}`);
      connection.followCapability(
        async () => Boolean(await visitorOfChannelCapability(deps, app.id, channel)),
        'Visitor channel no longer valid: get a new visitor token',
      );
      return visitor;
    }

    async function subscribe(channel: string, auth: unknown) {
      if (subscriptions.has(channel)) return sendEvent('pusher_internal:subscription_succeeded', {}, channel);
      let release: () => void;
      try {
        if (channel.length > 200 + PRIVATE_PREFIX.length)
          throw new DomainError('BAD_USER_INPUT', 'Channel name too long');
        if (channel.startsWith('presence-')) throw new DomainError('FORBIDDEN', 'Presence channels are not offered');
        release = connection.admitSubscription();
      } catch (error) {
        if (error instanceof DomainError) return subscriptionError(channel, error);
        throw error;
      }
      subscriptions.set(channel, undefined);
      try {
        const viewer = await viewerFor(channel, auth);
        if (!subscriptions.has(channel) || socket.readyState !== socket.OPEN) return release(); // unsubscribed meanwhile
        const name = channel.startsWith(PRIVATE_PREFIX) ? channel.slice(PRIVATE_PREFIX.length) : channel;
        const key = `pusher:${channel}`;
        const sub = fanout.subscribe({
          channel: name,
          viewer,
          to: fanoutSocket,
          format: fanout.format(key, () => pusherFormat(key, channel)),
          before: '',
          after: '',
          owner: {
            ended(error) {
              release();
              if (subscriptions.get(channel) === sub) subscriptions.delete(channel);
              if (error !== undefined && socket.readyState === socket.OPEN) refuse(channel, error);
            },
          },
        });
        if (!sub.ended) subscriptions.set(channel, sub);
      } catch (error) {
        release();
        subscriptions.delete(channel);
        refuse(channel, error);
      }
    }

    /** A subscription that could not be served: refused with its status (an unexpected error logged, masked). */
    function refuse(channel: string, error: unknown) {
      const domain = classifyError(error);
      if (domain.code === 'INTERNAL') deps.log.warn({ err: (error as Error).message }, 'pusher subscription failed');
      subscriptionError(channel, domain);
    }

    const onMessage = (raw: string) => {
      lastActivity = Date.now();
      clearTimeout(pongDeadline);
      pongDeadline = undefined;
      let message: PusherMessage;
      try {
        message = JSON.parse(raw) as PusherMessage;
      } catch {
        return sendEvent('pusher:error', { code: null, message: 'Invalid JSON' });
      }
      const data = (typeof message.data === 'string' ? safeParse(message.data) : message.data) as
        | { channel?: unknown; auth?: unknown }
        | undefined;
      switch (message.event) {
        case 'pusher:ping':
          return sendEvent('pusher:pong', {});
        case 'pusher:pong':
          return;
        case 'pusher:subscribe':
          if (typeof data?.channel !== 'string' || data.channel === '') {
            return sendEvent('pusher:error', { code: null, message: 'pusher:subscribe needs a channel' });
          }
          if (connection.ending) return;
          return void subscribe(data.channel, data.auth);
        case 'pusher:unsubscribe': {
          if (typeof data?.channel !== 'string') return;
          const sub = subscriptions.get(data.channel);
          subscriptions.delete(data.channel);
          if (sub) fanout.end(sub);
          return;
        }
        default:
          if (typeof message.event === 'string' && message.event.startsWith('client-')) {
            // Client events (peer-to-peer typing, …) are not relayed: everything on a channel
            // comes from the gateway (the typing indicator is a chat API call).
            return sendEvent('pusher:error', { code: null, message: 'Client events are not enabled on this gateway' });
          }
          return sendEvent('pusher:error', { code: null, message: 'Unknown event' });
      }
    };

    socket.off('message', collect);
    socket.on('message', (raw) => onMessage(String(raw)));
    sendEvent('pusher:connection_established', { socket_id: socketId, activity_timeout: ACTIVITY_TIMEOUT_SECONDS });
    for (const raw of early) onMessage(raw);
  }

  return {
    wss,
    /** Closes every socket (4200: reconnect at once) and waits for them, for graceful shutdown. */
    async close() {
      await Promise.all(
        [...wss.clients].map((socket) => {
          const cut = setTimeout(() => socket.terminate(), SHUTDOWN_CLOSE_MS);
          const entry = finished.get(socket);
          if (entry?.connection) entry.connection.end('going_away', 'Server shutting down');
          else socket.close(PusherCloseCode.Reconnect, 'Server shutting down');
          return (entry?.done ?? Promise.resolve()).finally(() => clearTimeout(cut));
        }),
      );
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

/**
 * A Pusher channel's frames: the bus event as it is (`data` a JSON string, as the protocol has
 * it), serialized once per event for every socket subscribed under this channel name. The
 * `subscribed` event is the moment the subscription is live: `subscription_succeeded`. There is
 * no resume in this protocol, so no `history.gap` either.
 */
function pusherFormat(key: string, channel: string): FrameFormat {
  return {
    key,
    payload(event: ChannelEvent) {
      if (event.event === SUBSCRIBED) {
        return JSON.stringify({ event: 'pusher_internal:subscription_succeeded', channel, data: '{}' });
      }
      if (event.event === HISTORY_GAP) return undefined;
      return JSON.stringify({ event: event.event, channel, data: JSON.stringify(event.data ?? null) });
    },
  };
}

function safeParse(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    return undefined;
  }
}
