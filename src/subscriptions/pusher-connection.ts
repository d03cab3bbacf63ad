import { randomInt } from 'node:crypto';
import type { WebSocket } from 'ws';
import type { Deps } from '../deps.js';
import { classifyError, DomainError } from '../errors.js';
import type { SessionLayer } from '../http/session.js';
import {
  type ChannelGrant,
  PRIVATE_PREFIX,
  sameIdentity,
  verifyPrivateSubscription,
  visitorOfChannelCapability,
  visitorOfRequestedChannel,
} from '../resolvers/channel-auth.js';
import { authorizeChannel, type ChannelViewer } from '../resolvers/channels.js';
import { type ChannelEvent, HISTORY_GAP, SUBSCRIBED } from '../stores/bus.js';
import { type Connection, type ConnectionCore, ConnectionRefused } from './connection.js';
import type { ChannelSubscription, Fanout, FanoutSocket, FrameFormat } from './fanout.js';

/**
 * One Pusher socket once it is set up (pusher.ts opens it): the client's messages dispatched by
 * event name to a table of handlers, its channels on the fan-out, its liveness.
 */

/** Seconds of silence after which a client should ping (sent in `connection_established`). */
export const ACTIVITY_TIMEOUT_SECONDS = 120;
/** After pinging a silent client, the time it has to answer before the socket is closed 4201. */
const PONG_WAIT_MS = 30_000;
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

/** What every Pusher socket of the instance shares. */
export interface PusherServices {
  deps: Deps;
  sessions: Pick<SessionLayer, 'sessionIdOf'>;
  core: ConnectionCore;
  fanout: Fanout;
}

/** The merchant a connection's appkey names. */
export interface PusherApp {
  id: string;
  appkey: string;
}

/** The `data` of a client's message, parsed when it is a JSON string. */
type PusherData = { channel?: unknown; auth?: unknown } | undefined;

/** The client's messages, by event name (a `client-` event or any other name is answered `pusher:error`). */
const HANDLERS = new Map<string, (pusher: PusherConnection, data: PusherData) => void>([
  ['pusher:ping', (pusher) => pusher.sendEvent('pusher:pong', {})],
  ['pusher:pong', () => {}],
  [
    'pusher:subscribe',
    (pusher, data) => {
      if (typeof data?.channel !== 'string' || data.channel === '') {
        return pusher.sendEvent('pusher:error', { code: null, message: 'pusher:subscribe needs a channel' });
      }
      if (pusher.connection.ending) return;
      void pusher.subscribe(data.channel, data.auth);
    },
  ],
  [
    'pusher:unsubscribe',
    (pusher, data) => {
      if (typeof data?.channel === 'string') pusher.unsubscribe(data.channel);
    },
  ],
]);

/** One Pusher socket: its core connection, its channels, its liveness. */
export class PusherConnection {
  /** Pusher channel name (with its `private-` prefix) -> its subscription; undefined while authorizing. */
  readonly subscriptions = new Map<string, ChannelSubscription | undefined>();
  /** Pusher channel name -> its latest `pusher:subscribe` being handled (requests of a channel run one at a time). */
  private readonly requests = new Map<string, Promise<void>>();
  /** The socket as the fan-out writes to it. */
  readonly to: FanoutSocket;
  readonly socketId = `${randomInt(1, 2 ** 47)}.${randomInt(1, 2 ** 47)}`;
  private app!: PusherApp;
  private lastActivity = Date.now();
  private pongDeadline: NodeJS.Timeout | undefined;
  private activity: NodeJS.Timeout | undefined;

  constructor(
    private readonly shared: PusherServices,
    private readonly socket: WebSocket,
    readonly connection: Connection,
  ) {
    this.to = { socket, connection, slowReason: 'Slow consumer: reconnect', subscriptions: new Set() };
  }

  /** The connection is set up for `app`: liveness starts (a client silent for the activity timeout is pinged and must answer in PONG_WAIT_MS). */
  begin(app: PusherApp) {
    this.app = app;
    this.activity = setInterval(() => {
      if (Date.now() - this.lastActivity < ACTIVITY_TIMEOUT_SECONDS * 1000 || this.pongDeadline) return;
      this.sendEvent('pusher:ping', {});
      this.pongDeadline = setTimeout(
        () => this.socket.close(PusherCloseCode.PongNotReceived, 'Pong reply not received'),
        PONG_WAIT_MS,
      );
    }, ACTIVITY_TIMEOUT_SECONDS * 1000);
    this.activity.unref();
  }

  /** The socket closed: its subscriptions end, its timers stop, the core lets it go. */
  closed() {
    for (const sub of [...this.to.subscriptions]) this.shared.fanout.end(sub);
    this.subscriptions.clear();
    void this.connection.closed();
    clearInterval(this.activity);
    clearTimeout(this.pongDeadline);
  }

  /** A message from the client: any message counts as activity; its event picks the handler. */
  receive(raw: string) {
    this.lastActivity = Date.now();
    clearTimeout(this.pongDeadline);
    this.pongDeadline = undefined;
    let message: PusherMessage;
    try {
      message = JSON.parse(raw) as PusherMessage;
    } catch {
      return this.sendEvent('pusher:error', { code: null, message: 'Invalid JSON' });
    }
    const data = (typeof message.data === 'string' ? safeParse(message.data) : message.data) as PusherData;
    const handler = typeof message.event === 'string' ? HANDLERS.get(message.event) : undefined;
    if (handler) return handler(this, data);
    if (typeof message.event === 'string' && message.event.startsWith('client-')) {
      // Client events (peer-to-peer typing, …) are not relayed: everything on a channel
      // comes from the gateway (the typing indicator is a chat API call).
      return this.sendEvent('pusher:error', { code: null, message: 'Client events are not enabled on this gateway' });
    }
    return this.sendEvent('pusher:error', { code: null, message: 'Unknown event' });
  }

  sendEvent(event: string, data: unknown, channel?: string) {
    if (this.socket.readyState !== this.socket.OPEN) return;
    this.socket.send(
      JSON.stringify({ event, ...(channel === undefined ? {} : { channel }), data: JSON.stringify(data) }),
    );
  }

  private subscriptionError(channel: string, error: DomainError) {
    this.sendEvent(
      'pusher:subscription_error',
      { type: 'AuthError', error: error.message, status: statusOf(error) },
      channel,
    );
  }

  /**
   * A `pusher:subscribe`, handled after any earlier request for the same channel has settled.
   * pusher-js can send two: after a reconnect it authorizes the channel for the new socket, and
   * the answer of an authorization started on the socket before can still arrive and be sent
   * too, signed for the old socket id. Answered one at a time, the stale one is refused and the
   * valid one is subscribed, in whatever order they came; answering the second
   * `subscription_succeeded` while the first was still authorizing confirmed a subscription that
   * the first's refusal then removed, and the channel's events stopped arriving.
   */
  subscribe(channel: string, auth: unknown): Promise<void> {
    const earlier = this.requests.get(channel);
    const request = (earlier ?? Promise.resolve()).then(() => this.subscribeNow(channel, auth));
    const settled = request.catch(() => {});
    this.requests.set(channel, settled);
    void settled.then(() => {
      if (this.requests.get(channel) === settled) this.requests.delete(channel);
    });
    return request;
  }

  private async subscribeNow(channel: string, auth: unknown) {
    const { subscriptions, socket } = this;
    const { fanout } = this.shared;
    if (socket.readyState !== socket.OPEN) return;
    if (subscriptions.get(channel)) return this.sendEvent('pusher_internal:subscription_succeeded', {}, channel);
    let release: () => void;
    try {
      if (channel.length > 200 + PRIVATE_PREFIX.length)
        throw new DomainError('BAD_USER_INPUT', 'Channel name too long');
      if (channel.startsWith('presence-')) throw new DomainError('FORBIDDEN', 'Presence channels are not offered');
      release = this.connection.admitSubscription();
    } catch (error) {
      if (error instanceof DomainError) return this.subscriptionError(channel, error);
      throw error;
    }
    subscriptions.set(channel, undefined);
    try {
      const viewer = await this.viewerFor(channel, auth);
      if (!subscriptions.has(channel) || socket.readyState !== socket.OPEN) return release(); // unsubscribed meanwhile
      const name = channel.startsWith(PRIVATE_PREFIX) ? channel.slice(PRIVATE_PREFIX.length) : channel;
      const key = `pusher:${channel}`;
      const sub = fanout.subscribe({
        channel: name,
        viewer,
        to: this.to,
        format: fanout.format(key, () => pusherFormat(key, channel)),
        before: '',
        after: '',
        owner: {
          ended: (error) => {
            release();
            if (subscriptions.get(channel) === sub) subscriptions.delete(channel);
            if (error !== undefined && socket.readyState === socket.OPEN) this.refuse(channel, error);
          },
        },
      });
      if (!sub.ended) subscriptions.set(channel, sub);
    } catch (error) {
      release();
      subscriptions.delete(channel);
      this.refuse(channel, error);
    }
  }

  unsubscribe(channel: string) {
    const sub = this.subscriptions.get(channel);
    this.subscriptions.delete(channel);
    if (sub) this.shared.fanout.end(sub);
  }

  /** A subscription that could not be served: refused with its status (an unexpected error logged, masked). */
  private refuse(channel: string, error: unknown) {
    const domain = classifyError(error);
    if (domain.code === 'INTERNAL')
      this.shared.deps.log.warn({ err: (error as Error).message }, 'pusher subscription failed');
    this.subscriptionError(channel, domain);
  }

  /** The identity a subscription runs under: the connection's, bound on first use of a signature. */
  private async viewerFor(channel: string, auth: unknown): Promise<ChannelViewer> {
    const { connection, app } = this;
    const { deps } = this.shared;
    if (channel.startsWith(PRIVATE_PREFIX)) {
      const grant = await verifyPrivateSubscription(deps, app, this.socketId, channel, auth);
      const current = connection.identity as ChannelGrant | undefined;
      if (!current) {
        try {
          await connection.authenticate(
            grant.kind === 'agent'
              ? { kind: 'agent', sessionId: grant.sessionId }
              : { kind: 'visitor', tokenHash: grant.tokenHash },
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
      ? await visitorOfRequestedChannel(deps, app.id, channel, connection.address)
      : undefined;
    if (!visitor) throw new DomainError('FORBIDDEN', `Not allowed to subscribe to channel ${JSON.stringify(channel)}`);
    connection.holdCapability(visitor);
    connection.followCapability(
      async () => Boolean(await visitorOfChannelCapability(deps, app.id, channel)),
      'Visitor channel no longer valid: get a new visitor token',
    );
    return visitor;
  }
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
