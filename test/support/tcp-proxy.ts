import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a gateway port, so a test can cut every connection through it at once
 * (as a network failure would: no close handshake) while the gateway itself stays up.
 */
export async function tcpProxy(targetPort: () => number) {
  const pairs = new Set<[Socket, Socket]>();
  let downUntil = 0;
  const server = createServer((client) => {
    // While the network is down, new connections fail as refused ones would.
    if (Date.now() < downUntil) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort(), '127.0.0.1');
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
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
