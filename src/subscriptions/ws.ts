import type { IncomingMessage } from 'node:http';
import { eq } from 'drizzle-orm';
import type { ExecutionArgs } from 'graphql';
import { CloseCode } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer } from 'ws';
import { merchants } from '../db/schema.js';
import type { Deps } from '../deps.js';
import { clientIp, wsAddressFor } from '../http/request.js';
import type { SessionLayer } from '../http/session.js';
import { requireAgent, requireVisitor } from '../resolvers/viewer.js';
import type { GraphQLContext } from '../schema/builder.js';
import type { GraphQLServer } from '../schema/yoga.js';

/** Largest message a client may send; subscriptions are small. */
export const MAX_WS_PAYLOAD_BYTES = 16 * 1024;

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

/**
 * graphql-ws on `ws`, sharing the yoga schema, plugins and error masking through
 * `getEnveloped`. The identity is fixed at `connection_init` (appkey + agent `token` or visitor
 * `authorization`, or the Session cookie of the upgrade request); a bad one closes with 4403.
 */
export function createSubscriptionServer(deps: Deps, yoga: GraphQLServer, sessions: SessionLayer) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_WS_PAYLOAD_BYTES, perMessageDeflate: false });
  const identities = new WeakMap<object, SocketIdentity>();

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

  const disposable = useServer<Record<string, unknown>, { identity?: SocketIdentity }>(
    {
      connectionInitWaitTimeout: 5000,
      onConnect: async (ctx) => {
        const params = (ctx.connectionParams ?? {}) as ConnectionParams;
        const request = ctx.extra.request;
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
          identities.set(ctx, id);
          return true;
        } catch {
          return false; // graphql-ws closes with 4403 Forbidden
        }
      },
      onSubscribe: async (ctx, _id, payload) => {
        const id = identities.get(ctx);
        if (!id) {
          ctx.extra.socket.close(CloseCode.Unauthorized, 'Unauthorized');
          return;
        }
        const contextValue = socketContext(ctx.extra.request, id);
        const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
          req: ctx.extra.request,
          socketContext: contextValue,
          params: payload,
        });
        const args = {
          schema,
          operationName: payload.operationName,
          document: parse(payload.query),
          variableValues: payload.variables,
          contextValue: await contextFactory(),
          rootValue: { execute, subscribe },
        };
        const errors = validate(args.schema, args.document);
        if (errors.length > 0) return errors;
        return args as ExecutionArgs;
      },
      execute: (args) => (args.rootValue as { execute: (a: ExecutionArgs) => never }).execute(args),
      subscribe: (args) => (args.rootValue as { subscribe: (a: ExecutionArgs) => never }).subscribe(args),
    },
    wss,
    12_000,
  );

  return {
    wss,
    /** Closes every socket with 1001 (going away), for graceful shutdown. */
    async close() {
      for (const client of wss.clients) client.close(1001, 'Server shutting down');
      await disposable.dispose();
    },
  };
}

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
  const sessionId = typeof params.token === 'string' && params.token ? params.token : sessions.sessionIdOf(request);
  return sessionId ? { identity: 'agent', sessionId } : undefined;
}
