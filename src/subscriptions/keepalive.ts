/** What the keep-alive needs of a socket (a `ws` WebSocket). */
interface PingableSocket {
  readonly readyState: number;
  readonly OPEN: number;
  ping(): void;
  terminate(): void;
  on(event: 'pong', listener: (this: PingableSocket) => void): unknown;
}

/**
 * One keep-alive for every socket of a server, instead of a ping interval, a pong wait and their
 * closures per socket (graphql-ws's own keep-alive; BENCHMARKS.md, idle subscribers): every
 * `intervalMs` each socket is pinged, and one that has not answered its previous ping by then is
 * terminated — the same rule as graphql-ws's. The sockets are spread over `slices` turns of one
 * instance-wide timer, so a turn pings a slice of them, not all at once.
 */
export function createKeepAlive<S extends PingableSocket>(intervalMs: number, slices = 12) {
  const turns = Array.from({ length: slices }, () => new Set<S>());
  /** Pinged and not yet answered. */
  const waiting = new Set<S>();
  let added = 0;
  let turn = 0;
  function answered(this: PingableSocket) {
    waiting.delete(this as S);
  }
  const timer = setInterval(() => {
    const due = turns[turn] as Set<S>;
    turn = (turn + 1) % slices;
    for (const socket of due) {
      if (waiting.has(socket)) {
        waiting.delete(socket);
        due.delete(socket);
        socket.terminate();
      } else if (socket.readyState === socket.OPEN) {
        waiting.add(socket);
        socket.ping();
      }
    }
  }, intervalMs / slices);
  timer.unref();
  return {
    add(socket: S) {
      (turns[added++ % slices] as Set<S>).add(socket);
      socket.on('pong', answered);
    },
    /** The socket closed. */
    delete(socket: S) {
      waiting.delete(socket);
      for (const due of turns) if (due.delete(socket)) return;
    },
    stop() {
      clearInterval(timer);
    },
  };
}
