import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

// Issue 18 rows 11, 15, 16, 17 and the info row (Cache-Control, /metrics behind a token).
const METRICS_TOKEN = 'metrics-test-token-0123456789';
let t: TestApp;
let capped: TestApp;
beforeAll(async () => {
  t = await startTestApp({ env: { HTTP_HEADERS_TIMEOUT_MS: '1000', HTTP_REQUEST_TIMEOUT_MS: '2000' } });
  capped = await startTestApp({ env: { MAX_CONNECTIONS_PER_ADDRESS: '20', METRICS_TOKEN } });
});
afterAll(async () => {
  await t?.stop();
  await capped?.stop();
});

/** Sends `body` to `path` with `headers` over node:http (chunked when no content-length is given). */
function send(base: string, path: string, headers: Record<string, string>, body: Buffer) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method: 'POST', headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (c) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A raw TCP connection to the app; resolves when connected. */
function rawConnection(base: string) {
  const { port } = new URL(base);
  const socket = connect(Number(port), '127.0.0.1');
  let received = '';
  socket.on('data', (d) => {
    received += d.toString();
  });
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const connected = new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { socket, connected, closed, received: () => received };
}

const within = <T>(p: Promise<T>, what: string, ms = 15_000) =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no ${what}`)), ms))]);

describe('one body cap for every content type (row 11)', () => {
  const big = Buffer.from(`{ ${'__typename '.repeat(8000)}}`); // ~88 KB

  it('application/graphql over 64 KB on /graphql: 413, declared or chunked', async () => {
    const declared = await send(
      t.url,
      '/graphql',
      { 'content-type': 'application/graphql', 'content-length': String(big.length), 'x-parley-csrf': '1' },
      big,
    );
    expect(declared.status).toBe(413);
    const chunked = await send(t.url, '/graphql', { 'content-type': 'application/graphql', 'x-parley-csrf': '1' }, big);
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.text)).toMatchObject({ code: 1413 });
  });

  it('text/plain and multipart over 64 KB on /graphql, and any type elsewhere: 413', async () => {
    for (const type of ['text/plain', 'multipart/form-data; boundary=x', 'application/octet-stream']) {
      const res = await send(t.url, '/graphql', { 'content-type': type, 'x-parley-csrf': '1' }, big);
      expect(res.status, type).toBe(413);
    }
    const rest = await send(
      t.url,
      '/visitor/token',
      { 'content-type': 'text/plain', 'content-length': String(big.length) },
      big,
    );
    expect(rest.status).toBe(413);
  });

  it('a small application/graphql body is still read', async () => {
    const res = await send(
      t.url,
      '/graphql',
      { 'content-type': 'application/graphql', 'x-parley-csrf': '1' },
      Buffer.from('{ __typename }'),
    );
    expect(res.status).not.toBe(413);
    expect(res.status).toBeLessThan(500);
  });
});

describe('server timeouts and the per-address connection cap (row 15)', () => {
  it('the defaults are set and documented values: 10 s headers, 30 s request, 5 s keep-alive, 256 connections', () => {
    const defaults = loadConfig({}).hardening;
    expect(defaults).toMatchObject({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5000,
      maxConnectionsPerAddress: 256,
    });
    expect(t.app.server.headersTimeout).toBe(1000);
    expect(t.app.server.requestTimeout).toBe(2000);
    expect(t.app.server.keepAliveTimeout).toBe(5000);
  });

  it('a connection that sends nothing is closed after the headers timeout', async () => {
    const c = rawConnection(t.url);
    await c.connected;
    await within(c.closed, 'close of an idle connection');
    expect(c.received()).toMatch(/^HTTP\/1\.1 408/);
  });

  it('a slow body is cut off after the request timeout', async () => {
    const c = rawConnection(t.url);
    await c.connected;
    c.socket.write(
      'POST /visitor/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a',
    );
    await within(c.closed, 'close of a slow body');
    expect(c.received()).toMatch(/408/);
  });

  it('past MAX_CONNECTIONS_PER_ADDRESS a new connection from that address gets 503 and is closed', async () => {
    const open: ReturnType<typeof rawConnection>[] = [];
    let refused: ReturnType<typeof rawConnection> | undefined;
    for (let i = 0; i < 30 && !refused; i++) {
      const c = rawConnection(capped.url);
      await c.connected;
      // A request on it proves it was accepted (or shows the refusal).
      c.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      await within(
        new Promise<void>((resolve) => {
          const check = () => (c.received().includes('\r\n\r\n') ? resolve() : setImmediate(check));
          check();
        }),
        'an answer',
      );
      if (c.received().startsWith('HTTP/1.1 503')) refused = c;
      else open.push(c);
    }
    expect(refused).toBeDefined();
    expect(open.length).toBeLessThanOrEqual(20);
    await within(refused?.closed as Promise<void>, 'close of the refused connection');
    for (const c of open) c.socket.destroy();
    await Promise.all(open.map((c) => c.closed));
    // Room again once they closed.
    const again = await new HttpClient(capped.url).json('/healthz');
    expect(again.status).toBe(200);
  });

  it('under the default cap, 60 parallel connections from one address are served', async () => {
    const results = await Promise.all(
      Array.from(
        { length: 60 },
        () =>
          new Promise<number>((resolve, reject) => {
            const req = httpRequest(`${t.url}/healthz`, { agent: false }, (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode ?? 0));
            });
            req.on('error', reject);
            req.end();
          }),
      ),
    );
    expect(results.every((s) => s === 200)).toBe(true);
  });
});

describe('no secret reaches the log (row 16)', () => {
  it('the query string of /graphql is never logged; secrets are redacted by value shape elsewhere', async () => {
    const mutation = 'mutation { login(username: "alice", password: "hunter2-Secret-Pw", captcha: "abcd") { token } }';
    await fetch(`${t.url}/graphql?query=${encodeURIComponent(mutation)}`, { headers: { 'x-parley-csrf': '1' } });
    const { token } = await agentSession(t.url, 'alice');
    await fetch(`${t.url}/agent/data/get?sid=${token}&note=my-password-is-swordfish&page=2`);
    const raw = t.rawLogs();
    expect(raw).not.toContain('hunter2');
    expect(raw).not.toContain(token);
    expect(raw).not.toContain('swordfish');
    const lines = t.logs.filter(
      (l) => typeof l.url === 'string' && (l.url as string).startsWith('/agent/data/get?sid='),
    );
    expect(lines.at(-1)?.url).toBe('/agent/data/get?sid=[redacted]&note=[redacted]&page=2');
    const graphql = t.logs.filter((l) => typeof l.url === 'string' && (l.url as string).startsWith('/graphql?'));
    expect(graphql.at(-1)?.url).toBe('/graphql?[redacted]');
  });
});

describe('a missing asset (row 17)', () => {
  it('answers 404 with no error and no stack in the log', async () => {
    const before = t.logs.length;
    const res = await fetch(`${t.url}/assets/vendor/graphql-ws/common-doesnotexist.js`);
    expect(res.status).toBe(404);
    const lines = t.logs.slice(before);
    expect(lines.some((l) => Number(l.level) >= 50)).toBe(false);
    expect(JSON.stringify(lines)).not.toContain('stack');
  });
});

describe('authenticated answers are not cached; /metrics behind a token (info row)', () => {
  it('Cache-Control: no-store on agent, visitor and GraphQL JSON', async () => {
    const { token } = await agentSession(t.url, 'alice');
    const agent = await fetch(`${t.url}/agent/data/get`, { headers: { token } });
    expect(agent.headers.get('cache-control')).toBe('no-store');
    const visitor = await visitorToken(t.url, 'demo-appkey');
    const data = await fetch(`${t.url}/visitor/data/get`, { headers: { authorization: `Bearer ${visitor.token}` } });
    expect(data.headers.get('cache-control')).toBe('no-store');
    const gql = await new HttpClient(t.url).graphql('{ agentWorkbench { setting { bid } } }', undefined, { token });
    expect(gql.headers.get('cache-control')).toBe('no-store');
  });

  it('with METRICS_TOKEN, /metrics needs the bearer token (404 otherwise)', async () => {
    expect((await fetch(`${capped.url}/metrics`)).status).toBe(404);
    expect(
      (await fetch(`${capped.url}/metrics`, { headers: { authorization: 'Bearer wrong-token-000000000' } })).status,
    ).toBe(404);
    const ok = await fetch(`${capped.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('parley_http_request_duration_seconds');
  });
});
