import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Real Redis and PostgreSQL servers of a test's own, on their own ports and data directories,
 * so fault tests can stop and restart them without disturbing anything else on the machine.
 */

/**
 * A free port for a server another process binds later (a private PostgreSQL or Redis, nginx, a
 * spawned gateway), chosen below the kernel's ephemeral range: a port from `listen(0)` is an
 * ephemeral one, which any outgoing connection of the busy test run may take between this check
 * and the server's bind — or between a stop and a restart on the same port ("Address already in
 * use" from a private PostgreSQL, seen on an idle machine).
 */
export async function freePort(): Promise<number> {
  const below = ephemeralRangeStart();
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = FIRST_PORT + randomInt(below - FIRST_PORT);
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port between ${FIRST_PORT} and ${below}`);
}

/** Above the well-known and most registered services' ports. */
const FIRST_PORT = 10_000;

/** The first port the kernel hands out to outgoing connections (Linux: 32768 by default). */
function ephemeralRangeStart(): number {
  try {
    const start = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return start > FIRST_PORT + 1_000 ? start : 32_768;
  } catch {
    return 32_768;
  }
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function waitFor(check: () => boolean, what: string, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what} did not come up within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const hasRedisServer = () => {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

export interface PrivateService {
  url: string;
  port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops the server for good and removes its data. */
  destroy(): Promise<void>;
}

/** A private redis-server with an append-only file, so a restart keeps its data like production. */
export async function startPrivateRedis(): Promise<PrivateService> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'parley-redis-'));
  let child: ChildProcess | undefined;
  const ping = () => {
    try {
      return (
        execFileSync('redis-cli', ['-p', String(port), 'ping'], {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
        }).trim() === 'PONG'
      );
    } catch {
      return false;
    }
  };
  const service: PrivateService = {
    url: `redis://127.0.0.1:${port}`,
    port,
    async start() {
      child = spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'yes',
          '--appendfsync',
          'always',
          '--dir',
          dir,
        ],
        { stdio: 'ignore' },
      );
      await waitFor(ping, 'private redis-server');
    },
    async stop() {
      const exited = new Promise((resolve) => child?.once('exit', resolve));
      child?.kill('SIGTERM');
      await exited;
      child = undefined;
    },
    async destroy() {
      if (child) await service.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await service.start();
  return service;
}

const pgBin = () => {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const version = readdirSync(root).sort((a, b) => Number(b) - Number(a))[0];
  const bin = version && join(root, version, 'bin');
  return bin && existsSync(join(bin, 'initdb')) ? bin : undefined;
};

export const hasPostgresBinaries = () => pgBin() !== undefined;

/** A private PostgreSQL cluster (initdb as the postgres user, trust auth) on its own port. */
export async function startPrivatePostgres(): Promise<PrivateService> {
  const bin = pgBin();
  if (!bin) throw new Error('PostgreSQL server binaries not found');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'parley-pg-'));
  chmodSync(dir, 0o777);
  const data = join(dir, 'data');
  const asPostgres = (cmd: string) => {
    const runAsRoot = process.getuid?.() === 0;
    execFileSync(runAsRoot ? 'su' : 'sh', runAsRoot ? ['postgres', '-s', '/bin/sh', '-c', cmd] : ['-c', cmd], {
      stdio: 'ignore',
    });
  };
  asPostgres(`${bin}/initdb -D ${data} -A trust -U postgres --no-sync`);
  const service: PrivateService = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async start() {
      asPostgres(
        `${bin}/pg_ctl -D ${data} -w -t 30 -l ${dir}/log -o "-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off" start`,
      );
    },
    async stop() {
      asPostgres(`${bin}/pg_ctl -D ${data} -w -m fast stop`);
    },
    async destroy() {
      try {
        await service.stop();
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await service.start();
  return service;
}
