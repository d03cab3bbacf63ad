import type { IncomingMessage } from 'node:http';
import {
  type ExecutionArgs,
  GraphQLError,
  NoSchemaIntrospectionCustomRule,
  specifiedRules,
  type ValidationRule,
} from 'graphql';
import type { Context } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { type WebSocket, WebSocketServer } from 'ws';
import type { Deps } from '../deps.js';
import { DomainError, graphqlCodeOf } from '../errors.js';
import { clientIp, TWO_IDENTITIES, wsAddressFor } from '../http/request.js';
import type { SessionLayer } from '../http/session.js';
import { requireAgent, requireVisitor } from '../resolvers/viewer.js';
import type { GraphQLContext } from '../schema/builder.js';
import type { GraphQLServer } from '../schema/yoga.js';
import { SlowConsumerError } from '../stores/bus.js';
import { wsCloseCodeOf } from './close-codes.js';
import { type Connection, type ConnectionCore, ConnectionRefused, type SocketIdentity } from './connection.js';
import { MAX_BUFFERED_BYTES, MAX_WS_PAYLOAD_BYTES } from './limits.js';
import { verifyOrigin } from './origin.js';

export { SESSION_REVALIDATE_MS, SUBSCRIBE_RATE } from './connection.js';
export { MAX_SUBSCRIPTIONS_PER_SOCKET, MAX_WS_PAYLOAD_BYTES } from './limits.js';
export { originAllowed } from './origin.js';

/** A socket must send `connection_init` within this time. */
export const CONNECTION_INIT_WAIT_MS = 5000;
/** Ping interval; a socket that does not answer a ping within it is terminated. */
const KEEPALIVE_MS = 12_000;
/** On shutdown, a socket that does not finish the close handshake in this time is cut. */
const SHUTDOWN_CLOSE_MS = 3000;

type Extra = { socket: WebSocket; request: IncomingMessage };
type SocketContext = Context<Record<string, unknown>, Extra>;

/** What this adapter keeps per socket: the core's connection, and the releases of its operations. */
interface SocketRecord {
  connection: Connection;
  ctx?: SocketContext;
  releases: Map<string, () => void>;
  /** Resolved once graphql-ws has finished with the socket (its onClose ran), for graceful shutdown. */
  finished: Promise<void>;
  finish(): void;
}

/**
 * graphql-ws on `ws` at `/graphql`: wiring between graphql-ws's hooks and the connection core
 * (connection.ts), sharing the yoga schema, plugins and error masking through `getEnveloped`.
 * The identity is fixed at `connection_init` (appkey + agent `token` or visitor `authorization`,
 * or the Session cookie of the upgrade request); the core's ends map to close codes in
 * close-codes.ts. An upgrade from a foreign browser Origin is refused with 403.
 *
 * Fan-out cost: a `channel` event is executed once per (document, variables) on the instance
 * (schema/shared-results.ts) and the Session-end watches of an agent's sockets share one bus
 * subscription (the real-time service); what remains per subscriber is its iterator chain and
 * graphql-ws serializing its `next` message (BENCHMARKS.md).
 */
export function createSubscriptionServer(
  deps: Deps,
  yoga: GraphQLServer,
  sessions: Pick<SessionLayer, 'sessionIdOf'>,
  core: ConnectionCore,
) {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_WS_PAYLOAD_BYTES,
    perMessageDeflate: false,
    verifyClient: verifyOrigin(deps.config),
  });
  const records = new Map<WebSocket, SocketRecord>();
  // Introspection is off in production on every transport (the HTTP plugin marks HTTP requests only).
  const rules: readonly ValidationRule[] | undefined =
    deps.config.env === 'production' ? [...specifiedRules, NoSchemaIntrospectionCustomRule] : undefined;

  // Registered before useServer: a socket over a cap is closed before graphql-ws reads from it.
  wss.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    let finish = () => {};
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    try {
      const connection = core.open(
        {
          end: (why, reason) => socket.close(wsCloseCodeOf[why], reason),
          activeSubscriptions: () => Object.keys(records.get(socket)?.ctx?.subscriptions ?? {}).length,
        },
        request,
      );
      records.set(socket, { connection, releases: new Map(), finished, finish });
    } catch (error) {
      if (!(error instanceof ConnectionRefused)) throw error;
      socket.close(wsCloseCodeOf[error.end], error.message);
    }
  });

  const socketContext = (request: IncomingMessage, connection: Connection): GraphQLContext => {
    const identity = connection.identity as SocketIdentity;
    return {
      deps,
      agent: async () => requireAgent(deps, await connection.sessionPort()),
      visitor: () => requireVisitor(deps, identity.kind === 'visitor' ? identity.bearer : undefined),
      identity: identity.kind,
      wsAddress: wsAddressFor(request, deps.config),
      clientIp: clientIp(request, deps.config),
    };
  };

  const refusal = (error: unknown): readonly GraphQLError[] => {
    if (!(error instanceof DomainError)) throw error;
    return [new GraphQLError(error.message, { extensions: { code: graphqlCodeOf(error.code) } })];
  };

  const disposable = useServer<Record<string, unknown>, Extra>(
    {
      connectionInitWaitTimeout: CONNECTION_INIT_WAIT_MS,
      onConnect: async (ctx) => {
        const { request, socket } = ctx.extra;
        const record = records.get(socket);
        if (!record) return false;
        record.ctx = ctx;
        const presented = presentedIdentity(ctx.connectionParams ?? {}, request, sessions);
        if ('mistake' in presented) {
          record.connection.end('forbidden', presented.mistake);
          return false;
        }
        try {
          await record.connection.authenticate(presented.identity, presented.appkey);
        } catch (error) {
          if (!(error instanceof ConnectionRefused)) throw error;
          record.connection.end(error.end, error.message);
          return false;
        }
        return socket.readyState === socket.OPEN; // false: it left while we were checking
      },
      onClose: async (ctx) => {
        const record = records.get(ctx.extra.socket);
        records.delete(ctx.extra.socket);
        if (!record) return;
        await record.connection.closed();
        record.finish();
      },
      onSubscribe: async (ctx, id, payload) => {
        const record = records.get(ctx.extra.socket);
        if (!record?.connection.viewer) return refusal(new DomainError('UNAUTHENTICATED', 'Not connected'));
        let release: () => void;
        try {
          release = record.connection.admitSubscription();
        } catch (error) {
          return refusal(error);
        }
        record.releases.set(id, release);
        const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
          req: ctx.extra.request,
          socketContext: socketContext(ctx.extra.request, record.connection),
          params: payload,
        });
        // parse() and validate() judge only the client's document (syntax, depth, alias, token and
        // cost limits): whatever they throw is the client's error, answered on this operation.
        try {
          const document = parse(payload.query);
          const errors = validate(schema, document, rules);
          if (errors.length > 0) {
            release();
            return errors;
          }
          return {
            schema,
            operationName: payload.operationName,
            document,
            variableValues: payload.variables,
            contextValue: await contextFactory(),
            rootValue: { execute, subscribe },
          } as ExecutionArgs;
        } catch (error) {
          release();
          if ((error as Error).name !== 'GraphQLError') throw error;
          return [new GraphQLError((error as Error).message, { extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } })];
        }
      },
      execute: (args) => (args.rootValue as { execute: (a: ExecutionArgs) => never }).execute(args),
      subscribe: (args) => (args.rootValue as { subscribe: (a: ExecutionArgs) => never }).subscribe(args),
      onOperation: (ctx, id, _payload, _args, result) => {
        const record = records.get(ctx.extra.socket);
        const release = record?.releases.get(id) ?? (() => {});
        record?.releases.delete(id);
        if (!isAsyncIterable(result)) {
          release(); // a single result (e.g. FORBIDDEN): the operation is over
          return;
        }
        return followOperation(result, {
          release,
          onSlowConsumer: () => {
            deps.metrics.eventDropped('slow_consumer');
            record?.connection.end('slow_consumer', 'Slow consumer: reconnect and resume with since');
          },
        });
      },
      onNext: (ctx) => {
        if (ctx.extra.socket.bufferedAmount > MAX_BUFFERED_BYTES) {
          deps.metrics.eventDropped('slow_consumer');
          records
            .get(ctx.extra.socket)
            ?.connection.end('slow_consumer', 'Slow consumer: reconnect and resume with since');
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
    /** Closes every socket (going away) and waits for them, for graceful shutdown. */
    async close() {
      await Promise.all(
        [...wss.clients].map((socket) => {
          const cut = setTimeout(() => socket.terminate(), SHUTDOWN_CLOSE_MS);
          const record = records.get(socket);
          if (record) record.connection.end('going_away', 'Server shutting down');
          else socket.close(wsCloseCodeOf.going_away, 'Server shutting down');
          return (record?.finished ?? Promise.resolve()).finally(() => clearTimeout(cut));
        }),
      );
      await disposable.dispose();
    },
  };
}

const isAsyncIterable = (value: unknown): value is AsyncIterableIterator<unknown> =>
  typeof value === 'object' && value !== null && Symbol.asyncIterator in value;

/** Whether a subscription's stream gave up on a slow consumer (recognised by type, through GraphQL's wrapping). */
function isSlowConsumer(error: unknown): boolean {
  let e = error;
  for (let depth = 0; depth < 5 && e instanceof Error; depth++) {
    if (e instanceof SlowConsumerError) return true;
    e = (e as GraphQLError).originalError;
  }
  return false;
}

/**
 * Passes a subscription's results through and releases its slot in the caps when it ends.
 * When its source gives up on a slow consumer (SlowConsumerError while streaming), the
 * connection is ended instead of sending an error, so the client reconnects and resumes.
 */
function followOperation<T>(
  source: AsyncIterableIterator<T>,
  hooks: { release: () => void; onSlowConsumer: () => void },
): AsyncIterableIterator<T> {
  const iterator: AsyncIterableIterator<T> = {
    async next() {
      try {
        const step = await source.next();
        if (step.done) hooks.release();
        return step;
      } catch (error) {
        hooks.release();
        if (!isSlowConsumer(error)) throw error;
        hooks.onSlowConsumer();
        return { done: true, value: undefined };
      }
    },
    return: () => {
      hooks.release();
      return source.return?.() ?? Promise.resolve({ done: true, value: undefined });
    },
    [Symbol.asyncIterator]: () => iterator,
  };
  return iterator;
}

const SESSION_ID = /^[A-Za-z0-9_-]{16,128}$/;

/** A `connection_init` member by name, in any capitalisation (`Authorization`, as HTTP headers are usually written). */
function param(params: Record<string, unknown>, name: string): unknown {
  if (name in params) return params[name];
  const key = Object.keys(params).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : params[key];
}

/**
 * Which identity a socket presents: a visitor Bearer token, else an agent Session (the `token`,
 * else the Session cookie of the upgrade). A mistake is named in the close reason, without
 * saying whether an identity exists.
 */
function presentedIdentity(
  params: Record<string, unknown>,
  request: IncomingMessage,
  sessions: Pick<SessionLayer, 'sessionIdOf'>,
): { identity: SocketIdentity; appkey: string } | { mistake: string } {
  const appkey = param(params, 'appkey');
  if (typeof appkey !== 'string' || appkey === '') {
    return { mistake: "appkey missing: send the merchant's appkey in connection_init" };
  }
  const authorization = param(params, 'authorization');
  const token = param(params, 'token');
  if (authorization !== undefined && token !== undefined && token !== '') return { mistake: TWO_IDENTITIES };
  if (authorization !== undefined) {
    const bearer = typeof authorization === 'string' && /^Bearer\s+(\S{1,512})$/i.exec(authorization)?.[1];
    return bearer
      ? { identity: { kind: 'visitor', bearer }, appkey }
      : { mistake: 'authorization must be "Bearer <visitor token>"' };
  }
  if (token !== undefined && token !== '') {
    return typeof token === 'string' && SESSION_ID.test(token)
      ? { identity: { kind: 'agent', sessionId: token }, appkey }
      : { mistake: 'token must be an agent Session ID (a visitor token goes in authorization as Bearer)' };
  }
  let sessionId: string | undefined;
  try {
    sessionId = sessions.sessionIdOf(request);
  } catch {
    return { mistake: 'token given more than once on the upgrade request' };
  }
  return sessionId
    ? { identity: { kind: 'agent', sessionId }, appkey }
    : { mistake: 'No identity: send token (agent) or authorization (Bearer visitor token), or log in' };
}
