import type { IncomingMessage } from 'node:http';
import {
  createSourceEventStream,
  type ExecutionArgs,
  type ExecutionResult,
  GraphQLError,
  getOperationAST,
  NoSchemaIntrospectionCustomRule,
  specifiedRules,
  type ValidationRule,
} from 'graphql';
import { CloseCode, handleProtocols, makeServer, type ServerOptions } from 'graphql-ws';
import type { WebSocket } from 'ws';
import type { Deps } from '../deps.js';
import { DomainError, graphqlCodeOf } from '../errors.js';
import { wsAddressFor } from '../http/request.js';
import type { SessionLayer } from '../http/session.js';
import { describeOperation } from '../observability/graphql.js';
import type { GraphQLContext } from '../schema/builder.js';
import { type GraphQLServer, toGraphQLError } from '../schema/yoga.js';
import { wsCloseCodeOf } from './close-codes.js';
import { type Connection, type ConnectionCore, ConnectionRefused } from './connection.js';
import type { Fanout } from './fanout.js';
import { createKeepAlive } from './keepalive.js';
import { MAX_BUFFERED_BYTES } from './limits.js';
import { closeEverySocket } from './shutdown.js';
import { socketServer } from './socket-server.js';
import { type Extra, GraphqlWsConnection, SLOW_REASON, type SocketContext } from './ws-connection.js';
import { presentedIdentity } from './ws-identity.js';
import { documentFormatKeys, graphqlFormat, OperationHandle } from './ws-operation.js';

/** Ping interval; a socket that does not answer a ping within it is terminated. */
const KEEPALIVE_MS = 12_000;

type Hooks = ServerOptions<Record<string, unknown>, Extra>;

/** What the handlers of every socket share: the instance's services and its open sockets. */
interface Shared {
  deps: Deps;
  yoga: GraphQLServer;
  fanout: Fanout;
  records: Map<WebSocket, GraphqlWsConnection>;
  /** Introspection is off in production on every transport (the HTTP plugin marks HTTP requests only). */
  rules: readonly ValidationRule[] | undefined;
  /** A frame format's key for (document, operation, variables). */
  formatKey: (args: ExecutionArgs) => string;
}

/**
 * graphql-ws on `ws` at `/graphql`: wiring between graphql-ws's hooks and the connection core
 * (connection.ts), sharing the yoga schema, plugins and error masking through `getEnveloped`.
 * The identity is fixed at `connection_init` (appkey + agent `token` or visitor `authorization`,
 * or the Session cookie of the upgrade request); the core's ends map to close codes in
 * close-codes.ts. An upgrade from a foreign browser Origin is refused with 403.
 *
 * graphql-ws's server core reads the protocol's messages and calls one hook per message type
 * (`graphqlWsHooks`: connection_init → onConnect, subscribe → onSubscribe and execute/subscribe,
 * results → onOperation/onNext, the socket's end → onClose); each socket is one
 * `GraphqlWsConnection`, which is also the socket graphql-ws writes to.
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
  const wss = socketServer(deps.config);
  const shared: Shared = {
    deps,
    yoga,
    fanout,
    records: new Map(),
    rules: deps.config.env === 'production' ? [...specifiedRules, NoSchemaIntrospectionCustomRule] : undefined,
    formatKey: documentFormatKeys(),
  };
  const { records } = shared;
  const server = makeServer(graphqlWsHooks(shared));
  /** One keep-alive sweep for every socket (graphql-ws's own runs a timer and closures per socket). */
  const keepAlive = createKeepAlive<WebSocket>(KEEPALIVE_MS);
  /** The last endpoint address computed: sockets through the same host share one string. */
  let lastWsAddress = '';
  const sameAddress = (address: string) => {
    if (address !== lastWsAddress) lastWsAddress = address;
    return lastWsAddress;
  };

  const { clientError, received, socketClosed } = socketListeners(deps, records, keepAlive);

  wss.options.handleProtocols = handleProtocols;
  wss.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    socket.on('error', clientError); // a socket must keep an 'error' listener, or an error would crash the process
    const record = openRecord(shared, core, sessions, socket, request, sameAddress);
    if (!record) return;
    keepAlive.add(socket);
    socket.on('message', received);
    socket.once('close', socketClosed);
    record.initWait = setTimeout(() => {
      record.initWait = undefined;
      if (!record.ctx) socket.close(CloseCode.ConnectionInitialisationTimeout, 'Connection initialisation timeout');
    }, deps.config.connectionInitTimeoutMs);
    record.closed = server.opened(record, { socket });
  });

  return {
    wss,
    /** Closes every socket (going away) and waits for them, for graceful shutdown. */
    async close() {
      await closeEverySocket(wss, (socket) => records.get(socket), wsCloseCodeOf.going_away);
      keepAlive.stop();
      for (const socket of wss.clients) socket.close(wsCloseCodeOf.going_away, 'Going away');
      wss.removeAllListeners();
      await new Promise<void>((resolve, reject) => wss.close((error) => (error ? reject(error) : resolve())));
    },
  };
}

/** The socket's record, or undefined when the core refused it (over a cap: closed before graphql-ws reads from it). */
function openRecord(
  { deps, fanout, records }: Shared,
  core: ConnectionCore,
  sessions: Pick<SessionLayer, 'sessionIdOf'>,
  socket: WebSocket,
  request: IncomingMessage,
  sameAddress: (address: string) => string,
): GraphqlWsConnection | undefined {
  let connection: Connection;
  try {
    connection = core.open(
      {
        end: (why, reason) => socket.close(wsCloseCodeOf[why], reason),
        activeSubscriptions: () => Object.keys(records.get(socket)?.ctx?.subscriptions ?? {}).length,
        sessionEnded: (event) => {
          const to = records.get(socket)?.to;
          if (to) fanout.sessionEnded(to, event);
        },
        levelChanged: (agentId, level) => {
          const to = records.get(socket)?.to;
          if (to) fanout.levelChanged(to, agentId, level);
        },
      },
      request,
    );
  } catch (error) {
    if (!(error instanceof ConnectionRefused)) throw error;
    socket.close(wsCloseCodeOf[error.end], error.message);
    return undefined;
  }
  let upgradeSession: GraphqlWsConnection['upgradeSession'];
  try {
    upgradeSession = sessions.sessionIdOf(request);
  } catch {
    upgradeSession = false;
  }
  const wsAddress = sameAddress(wsAddressFor(request, deps.config));
  const record = new GraphqlWsConnection(socket, connection, wsAddress, upgradeSession);
  records.set(socket, record);
  return record;
}

/**
 * The listeners of every socket: shared functions (`this` is the socket), not closures per socket.
 */
function socketListeners(
  deps: Deps,
  records: Map<WebSocket, GraphqlWsConnection>,
  keepAlive: { delete(socket: WebSocket): void },
) {
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
  return { clientError, received, socketClosed };
}

/** graphql-ws's hooks, one per message of the protocol, over the sockets' records. */
function graphqlWsHooks(shared: Shared): Hooks {
  const { records, deps } = shared;
  return {
    // The adapter's own timer (createSubscriptionServer): graphql-ws's would be kept, fired, for the socket's life.
    connectionInitWaitTimeout: 0,
    onConnect: (ctx) => connectionInit(records.get(ctx.extra.socket), ctx),
    onClose: async (ctx) => {
      const record = records.get(ctx.extra.socket);
      records.delete(ctx.extra.socket);
      if (!record) return;
      await record.connection.closed();
      record.finish();
    },
    onSubscribe: (ctx, id, payload) => subscribeMessage(shared, records.get(ctx.extra.socket), id, payload),
    execute: (args) => (args.rootValue as { execute: (a: ExecutionArgs) => never }).execute(args),
    subscribe: (args) => subscribeOperation(shared, args),
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
  };
}

/** `connection_init`: the socket presents its identity; false refuses it (the core closed it with its reason). */
async function connectionInit(record: GraphqlWsConnection | undefined, ctx: SocketContext): Promise<boolean> {
  if (!record) return false;
  const { socket } = ctx.extra;
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
}

const refusal = (error: unknown): readonly GraphQLError[] => {
  if (!(error instanceof DomainError)) throw error;
  return [new GraphQLError(error.message, { extensions: { code: graphqlCodeOf(error.code) } })];
};

type SubscribePayload = Parameters<NonNullable<Hooks['onSubscribe']>>[2];

/**
 * `subscribe`: admits the operation under the caps, parses and validates the client's document,
 * and returns what `execute` (a query or mutation) or `subscribe` (a subscription) runs.
 */
async function subscribeMessage(
  { deps, yoga, rules }: Shared,
  record: GraphqlWsConnection | undefined,
  id: string,
  payload: SubscribePayload,
): Promise<ExecutionArgs | readonly GraphQLError[]> {
  if (!record?.connection.viewer) return refusal(new DomainError('UNAUTHENTICATED', 'Not connected'));
  let release: () => void;
  try {
    release = record.connection.admitSubscription();
  } catch (error) {
    return refusal(error);
  }
  record.releases.set(id, release);
  const { schema, execute, contextFactory, parse, validate } = yoga.getEnveloped({
    socketContext: record.context(deps),
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
      // No per-operation context is built or kept: `subscribe` makes a passing one.
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
}

/**
 * A subscription operation: runs the `channel` field's subscribe resolver with a passing
 * context whose `openChannel` hands the subscription to the fan-out. Refusals come back as
 * the resolver's errors, masked as on HTTP.
 */
async function subscribeOperation(
  { deps, fanout, formatKey }: Shared,
  args: ExecutionArgs,
): Promise<ExecutionResult | OperationHandle> {
  const { record, id } = args.rootValue as ChannelOperation;
  const { field } = describeOperation(args.document, args.operationName);
  deps.metrics.graphqlOperation('subscription', field);
  const contextValue: GraphQLContext = {
    ...record.context(deps),
    openChannel: (viewer, channel, since) => {
      const handle = new OperationHandle(record.to, id, record.releases.get(id), deps, fanout);
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

/** What onSubscribe leaves for `subscribe` in a subscription's root value. */
interface ChannelOperation {
  record: GraphqlWsConnection;
  id: string;
}
