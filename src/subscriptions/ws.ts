import type { IncomingMessage } from 'node:http';
import {
  createSourceEventStream,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  executeSync,
  GraphQLError,
  getOperationAST,
  NoSchemaIntrospectionCustomRule,
  specifiedRules,
  type ValidationRule,
} from 'graphql';
import { CloseCode, type Context, handleProtocols, makeServer } from 'graphql-ws';
import { type WebSocket, WebSocketServer } from 'ws';
import type { Deps } from '../deps.js';
import { DomainError, graphqlCodeOf } from '../errors.js';
import { TWO_IDENTITIES, wsAddressFor } from '../http/request.js';
import type { SessionLayer } from '../http/session.js';
import { describeOperation } from '../observability/graphql.js';
import { requireAgent, requireVisitor } from '../resolvers/viewer.js';
import type { GraphQLContext } from '../schema/builder.js';
import { type GraphQLServer, toGraphQLError } from '../schema/yoga.js';
import { wsCloseCodeOf } from './close-codes.js';
import { type Connection, type ConnectionCore, ConnectionRefused, type SocketIdentity } from './connection.js';
import type { ChannelSubscription, Fanout, FanoutSocket, FrameFormat, SubscriptionOwner } from './fanout.js';
import { createKeepAlive } from './keepalive.js';
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

/** graphql-ws's `extra`: the socket only — the upgrade request is read once and let go (see SocketRecord). */
type Extra = { socket: WebSocket };
type SocketContext = Context<Record<string, unknown>, Extra>;

/**
 * What this adapter keeps per socket: the core's connection, the releases of its operations, and
 * what it needs of the upgrade request, read at the upgrade (the `IncomingMessage`, its headers
 * and stream state are not kept for the socket's life).
 */
interface SocketRecord {
  connection: Connection;
  /** The socket as the fan-out writes to it. */
  to: FanoutSocket;
  ctx?: SocketContext;
  releases: Map<string, () => void>;
  /** The public address of this endpoint, for the socket's operation context. */
  wsAddress: string;
  /** The agent Session the upgrade request carried (cookie or `token`); false when `token` came more than once. */
  upgradeSession: string | undefined | false;
  /** connection_init must arrive before this fires (cleared once it has). */
  initWait: NodeJS.Timeout | undefined;
  /** graphql-ws's handler of this socket's messages. */
  receive?: (data: string) => Promise<void>;
  /** graphql-ws's end of the socket (its subscriptions, then onClose). */
  closed?: (code: number, reason: string) => Promise<void>;
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
 * Subscriptions (every one is a `channel` subscription: the schema has no other field) are
 * delivered by the instance's fan-out (fanout.ts): the `channel` field's subscribe resolver runs
 * once (arguments, identity, authorization, with the same errors as any resolver), then graphql-ws
 * holds an `OperationHandle` that yields nothing and finishes when the fan-out or the client ends
 * it, while the fan-out writes each `next` frame itself: executed and serialized once per
 * (event, document, variables), the operation id spliced in (BENCHMARKS.md).
 */
export function createSubscriptionServer(
  deps: Deps,
  yoga: GraphQLServer,
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
  const records = new Map<WebSocket, SocketRecord>();
  // Introspection is off in production on every transport (the HTTP plugin marks HTTP requests only).
  const rules: readonly ValidationRule[] | undefined =
    deps.config.env === 'production' ? [...specifiedRules, NoSchemaIntrospectionCustomRule] : undefined;

  /** One keep-alive sweep for every socket (graphql-ws's own runs a timer and closures per socket). */
  const keepAlive = createKeepAlive<WebSocket>(KEEPALIVE_MS);
  /** The last endpoint address computed: sockets through the same host share one string. */
  let lastWsAddress = '';

  // Per-socket listeners are these shared functions (`this` is the socket), not closures per socket.
  function clientError(this: WebSocket, error: Error & { code?: string }) {
    // A bad frame from a client (over maxPayload: 1009, invalid UTF-8: 1007 …) is the client's
    // fault and `ws` has already closed the socket with its code: a debug line, not an error.
    deps.log.debug({ code: error.code, reason: error.message }, 'websocket client error');
  }
  function received(this: WebSocket, data: WebSocket.RawData) {
    const record = records.get(this);
    if (!record?.receive) return;
    record.receive(String(data)).catch((error: unknown) => {
      deps.log.error({ err: (error as Error)?.message ?? String(error) }, 'graphql-ws message handling failed');
      const reason = deps.config.env === 'production' ? 'Internal server error' : String((error as Error)?.message);
      this.close(CloseCode.InternalServerError, Buffer.byteLength(reason) > 123 ? 'Internal server error' : reason);
    });
  }
  function socketClosed(this: WebSocket, code: number, reason: Buffer) {
    keepAlive.delete(this);
    const record = records.get(this);
    if (!record) return;
    clearTimeout(record.initWait);
    record.initWait = undefined;
    record.closed?.(code, String(reason)).catch((error: unknown) => {
      deps.log.error({ err: (error as Error)?.message ?? String(error) }, 'graphql-ws close handling failed');
    });
  }

  wss.options.handleProtocols = handleProtocols;
  wss.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    socket.on('error', clientError); // a socket must keep an 'error' listener, or an error would crash the process
    let finish = () => {};
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let record: SocketRecord;
    try {
      const connection = core.open(
        {
          end: (why, reason) => socket.close(wsCloseCodeOf[why], reason),
          activeSubscriptions: () => Object.keys(records.get(socket)?.ctx?.subscriptions ?? {}).length,
          sessionEnded: (event) => {
            const to = records.get(socket)?.to;
            if (to) fanout.sessionEnded(to, event);
          },
        },
        request,
      );
      const to = { socket, connection, slowReason: SLOW_REASON, subscriptions: new Set<ChannelSubscription>() };
      let upgradeSession: SocketRecord['upgradeSession'];
      try {
        upgradeSession = sessions.sessionIdOf(request);
      } catch {
        upgradeSession = false;
      }
      const wsAddress = wsAddressFor(request, deps.config);
      if (wsAddress !== lastWsAddress) lastWsAddress = wsAddress;
      record = {
        connection,
        to,
        releases: new Map(),
        wsAddress: lastWsAddress,
        upgradeSession,
        initWait: undefined,
        finished,
        finish,
      };
      records.set(socket, record);
    } catch (error) {
      // Over a cap: closed before graphql-ws reads from it.
      if (!(error instanceof ConnectionRefused)) throw error;
      socket.close(wsCloseCodeOf[error.end], error.message);
      return;
    }
    keepAlive.add(socket);
    socket.on('message', received);
    socket.once('close', socketClosed);
    record.initWait = setTimeout(() => {
      record.initWait = undefined;
      if (!record.ctx) socket.close(CloseCode.ConnectionInitialisationTimeout, 'Connection initialisation timeout');
    }, CONNECTION_INIT_WAIT_MS);
    record.closed = server.opened(new GraphqlWsSocket(socket, record), { socket });
  });

  const socketContext = (record: SocketRecord): GraphQLContext => {
    const { connection } = record;
    const identity = connection.identity as SocketIdentity;
    return {
      deps,
      agent: async () => requireAgent(deps, await connection.sessionPort(), connection.address),
      visitor: () => requireVisitor(deps, identity.kind === 'visitor' ? identity.bearer : undefined),
      identity: identity.kind,
      wsAddress: record.wsAddress,
      clientIp: connection.address,
    };
  };

  const refusal = (error: unknown): readonly GraphQLError[] => {
    if (!(error instanceof DomainError)) throw error;
    return [new GraphQLError(error.message, { extensions: { code: graphqlCodeOf(error.code) } })];
  };

  /** Documents numbered once, so a format's key is short and stable: (document, operation, variables). */
  const documentIds = new WeakMap<DocumentNode, number>();
  let documents = 0;
  const formatKey = ({ document, operationName, variableValues }: ExecutionArgs) => {
    let n = documentIds.get(document);
    if (n === undefined) {
      n = ++documents;
      documentIds.set(document, n);
    }
    return `graphql:${n}:${operationName ?? ''}:${JSON.stringify(variableValues ?? {})}`;
  };

  /**
   * A subscription operation: runs the `channel` field's subscribe resolver with a passing
   * context whose `openChannel` hands the subscription to the fan-out. Refusals come back as
   * the resolver's errors, masked as on HTTP.
   */
  async function subscribeOperation(args: ExecutionArgs): Promise<ExecutionResult | OperationHandle> {
    const { record, id } = args.rootValue as ChannelOperation;
    const { field } = describeOperation(args.document, args.operationName);
    deps.metrics.graphqlOperation('subscription', field);
    const contextValue: GraphQLContext = {
      ...socketContext(record),
      openChannel: (viewer, channel, since) => {
        const handle = new OperationHandle(record, id, record.releases.get(id), deps, fanout);
        const key = formatKey(args);
        const format = fanout.format(key, () => graphqlFormat(key, args, deps));
        handle.subscription = fanout.subscribe({
          channel,
          viewer,
          to: record.to,
          format,
          before: `{"id":${JSON.stringify(id)},"type":"next","payload":`,
          after: '}',
          owner: handle,
          since,
        });
        return handle;
      },
    };
    const source = await createSourceEventStream({ ...args, contextValue, rootValue: undefined });
    if (source instanceof OperationHandle) return source;
    const errors = ((source as ExecutionResult).errors ?? []).map((error) => toGraphQLError(error, deps));
    for (const error of errors) deps.metrics.graphqlError('subscription', field, String(error.extensions.code));
    return { errors };
  }

  const server = makeServer<Record<string, unknown>, Extra>({
    // The adapter's own timer (above): graphql-ws's would be kept, fired, for the socket's life.
    connectionInitWaitTimeout: 0,
    onConnect: async (ctx) => {
      const { socket } = ctx.extra;
      const record = records.get(socket);
      if (!record) return false;
      record.ctx = ctx;
      clearTimeout(record.initWait);
      record.initWait = undefined;
      const presented = presentedIdentity(ctx.connectionParams ?? {}, record.upgradeSession);
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
      const { schema, execute, contextFactory, parse, validate } = yoga.getEnveloped({
        socketContext: socketContext(record),
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
        if (getOperationAST(document, payload.operationName)?.operation === 'subscription') {
          // No per-operation context is built or kept: `subscribe` below makes a passing one.
          const root: ChannelOperation = { record, id };
          return {
            schema,
            operationName: payload.operationName,
            document,
            variableValues: payload.variables,
            rootValue: root,
          } as ExecutionArgs;
        }
        return {
          schema,
          operationName: payload.operationName,
          document,
          variableValues: payload.variables,
          contextValue: await contextFactory(),
          rootValue: { execute },
        } as ExecutionArgs;
      } catch (error) {
        release();
        if ((error as Error).name !== 'GraphQLError') throw error;
        return [new GraphQLError((error as Error).message, { extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } })];
      }
    },
    execute: (args) => (args.rootValue as { execute: (a: ExecutionArgs) => never }).execute(args),
    subscribe: (args) => subscribeOperation(args),
    onOperation: (ctx, id, _payload, _args, result) => {
      const record = records.get(ctx.extra.socket);
      const release = record?.releases.get(id);
      record?.releases.delete(id);
      // A single result (a query, or a refused subscription): the operation is over. A
      // subscription's handle releases its slot when it finishes.
      if (!(result instanceof OperationHandle)) release?.();
    },
    onNext: (ctx) => {
      if (ctx.extra.socket.bufferedAmount > MAX_BUFFERED_BYTES) {
        deps.metrics.eventDropped('slow_consumer');
        records.get(ctx.extra.socket)?.connection.end('slow_consumer', SLOW_REASON);
      }
    },
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
      keepAlive.stop();
      for (const socket of wss.clients) socket.close(wsCloseCodeOf.going_away, 'Going away');
      wss.removeAllListeners();
      await new Promise<void>((resolve, reject) => wss.close((error) => (error ? reject(error) : resolve())));
    },
  };
}

const SLOW_REASON = 'Slow consumer: reconnect and resume with since';

/**
 * The socket as graphql-ws's server core sees it: methods on a prototype, not four closures per
 * socket as in graphql-ws's own `ws` adapter (graphql-ws/use/ws, which this file replaces).
 */
class GraphqlWsSocket {
  constructor(
    private readonly socket: WebSocket,
    private readonly record: SocketRecord,
  ) {}

  get protocol() {
    return this.socket.protocol;
  }

  send(data: string): Promise<void> {
    const { socket } = this;
    return new Promise((resolve, reject) => {
      if (socket.readyState !== socket.OPEN) return resolve();
      socket.send(data, (error) => (error ? reject(error) : resolve()));
    });
  }

  close(code: number, reason: string) {
    this.socket.close(code, reason);
  }

  onMessage(receive: (data: string) => Promise<void>) {
    this.record.receive = receive;
  }
}

/** What onSubscribe leaves for `subscribe` in a subscription's root value. */
interface ChannelOperation {
  record: SocketRecord;
  id: string;
}

/** A `channel` selection executed once per event for every operation asking the same. */
function graphqlFormat(key: string, args: ExecutionArgs, deps: Deps): FrameFormat {
  const { schema, document, operationName, variableValues } = args;
  return {
    key,
    payload(event) {
      // ChannelEvent's fields are plain reads of the event: no resolver reads the context.
      const result = executeSync({ schema, document, operationName, variableValues, rootValue: event });
      return JSON.stringify(
        result.errors ? { ...result, errors: result.errors.map((error) => toGraphQLError(error, deps)) } : result,
      );
    },
  };
}

const DONE: IteratorResult<never> = { done: true, value: undefined };

/**
 * What graphql-ws holds for a subscription delivered by the fan-out: an iterator that yields
 * nothing and finishes when the subscription ends — the fan-out ended it (`ended`), or the client
 * completed it or left (`return`). Its end releases the operation's slot in the caps.
 */
class OperationHandle implements AsyncIterableIterator<never>, SubscriptionOwner {
  subscription?: ChannelSubscription;
  private done = false;
  private finish?: (result: IteratorResult<never>) => void;

  constructor(
    private readonly record: SocketRecord,
    private readonly id: string,
    private readonly release: (() => void) | undefined,
    private readonly deps: Deps,
    private readonly fanout: Fanout,
  ) {}

  next(): Promise<IteratorResult<never>> {
    if (this.done) return Promise.resolve(DONE);
    return new Promise((resolve) => {
      this.finish = resolve;
    });
  }

  return(): Promise<IteratorResult<never>> {
    if (this.subscription) this.fanout.end(this.subscription);
    else this.ended();
    return Promise.resolve(DONE);
  }

  throw(): Promise<IteratorResult<never>> {
    return this.return();
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  ended(error?: unknown) {
    if (this.done) return;
    this.done = true;
    this.release?.();
    if (error !== undefined) {
      const { socket } = this.record.to;
      const masked = toGraphQLError(error, this.deps);
      if (socket.readyState === socket.OPEN) {
        socket.send(JSON.stringify({ id: this.id, type: 'next', payload: { errors: [masked] } }));
      }
    }
    this.finish?.(DONE);
  }
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
  upgradeSession: SocketRecord['upgradeSession'],
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
  if (upgradeSession === false) return { mistake: 'token given more than once on the upgrade request' };
  return upgradeSession
    ? { identity: { kind: 'agent', sessionId: upgradeSession }, appkey }
    : { mistake: 'No identity: send token (agent) or authorization (Bearer visitor token), or log in' };
}
