import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a gateway port, so a test can cut every connection through it at once
 * (as a network failure would: no close handshake) while the gateway itself stays up.
 *
 * `holdWhileRefused`: a connection that comes while nothing listens on the target port is held
 * (its bytes kept) and joined to the target once it listens again, as a load balancer in front
 * of a restarting gateway would; without it such a connection is dropped, as a refused one.
 */
export async function tcpProxy(targetPort: () => number, options: { holdWhileRefused?: boolean } = {}) {
  const pairs = new Set<[Socket, Socket]>();
  const held = new Set<Socket>();
  let downUntil = 0;
  const pipe = (client: Socket, upstream: Socket) => {
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  };
  const holdUntilListening = (client: Socket) => {
    held.add(client);
    client.on('error', () => client.destroy()).on('close', () => held.delete(client));
    const attempt = () => {
      const upstream = connect(targetPort(), '127.0.0.1');
      const refused = (error: NodeJS.ErrnoException) => {
        upstream.destroy();
        if (error.code === 'ECONNREFUSED' && !client.destroyed) setTimeout(attempt, 50);
        else client.destroy();
      };
      upstream.once('error', refused).once('connect', () => {
        upstream.off('error', refused);
        held.delete(client);
        if (client.destroyed) upstream.destroy();
        else pipe(client, upstream);
      });
    };
    attempt();
  };
  const server = createServer((client) => {
    // While the network is down, new connections fail as refused ones would.
    if (Date.now() < downUntil) {
      client.destroy();
      return;
    }
    if (options.holdWhileRefused) holdUntilListening(client);
    else pipe(client, connect(targetPort(), '127.0.0.1'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    /** How many connections go through the proxy now. */
    open: () => pairs.size,
    /** Destroys every proxied connection and refuses new ones for `downMs`; answers how many there were. */
    cut(downMs = 0) {
      downUntil = Date.now() + downMs;
      const n = pairs.size;
      for (const [a, b] of pairs) {
        a.destroy();
        b.destroy();
      }
      pairs.clear();
      return n;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of held) client.destroy();
        server.close(() => resolve());
      }),
  };
}
