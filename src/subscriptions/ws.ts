import type { IncomingMessage } from 'node:http';
import { eq } from 'drizzle-orm';
import { type ExecutionArgs, GraphQLError } from 'graphql';
import type { Context } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { type WebSocket, WebSocketServer } from 'ws';
import type { Config } from '../config.js';
import { merchants } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { DomainError, graphqlCodeOf } from '../errors.js';
import { clientIp, wsAddressFor } from '../http/request.js';
import type { SessionLayer } from '../http/session.js';
import { revalidateAgentSession, watchSessionEnd } from '../resolvers/channels.js';
import { createPresenceTracker } from '../resolvers/presence.js';
import { type AgentViewer, requireAgent, requireVisitor } from '../resolvers/viewer.js';
import type { GraphQLContext } from '../schema/builder.js';
import type { GraphQLServer } from '../schema/yoga.js';
import { WsCloseCode } from './close-codes.js';

/** Largest message a client may send; subscriptions are small. */
export const MAX_WS_PAYLOAD_BYTES = 16 * 1024;
/** A socket must send `connection_init` within this time. */
export const CONNECTION_INIT_WAIT_MS = 5000;
/** Operations one socket may run at once (an agent needs two channels, a visitor one). */
export const MAX_SUBSCRIPTIONS_PER_SOCKET = 20;
/** Bytes `ws` may hold for a socket that does not read; beyond, the socket is closed as a slow consumer. */
export const MAX_BUFFERED_BYTES = 1024 * 1024;
/** `subscribe` messages one socket may send per window; beyond, it is closed with 4429. */
export const SUBSCRIBE_RATE = { max: 30, windowMs: 10_000 };
/** How often a socket's identity is re-checked (an agent Session's idle expiry is silent in the store; a visitor token may be revoked). */
export const SESSION_REVALIDATE_MS = 30_000;
/** Ping interval; a socket that does not answer a ping within it is terminated. */
const KEEPALIVE_MS = 12_000;
/** After its Session ends, a socket gets this long to deliver the final events before it is closed. */
const SESSION_END_FLUSH_MS = 2000;
/** On shutdown, a socket that does not finish the close handshake in this time is cut. */
const SHUTDOWN_CLOSE_MS = 3000;

interface ConnectionParams {
  appkey?: unknown;
  token?: unknown;
  authorization?: unknown;
}

/** What onConnect established for a socket, kept for every operation on it. */
interface SocketIdentity {
  identity: 'agent' | 'visitor';
  sessionId?: string;
  bearer?: string;
}

/** Per-socket bookkeeping: identity, the presence connection, and what to stop when it closes. */
interface SocketState {
  id: SocketIdentity;
  presence?: string;
  stop: AbortController;
  revalidate?: NodeJS.Timeout;
  ending?: boolean;
  /** The current subscribe-rate window: when it began and how many `subscribe` messages it saw. */
  window: { start: number; count: number };
}

type Extra = { socket: WebSocket; request: IncomingMessage };
type SocketContext = Context<Record<string, unknown>, Extra>;

/**
 * graphql-ws on `ws`, sharing the yoga schema, plugins and error masking through
 * `getEnveloped`. The identity is fixed at `connection_init` (appkey + agent `token` or visitor
 * `authorization`, or the Session cookie of the upgrade request); a bad one closes with 4403.
 * Agent sockets feed presence and close with 4401 when their Session ends; slow consumers are
 * closed with 1013; shutdown closes with 1001 (see close-codes.ts). An upgrade from a foreign
 * browser Origin is refused with 403 (originAllowed); a socket sending more than SUBSCRIBE_RATE
 * `subscribe` messages is closed with 4429.
 *
 * Fan-out cost: a `channel` event is executed once per (document, variables) on the instance
 * (schema/shared-results.ts) and the Session-end watches of an agent's sockets share one bus
 * subscription (watchSessionEnd); what remains per subscriber is its iterator chain and
 * graphql-ws serializing its `next` message (BENCHMARKS.md).
 */
export function createSubscriptionServer(deps: Deps, yoga: GraphQLServer, sessions: SessionLayer) {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_WS_PAYLOAD_BYTES,
    perMessageDeflate: false,
    // Cross-site WebSocket hijacking: a page on another site must not open a socket that carries
    // the agent's Session cookie. Refused with 403 before the socket opens.
    verifyClient: (
      info: { origin?: string; secure: boolean; req: IncomingMessage },
      done: (ok: boolean, code?: number, message?: string) => void,
    ) => {
      const allowed = originAllowed(info.origin, {
        host: info.req.headers.host,
        secure: requestIsSecure(info.req, deps.config),
        allowedOrigins: deps.config.allowedOrigins,
        publicWsAddress: deps.config.publicWsAddress,
      });
      if (allowed) done(true);
      else done(false, 403, 'Origin not allowed');
    },
  });
  const states = new WeakMap<object, SocketState>();
  const presence = createPresenceTracker(deps);
  // Resolved once graphql-ws has finished with a socket (its onClose ran), for graceful shutdown.
  const finished = new Map<WebSocket, { done: Promise<void>; resolve: () => void }>();
  wss.on('connection', (socket: WebSocket) => {
    let resolve = () => {};
    const done = new Promise<void>((r) => {
      resolve = r;
    });
    finished.set(socket, { done, resolve });
  });

  const socketContext = (request: IncomingMessage, id: SocketIdentity): GraphQLContext => {
    const sessionPort = () => (id.sessionId ? sessions.storedPort(id.sessionId) : Promise.resolve(undefined));
    return {
      deps,
      agent: async () => requireAgent(deps, await sessionPort()),
      visitor: () => requireVisitor(deps, id.bearer),
      identity: id.identity,
      wsAddress: wsAddressFor(request, deps.config),
      clientIp: clientIp(request, deps.config),
    };
  };

  /** Lets the final `session.ended` events go out, then closes with 4401. */
  const endSocket = async (ctx: SocketContext, state: SocketState) => {
    if (state.ending) return;
    state.ending = true;
    const deadline = Date.now() + SESSION_END_FLUSH_MS;
    while (Object.keys(ctx.subscriptions).length > 0 && Date.now() < deadline && !state.stop.signal.aborted) {
      await new Promise((r) => setTimeout(r, 25));
    }
    ctx.extra.socket.close(WsCloseCode.SessionEnded, 'Session ended: log in again');
  };

  /** Presence, the Session-end watch and periodic revalidation of an accepted agent socket. */
  const followAgent = async (ctx: SocketContext, state: SocketState, viewer: AgentViewer) => {
    state.presence = await presence.connected(viewer);
    const { signal } = state.stop;
    if (signal.aborted) {
      // The socket closed while presence was being recorded: onClose could not report it.
      await presence.disconnected(state.presence);
      return;
    }
    void watchSessionEnd(deps, viewer, signal).then((event) => {
      if (event && !signal.aborted) void endSocket(ctx, state);
    });
    const sessionId = state.id.sessionId as string;
    state.revalidate = setInterval(async () => {
      const valid = await revalidateAgentSession(deps, await sessions.storedPort(sessionId).catch(() => undefined), {
        agentId: viewer.agentId,
        sessionId,
      });
      if (!valid && !signal.aborted) void endSocket(ctx, state);
    }, SESSION_REVALIDATE_MS);
    state.revalidate.unref();
  };

  /** A visitor socket closes (4403) once its token is revoked or expired, checked as often as Sessions. */
  const followVisitor = (ctx: SocketContext, state: SocketState, context: GraphQLContext) => {
    state.revalidate = setInterval(() => {
      context.visitor().catch((error: unknown) => {
        if (error instanceof DomainError && !state.stop.signal.aborted) {
          ctx.extra.socket.close(WsCloseCode.Forbidden, 'Visitor token no longer valid');
        }
      });
    }, SESSION_REVALIDATE_MS);
    state.revalidate.unref();
  };

  const disposable = useServer<Record<string, unknown>, Extra>(
    {
      connectionInitWaitTimeout: CONNECTION_INIT_WAIT_MS,
      onConnect: async (ctx) => {
        const params = (ctx.connectionParams ?? {}) as ConnectionParams;
        const { request, socket } = ctx.extra;
        try {
          const id = identify(params, request, sessions);
          if (!id) return false;
          const context = socketContext(request, id);
          const viewer = id.identity === 'visitor' ? await context.visitor() : await context.agent();
          const [merchant] = await deps.db
            .select({ appkey: merchants.appkey })
            .from(merchants)
            .where(eq(merchants.id, viewer.merchantId))
            .limit(1);
          if (typeof params.appkey !== 'string' || merchant?.appkey !== params.appkey) return false;
          if (socket.readyState !== socket.OPEN) return false; // left while we were checking
          const state: SocketState = { id, stop: new AbortController(), window: { start: Date.now(), count: 0 } };
          states.set(ctx, state);
          if (viewer.kind === 'agent') await followAgent(ctx, state, viewer);
          else followVisitor(ctx, state, context);
          return true;
        } catch {
          return false; // graphql-ws closes with 4403 Forbidden
        }
      },
      onClose: async (ctx) => {
        const state = states.get(ctx);
        states.delete(ctx);
        if (state) {
          state.stop.abort();
          clearInterval(state.revalidate);
          await presence.disconnected(state.presence);
        }
        finished.get(ctx.extra.socket)?.resolve();
        finished.delete(ctx.extra.socket);
      },
      onSubscribe: async (ctx, _id, payload) => {
        const state = states.get(ctx);
        if (!state || state.ending) {
          return [
            new GraphQLError('The Session of this socket ended: log in again', {
              extensions: { code: 'UNAUTHENTICATED' },
            }),
          ];
        }
        if (!withinSubscribeRate(state.window, Date.now())) {
          ctx.extra.socket.close(WsCloseCode.TooManySubscribes, 'Too many subscribe requests');
          return [new GraphQLError('Too many subscribe requests', { extensions: { code: 'RATE_LIMITED' } })];
        }
        if (Object.keys(ctx.subscriptions).length > MAX_SUBSCRIPTIONS_PER_SOCKET) {
          return [
            new GraphQLError(`At most ${MAX_SUBSCRIPTIONS_PER_SOCKET} operations at once on one socket`, {
              extensions: { code: 'RATE_LIMITED' },
            }),
          ];
        }
        const contextValue = socketContext(ctx.extra.request, state.id);
        const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
          req: ctx.extra.request,
          socketContext: contextValue,
          params: payload,
        });
        // parse() and validate() judge only the client's document (syntax, depth, alias, token and
        // cost limits): whatever they throw is the client's error, answered on this operation.
        try {
          const document = parse(payload.query);
          const errors = validate(schema, document);
          if (errors.length > 0) return errors;
          return {
            schema,
            operationName: payload.operationName,
            document,
            variableValues: payload.variables,
            contextValue: await contextFactory(),
            rootValue: { execute, subscribe },
          } as ExecutionArgs;
        } catch (error) {
          if ((error as Error).name !== 'GraphQLError') throw error;
          return [new GraphQLError((error as Error).message, { extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } })];
        }
      },
      execute: (args) => (args.rootValue as { execute: (a: ExecutionArgs) => never }).execute(args),
      subscribe: (args) => (args.rootValue as { subscribe: (a: ExecutionArgs) => never }).subscribe(args),
      onOperation: (ctx, _id, _payload, _args, result) => {
        if (!isAsyncIterable(result)) return;
        return closeSlowConsumer(result, ctx.extra.socket, () => deps.metrics.eventDropped('slow_consumer'));
      },
      onNext: (ctx) => {
        const { socket } = ctx.extra;
        if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
          deps.metrics.eventDropped('slow_consumer');
          socket.close(WsCloseCode.SlowConsumer, 'Slow consumer: reconnect and resume with since');
        }
      },
    },
    wss,
    KEEPALIVE_MS,
  );
  // A bad frame from a client (over maxPayload: 1009, invalid UTF-8: 1007 …) is the client's
  // fault and `ws` has already closed the socket with its code; graphql-ws would print each one
  // with a stack to stderr (console.error), an unstructured line any client could repeat at will.
  // Registered after useServer, so graphql-ws's listener exists and is replaced (a socket must
  // keep an 'error' listener, or the error would crash the process).
  wss.on('connection', (socket: WebSocket) => {
    socket.removeAllListeners('error');
    socket.on('error', (error: Error & { code?: string }) => {
      deps.log.debug({ code: error.code, reason: error.message }, 'websocket client error');
    });
  });

  return {
    wss,
    /** Closes every socket with 1001 (going away) and waits for them, for graceful shutdown. */
    async close() {
      await Promise.all(
        [...wss.clients].map((socket) => {
          const cut = setTimeout(() => socket.terminate(), SHUTDOWN_CLOSE_MS);
          socket.close(WsCloseCode.GoingAway, 'Server shutting down');
          return (finished.get(socket)?.done ?? Promise.resolve()).finally(() => clearTimeout(cut));
        }),
      );
      await disposable.dispose();
      await presence.close();
    },
  };
}

/** The code a subscription ends with when its consumer fell too far behind (bus SlowConsumerError). */
const SLOW_CONSUMER = graphqlCodeOf('RATE_LIMITED');

const isAsyncIterable = (value: unknown): value is AsyncIterableIterator<unknown> =>
  typeof value === 'object' && value !== null && Symbol.asyncIterator in value;

/**
 * Passes a subscription's results through; when its source gives up on a slow consumer (its
 * queue of undelivered events overflowed: a RATE_LIMITED error while streaming), closes the
 * socket with 1013 instead of sending an error, so the client reconnects and resumes with `since`.
 */
function closeSlowConsumer<T>(
  source: AsyncIterableIterator<T>,
  socket: WebSocket,
  onDrop: () => void,
): AsyncIterableIterator<T> {
  const iterator: AsyncIterableIterator<T> = {
    async next() {
      try {
        return await source.next();
      } catch (error) {
        if ((error as GraphQLError).extensions?.code !== SLOW_CONSUMER) throw error;
        onDrop();
        socket.close(WsCloseCode.SlowConsumer, 'Slow consumer: reconnect and resume with since');
        return { done: true, value: undefined };
      }
    },
    return: () => source.return?.() ?? Promise.resolve({ done: true, value: undefined }),
    [Symbol.asyncIterator]: () => iterator,
  };
  return iterator;
}

/** Counts one `subscribe` in a fixed window of SUBSCRIBE_RATE; false once the window's allowance is spent. */
export function withinSubscribeRate(window: { start: number; count: number }, now: number): boolean {
  if (now - window.start >= SUBSCRIBE_RATE.windowMs) {
    window.start = now;
    window.count = 0;
  }
  window.count++;
  return window.count <= SUBSCRIBE_RATE.max;
}

/** Whether this upgrade arrived over TLS: the socket itself, or a trusted proxy's X-Forwarded-Proto. */
function requestIsSecure(req: IncomingMessage, config: Pick<Config, 'trustProxy'>): boolean | undefined {
  if ((req.socket as { encrypted?: boolean }).encrypted) return true;
  if (!config.trustProxy) return undefined; // a TLS-terminating proxy may be in front: unknown
  const proto = req.headers['x-forwarded-proto'];
  const first = (Array.isArray(proto) ? proto[0] : proto)?.split(',')[0]?.trim().toLowerCase();
  return first === undefined ? false : first === 'https';
}

const originOf = (value: string): string | undefined => {
  try {
    const origin = new URL(value).origin;
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
};

/**
 * The WebSocket Origin rule. No Origin header (a non-browser client): allowed. Otherwise the
 * Origin must be the gateway's own origin — the Host of the upgrade request with http (ws) or
 * https (wss); when whether the request came over TLS is unknown (a plain connection, maybe
 * behind a TLS-terminating proxy without TRUST_PROXY) either scheme — or the origin of
 * PUBLIC_WS_ADDRESS, or one of ALLOWED_ORIGINS. Anything else, including `null` and a
 * malformed Origin, is refused.
 */
export function originAllowed(
  origin: string | undefined,
  gateway: { host?: string; secure?: boolean; allowedOrigins: readonly string[]; publicWsAddress?: string },
): boolean {
  if (origin === undefined) return true;
  const asked = originOf(origin);
  if (!asked) return false;
  const own: string[] = [];
  if (gateway.host) {
    const schemes = gateway.secure === undefined ? ['http', 'https'] : [gateway.secure ? 'https' : 'http'];
    for (const scheme of schemes) {
      const o = originOf(`${scheme}://${gateway.host}`);
      if (o) own.push(o);
    }
  }
  if (gateway.publicWsAddress) {
    const o = originOf(gateway.publicWsAddress.replace(/^ws/i, 'http'));
    if (o) own.push(o);
  }
  for (const entry of gateway.allowedOrigins) {
    const o = originOf(entry);
    if (o) own.push(o);
  }
  return own.includes(asked);
}

const SESSION_ID = /^[A-Za-z0-9_-]{16,128}$/;

/** Which identity a socket presents: a visitor Bearer token, else an agent Session. */
function identify(
  params: ConnectionParams,
  request: IncomingMessage,
  sessions: SessionLayer,
): SocketIdentity | undefined {
  if (typeof params.authorization === 'string') {
    const bearer = /^Bearer\s+(\S{1,512})$/i.exec(params.authorization)?.[1];
    return bearer ? { identity: 'visitor', bearer } : undefined;
  }
  if (params.token !== undefined && params.token !== '') {
    return typeof params.token === 'string' && SESSION_ID.test(params.token)
      ? { identity: 'agent', sessionId: params.token }
      : undefined;
  }
  const sessionId = sessions.sessionIdOf(request);
  return sessionId ? { identity: 'agent', sessionId } : undefined;
}
