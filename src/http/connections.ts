import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Config } from '../config.js';

/**
 * The HTTP server's own limits (docs/security.md):
 * - `headersTimeout`: the request line and headers must arrive within it (a connection that
 *   sends nothing is closed with 408 then). Node's own check of it proved unreliable for partial
 *   requests (issue 27 row 11), so `headerDeadline` below enforces it per socket as well;
 * - `requestTimeout`: the whole request, body included (a slow body is cut off);
 * - `keepAliveTimeout`: an idle keep-alive connection is closed after it;
 * - at most `maxConnectionsPerAddress` open HTTP connections per client address: past it a new
 *   one is answered 503 and closed. A connection upgraded to a WebSocket leaves the count (the
 *   real-time caps govern sockets). Not applied with TRUST_PROXY on, when every connection
 *   comes from the proxy (cap per client there).
 */
type ServerLimits = Config['hardening'];

/** Options for `http.createServer`: how often Node checks the header and request deadlines. */
export function serverOptions(limits: ServerLimits) {
  return {
    connectionsCheckingInterval: Math.max(100, Math.min(30_000, Math.floor(limits.headersTimeoutMs / 4))),
  };
}

export function limitServer(server: Server, limits: ServerLimits, opts: { trustProxy: boolean }) {
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  headerDeadline(server, limits);
  const cap = limits.maxConnectionsPerAddress;
  if (cap <= 0 || opts.trustProxy) return;

  const open = new Map<string, number>();
  const counted = new WeakSet<Socket>();
  const release = (socket: Socket, address: string) => {
    if (!counted.delete(socket)) return;
    const n = (open.get(address) ?? 1) - 1;
    if (n <= 0) open.delete(address);
    else open.set(address, n);
  };
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? 'unknown';
    const n = open.get(address) ?? 0;
    if (n >= cap) {
      // Read nothing from it (the HTTP parser never sees a request), answer, and close.
      socket.pause();
      socket.end(
        'HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n',
        () => socket.destroy(),
      );
      return;
    }
    open.set(address, n + 1);
    counted.add(socket);
    socket.once('close', () => release(socket, address));
  });
  server.on('upgrade', (_req, socket: Socket) => release(socket, socket.remoteAddress ?? 'unknown'));
}

/**
 * The slowloris defence, independent of Node's periodic headers-timeout check: each socket has a
 * timer of its own, armed when it connects (`headersTimeoutMs`) and whenever its last response
 * ends (`keepAliveTimeoutMs + headersTimeoutMs`: the idle keep-alive wait, then the headers), and
 * disarmed while a request whose headers are complete is in flight. When it fires the socket is
 * answered 408 and closed, however many bytes it trickles in. A socket upgraded to a WebSocket
 * leaves it. One timer per socket, nothing shared: slow sockets cannot delay one another.
 */
function headerDeadline(server: Server, limits: ServerLimits) {
  const afterResponseMs = limits.keepAliveTimeoutMs + limits.headersTimeoutMs;
  const timers = new WeakMap<Socket, NodeJS.Timeout>();
  const inFlight = new WeakMap<Socket, number>();
  const disarm = (socket: Socket) => {
    clearTimeout(timers.get(socket));
    timers.delete(socket);
  };
  const arm = (socket: Socket, ms: number) => {
    disarm(socket);
    const timer = setTimeout(() => {
      timers.delete(socket);
      if (socket.destroyed) return;
      socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', () =>
        socket.destroy(),
      );
      // A peer that never reads must not keep the socket either.
      setTimeout(() => socket.destroy(), 1000).unref();
    }, ms);
    timer.unref();
    timers.set(socket, timer);
  };
  server.on('connection', (socket: Socket) => {
    inFlight.set(socket, 0);
    arm(socket, limits.headersTimeoutMs);
    socket.once('close', () => disarm(socket));
  });
  server.on('request', (req, res) => {
    const socket = req.socket;
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
    disarm(socket);
    res.once('close', () => {
      const left = (inFlight.get(socket) ?? 1) - 1;
      inFlight.set(socket, left);
      // Pipelined requests already parsed keep the socket busy; re-arm once all are answered.
      if (left <= 0 && !socket.destroyed) arm(socket, afterResponseMs);
    });
  });
  server.on('upgrade', (req) => disarm(req.socket));
}
