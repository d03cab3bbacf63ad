import type { WebSocket, WebSocketServer } from 'ws';
import type { Connection } from './connection.js';

/** On shutdown, a socket that does not finish the close handshake in this time is cut. */
const SHUTDOWN_CLOSE_MS = 3000;

/** What a transport holds of one of its sockets at shutdown. */
export interface HeldSocket {
  /** The socket's core connection, once it has one. */
  connection?: Connection;
  /** Resolved once the transport has finished with the socket (its close handling ran). */
  finished?: Promise<void>;
}

/**
 * Graceful shutdown of one transport's sockets, the same for both: each connection ends
 * `going_away` (the transport maps it to its close code), a socket without a connection yet is
 * closed with `goingAwayCode`, and a socket that has not finished its close handshake within
 * SHUTDOWN_CLOSE_MS is cut. Resolves once the transport has finished with every socket.
 */
export async function closeEverySocket(
  wss: WebSocketServer,
  held: (socket: WebSocket) => HeldSocket | undefined,
  goingAwayCode: number,
): Promise<void> {
  await Promise.all(
    [...wss.clients].map((socket) => {
      const cut = setTimeout(() => socket.terminate(), SHUTDOWN_CLOSE_MS);
      const entry = held(socket);
      if (entry?.connection) entry.connection.end('going_away', 'Server shutting down');
      else socket.close(goingAwayCode, 'Server shutting down');
      return (entry?.finished ?? Promise.resolve()).finally(() => clearTimeout(cut));
    }),
  );
}
