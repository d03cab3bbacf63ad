import type { Context } from 'graphql-ws';
import type { WebSocket } from 'ws';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import { requireAgent, requireVisitor, requireVisitorByHash } from '../resolvers/viewer.js';
import type { GraphQLContext } from '../schema/builder.js';
import type { Connection, SocketIdentity } from './connection.js';
import type { ChannelSubscription, FanoutSocket } from './fanout.js';
import { API_KEYS_OVER_HTTP_ONLY } from './ws-identity.js';

export const SLOW_REASON = 'Slow consumer: reconnect and resume with since';

/** graphql-ws's `extra`: the socket only — the upgrade request is read once and let go (see GraphqlWsConnection). */
export type Extra = { socket: WebSocket };
export type SocketContext = Context<Record<string, unknown>, Extra>;

/**
 * One socket of this adapter: the core's connection, the releases of its operations, what it
 * needs of the upgrade request (read at the upgrade: the `IncomingMessage`, its headers and
 * stream state are not kept for the socket's life) — and the socket as graphql-ws's server core
 * sees it: methods on a prototype, not four closures per socket as in graphql-ws's own `ws`
 * adapter (graphql-ws/use/ws, which this file replaces).
 */
export class GraphqlWsConnection {
  /** The socket as the fan-out writes to it. */
  readonly to: FanoutSocket;
  ctx?: SocketContext;
  readonly releases = new Map<string, () => void>();
  /** connection_init must arrive before this fires (cleared once it has). */
  initWait: NodeJS.Timeout | undefined;
  /** graphql-ws's handler of this socket's messages. */
  receive?: (data: string) => Promise<void>;
  /** graphql-ws's end of the socket (its subscriptions, then onClose). */
  closed?: (code: number, reason: string) => Promise<void>;
  /** Resolved once graphql-ws has finished with the socket (its onClose ran), for graceful shutdown. */
  readonly finished: Promise<void>;
  finish: () => void = () => {};

  constructor(
    readonly socket: WebSocket,
    readonly connection: Connection,
    /** The public address of this endpoint, for the socket's operation context. */
    readonly wsAddress: string,
    /** The agent Session the upgrade request carried (cookie or `token`); false when `token` came more than once. */
    readonly upgradeSession: string | undefined | false,
  ) {
    this.to = { socket, connection, slowReason: SLOW_REASON, subscriptions: new Set<ChannelSubscription>() };
    this.finished = new Promise<void>((resolve) => {
      this.finish = resolve;
    });
  }

  /** The operation context of this socket: its identity as the resolvers read it. */
  context(deps: Deps): GraphQLContext {
    const { connection } = this;
    const identity = connection.identity as SocketIdentity;
    return {
      deps,
      agent: async () => requireAgent(deps, await connection.sessionPort(), connection.address),
      visitor: () =>
        identity.kind === 'visitor' ? requireVisitorByHash(deps, identity.tokenHash) : requireVisitor(deps, undefined),
      // Keys are for server-to-server HTTP; a socket never carries one (ws-identity.ts refuses it).
      apiKey: () => Promise.reject(new DomainError('API_KEY_INVALID', API_KEYS_OVER_HTTP_ONLY)),
      identity: identity.kind,
      wsAddress: this.wsAddress,
      clientIp: connection.address,
    };
  }

  // graphql-ws's WebSocket: protocol, send, close, onMessage.
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
    this.receive = receive;
  }
}
