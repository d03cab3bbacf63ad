import type { IncomingMessage, ServerResponse } from 'node:http';

/** How long a connection answered by `closeLingering` discards what the client still sends before it goes. */
export const LINGER_MS = 5000;

/**
 * Closes the connection after the answer `res` is about to give while the client may still be
 * sending `req`'s body (a lingering close, as nginx does): call it before answering. The answer
 * carries `Connection: close`; once it is written the socket half-closes (FIN), reads and drops
 * whatever still arrives, and is destroyed `LINGER_MS` later. The request's body is no longer read
 * by anyone else (unpipe it first).
 *
 * Why: after a `Connection: close` answer node's HTTP server calls the socket's undocumented
 * `destroySoon()` (`resOnFinish` in `_http_server.js`), which destroys it as soon as the answer is
 * written; unread bytes then make the kernel reset the connection, and a client still writing its
 * body gets EPIPE/ECONNRESET instead of the answer (Node 24's fetch fails so). `end()` in its place
 * is the half-close. Proved by test/api/attachments-lingering-close.test.ts.
 */
export function closeLingering(req: IncomingMessage, res: ServerResponse) {
  res.setHeader('Connection', 'close');
  const socket = req.socket;
  socket.destroySoon = () => socket.end();
  res.once('finish', () => setTimeout(() => socket.destroy(), LINGER_MS).unref());
  req.resume();
}
