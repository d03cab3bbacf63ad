import { createServer } from 'node:http';
import { WebSocketServer } from 'ws';

/**
 * The fan-out floor: a raw `ws` server that, for each published event, serializes one frame
 * and sends the same string to every connected socket — no protocol, no per-subscriber work.
 * The frame has the same shape and size as a graphql-ws `next` message of the gateway.
 */
const server = createServer(async (req, res) => {
  if (req.url === '/healthz') return res.end('ok');
  if (req.method === 'POST' && req.url === '/publish') {
    let body = '';
    for await (const chunk of req) body += chunk;
    const { channel, event, data } = JSON.parse(body);
    const frame = JSON.stringify({
      id: 'sub',
      type: 'next',
      payload: { data: { channel: { id: `${Date.now()}-0`, channel, event, data, at: new Date().toISOString() } } },
    });
    for (const client of wss.clients) client.send(frame);
    res.writeHead(202, { 'content-type': 'application/json' });
    return res.end('{"code":0}');
  }
  res.statusCode = 404;
  res.end();
});
const wss = new WebSocketServer({ server, perMessageDeflate: false, maxPayload: 16 * 1024 });
server.listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => {
  for (const c of wss.clients) c.terminate();
  server.close(() => process.exit(0));
});
