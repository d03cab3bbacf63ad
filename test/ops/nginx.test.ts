import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { agentSession, HttpClient, visitorToken } from '../support/clients.js';
import { freePort } from '../support/private-services.js';
import { disconnectAll, pusherClient, rawPusher, reachState, record } from '../support/pusher.js';
import { describeWhen } from '../support/required.js';
import { INTERNAL_TOKEN, startTestApp, type TestApp } from '../support/test-app.js';
import { closeAllSockets, connectSocket, eventually } from '../support/ws.js';

/**
 * Issue 27 row 10: deploy/nginx.conf, as shipped, in a real nginx (Debian's package) in front of
 * a gateway: REST, graphql-ws and the Pusher protocol proxied through it, WebSocket read timeouts
 * above the protocols' own, and an access log that never holds a query string (`?token=`).
 * Skipped where nginx is not installed; CI installs it and sets REQUIRE_NGINX=1 (.ci/run).
 */
const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));
const shipped = readFileSync(new URL('../../deploy/nginx.conf', import.meta.url), 'utf8');

/** Seconds of an nginx time value (`90s`, `5m`, `1h`, `300`). */
const seconds = (value: string) => {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(value);
  if (!m) throw new Error(`not an nginx time: ${value}`);
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 }[m[2] ?? 's'] ?? 1;
  return Number(m[1]) * unit;
};
const locationBlock = (path: string) => new RegExp(`location ${path} \\{([^}]*)\\}`).exec(shipped)?.[1] ?? '';

let t: TestApp;
let nginx: ChildProcess | undefined;
let dir: string;
let edge: string; // http://127.0.0.1:<nginx port>
let accessLog: string;

describeWhen(
  Boolean(NGINX),
  'REQUIRE_NGINX',
  'deploy/nginx.conf in a real nginx',
  'nginx is not installed (apt-get install nginx-light)',
  () => {
    beforeAll(async () => {
      t = await startTestApp({ env: { TRUST_PROXY: 'on' } });
      dir = mkdtempSync(join(tmpdir(), 'parley-nginx-'));
      accessLog = join(dir, 'access.log');
      const port = await freePort();
      edge = `http://127.0.0.1:${port}`;
      // The shipped server block, with the test's gateway as the upstream, a free port and files
      // under a temporary directory; everything else exactly as deployed.
      const site = shipped
        .replace(
          /upstream parley_gateways \{[^}]*\}/,
          `upstream parley_gateways {\n    server 127.0.0.1:${new URL(t.url).port};\n    keepalive 8;\n}`,
        )
        .replace('listen 80;', `listen 127.0.0.1:${port};`)
        .replace('/var/log/nginx/access.log', accessLog);
      expect(site).toContain(accessLog);
      writeFileSync(join(dir, 'site.conf'), site);
      writeFileSync(
        join(dir, 'nginx.conf'),
        [
          // Workers as root when the test runs as root, so they can use the temporary directory.
          process.getuid?.() === 0 ? 'user root;' : '',
          'worker_processes 1;',
          `pid ${join(dir, 'nginx.pid')};`,
          `error_log ${join(dir, 'error.log')} warn;`,
          'events { worker_connections 256; }',
          'http {',
          // The image's main config logs whole request lines at http level: the server block must override it.
          `  log_format main '$remote_addr "$request" $status';`,
          `  access_log ${join(dir, 'default-access.log')} main;`,
          ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `  ${k}_temp_path ${join(dir, k)};`),
          `  include ${join(dir, 'site.conf')};`,
          '}',
        ].join('\n'),
      );
      const args = ['-p', dir, '-e', join(dir, 'error.log'), '-c', join(dir, 'nginx.conf')];
      execFileSync(NGINX as string, ['-t', ...args], { stdio: 'pipe' });
      nginx = spawn(NGINX as string, [...args, '-g', 'daemon off;'], { stdio: 'ignore' });
      await eventually(
        async () => (await fetch(`${edge}/healthz`).catch(() => undefined))?.status === 200,
        'nginx',
        20_000,
      );
    }, 60_000);
    afterEach(async () => {
      disconnectAll();
      await closeAllSockets();
    });
    afterAll(async () => {
      if (nginx && nginx.exitCode === null) {
        const exited = new Promise((resolve) => nginx?.once('exit', resolve));
        nginx.kill('SIGQUIT');
        await exited;
      }
      await t?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const publish = async (channel: string, event: string, data: unknown) => {
      // Straight to the gateway: nginx keeps /internal/ off the public side.
      const res = await new HttpClient(t.url).json('/internal/events', {
        method: 'POST',
        headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
        json: { channel, event, data },
      });
      expect(res.status).toBe(202);
    };
    const visitorThroughEdge = async () => {
      const { token } = await visitorToken(edge);
      const { body } = await new HttpClient(edge).json<{ visitor: { channel: string } }>('/visitor/data/get', {
        headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
      });
      return { token, channel: body.data.visitor.channel };
    };

    it('the WebSocket locations read longer than the protocols keep a socket silent (Pusher 120 s)', () => {
      for (const path of ['/graphql', '/app/']) {
        const block = locationBlock(path);
        const read = /proxy_read_timeout (\S+);/.exec(block)?.[1];
        expect(read, path).toBeDefined();
        expect(seconds(read as string), path).toBeGreaterThan(120);
        expect(seconds(/proxy_send_timeout (\S+);/.exec(block)?.[1] ?? '0'), path).toBeGreaterThan(120);
      }
      expect(shipped).toMatch(/proxy_set_header Upgrade \$http_upgrade;/);
      expect(shipped).toMatch(/proxy_set_header Connection \$connection_upgrade;/);
    });

    it('proxies REST (a visitor token, the agent bootstrap with ?token=) and keeps /internal/ and /metrics closed', async () => {
      const { channel } = await visitorThroughEdge();
      expect(channel).toBeTruthy();
      const { token } = await agentSession(t.url, 'alice');
      const res = await fetch(`${edge}/agent/data/get?token=${token}`, { headers: { accept: 'application/json' } });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { code: number }).code).toBe(0);
      expect((await fetch(`${edge}/internal/events`, { method: 'POST' })).status).toBe(404);
      expect((await fetch(`${edge}/metrics`)).status).toBe(404);
    });

    it('proxies graphql-ws subscriptions at /graphql', async () => {
      const me = await visitorThroughEdge();
      const socket = connectSocket(`${edge.replace('http', 'ws')}/graphql`, {
        appkey: 'demo-appkey',
        authorization: `Bearer ${me.token}`,
      });
      await socket.acked;
      const sub = socket.channel(me.channel);
      await eventually(() => sub.cursor !== undefined, 'the subscribed event');
      await publish(me.channel, 'test.edge', { via: 'graphql-ws' });
      expect((await sub.waitFor('test.edge')).data).toEqual({ via: 'graphql-ws' });
    });

    it('proxies the Pusher protocol at /app/{appkey} (pusher-js: connect, subscribe, receive)', async () => {
      const me = await visitorThroughEdge();
      const raw = rawPusher(`${edge.replace('http', 'ws')}/app/demo-appkey?protocol=7&client=js&version=8.0.0`);
      expect((await raw.next('pusher:connection_established')).data).toMatchObject({ activity_timeout: 120 });
      raw.ws.close();
      const pusher = pusherClient(`${edge.replace('http', 'ws')}/`, 'demo-appkey', {
        authHeaders: { authorization: `Bearer ${me.token}` },
      });
      await reachState(pusher, 'connected');
      const channel = record(pusher, me.channel);
      await channel.subscribed();
      await publish(me.channel, 'test.edge', { via: 'pusher' });
      expect((await channel.waitFor('test.edge')).data).toEqual({ via: 'pusher' });
    });

    it('the access log has the requests but no query string: no Session ID, signature or GraphQL query', async () => {
      const { token } = await agentSession(t.url, 'alice');
      await fetch(`${edge}/agent/data/get?token=${token}`);
      await fetch(`${edge}/visitor/attachment/x?sig=secret-signature-0123456789&exp=1`);
      await fetch(
        `${edge}/graphql?query=${encodeURIComponent('mutation { login(password: "hunter2-Pw") { token } }')}`,
      );
      const pusher = rawPusher(`${edge.replace('http', 'ws')}/app/demo-appkey?protocol=7&token=${token}`);
      await pusher.next('pusher:connection_established');
      pusher.ws.close();
      await pusher.closed;
      // nginx writes a WebSocket's line when it closes.
      const log = await eventually(() => {
        const text = existsSync(accessLog) ? readFileSync(accessLog, 'utf8') : '';
        return text.includes('/app/demo-appkey') && text.includes('/graphql') ? text : undefined;
      }, 'the access log lines');
      expect(log).toContain('"GET /agent/data/get HTTP/1.1" 200');
      expect(log).not.toContain(token);
      expect(log).not.toContain('secret-signature');
      expect(log).not.toContain('hunter2');
      expect(log).not.toContain('?');
      // The image's default format never saw this server's requests.
      const fallback = join(dir, 'default-access.log');
      expect(existsSync(fallback) ? readFileSync(fallback, 'utf8') : '').not.toContain(token);
    });
  },
);
