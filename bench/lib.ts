import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';

/** Benchmark plumbing: pinned child processes, autocannon runs, interleaved A/B rounds. */

export const SERVER_CORE = '0';
export const LOAD_CORE = '1';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface Proc {
  child: ChildProcess;
  port: number;
  url: string;
  /** Resident memory of the process in bytes (from /proc). */
  rss(): number;
  stop(): Promise<void>;
}

const children = new Set<ChildProcess>();
/** Every child is killed when the runner exits, whatever happens. */
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/**
 * Starts `node --import tsx <script>` pinned to the server core, and waits for its port.
 * `env.BENCH_NODE_ARGS` adds options node refuses in NODE_OPTIONS (e.g. `--cpu-prof`).
 */
export async function startPinned(script: string, env: Record<string, string>, readyPath = '/healthz'): Promise<Proc> {
  const port = await freePort();
  const nodeArgs = env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  // Compiled JavaScript (the gateway's production build) runs as it is; TypeScript through tsx.
  const loader = script.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child = spawn('taskset', ['-c', SERVER_CORE, process.execPath, ...nodeArgs, ...loader, script], {
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.add(child);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${script} exited with ${child.exitCode}`);
    try {
      if ((await fetch(url + readyPath)).ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${script} did not start`);
    await sleep(200);
  }
  return {
    child,
    port,
    url,
    rss: () => readRss(child.pid as number),
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(8000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
      children.delete(child);
    },
  };
}

export interface Gateway {
  child: ChildProcess;
  url: string;
  stop(): Promise<void>;
}

/**
 * The gateway as its own process on the embedded defaults (PGlite in memory, the demo seed,
 * in-process stores), not pinned: the scripts that measure what one tenant costs another.
 * `memoryProbe` preloads `bench/memory-probe.mjs` and opens the IPC channel it answers on.
 */
export async function startEmbeddedGateway(
  env: Record<string, string>,
  opts: { memoryProbe?: boolean /** e.g. `--cpu-prof` */; nodeArgs?: string[] } = {},
): Promise<Gateway> {
  const port = await freePort();
  const probe = opts.memoryProbe ? ['--import', './bench/memory-probe.mjs'] : [];
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), ...probe, '--import', 'tsx', 'src/main.ts'], {
    env: {
      ...process.env,
      NODE_ENV: 'test',
      PORT: String(port),
      HOST: '127.0.0.1',
      PGLITE_DIR: 'memory://',
      DEMO_SEED: 'on',
      LOG_LEVEL: 'warn',
      DATABASE_URL: '',
      REDIS_URL: '',
      ...env,
    },
    stdio: opts.memoryProbe ? ['ignore', 'inherit', 'inherit', 'ipc'] : ['ignore', 'inherit', 'inherit'],
  });
  children.add(child);
  const gateway: Gateway = {
    child,
    url: `http://127.0.0.1:${port}`,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      children.delete(child);
    },
  };
  const deadline = Date.now() + 180_000;
  while (
    !(await fetch(`${gateway.url}/healthz`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (Date.now() > deadline || child.exitCode !== null) {
      await gateway.stop();
      throw new Error('the gateway did not start');
    }
    await sleep(200);
  }
  return gateway;
}

/** A fresh visitor token of the merchant `appkey` (`POST /visitor/token`). */
export async function visitorToken(url: string, appkey: string): Promise<string> {
  const res = await fetch(`${url}/visitor/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ appkey }),
  });
  const body = (await res.json()) as { code: number; data: { token: string } };
  if (body.code !== 0) throw new Error(`visitor token refused: ${JSON.stringify(body)}`);
  return body.data.token;
}

/** The value below which a share `p` (0–1) of `values` lies (nearest rank). */
export const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))] ?? 0;
};

/** RSS of a process: the node child of `taskset` has the same pid (taskset execs). */
export function readRss(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    return kb * 1024;
  } catch {
    return 0;
  }
}

/** CPU time (user+system, seconds) a process has used, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  /** 2xx answers the spec's `check` refused (e.g. a login answered with an error code). */
  refused: number;
  /** The first few non-2xx or refused answers, status and body, for the failure message. */
  samples: string[];
  /** Share of the window the server's core was busy (CPU seconds / wall seconds). */
  cpu: number;
  /** The server's resident memory at the end of the window, in bytes. */
  rss?: number;
  /**
   * The server's CPU time (user + system) per completed request, in µs: unlike a rate, it holds
   * on a busy machine, where a window's share of the core depends on everyone else's load.
   */
  cpuPerRequest?: number;
}

export interface LoadSpec {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /** Per-request hook (e.g. a different cookie each time). */
  setupRequest?: (req: Record<string, unknown>) => Record<string, unknown>;
  /** Whether a 2xx answer did the work measured (else it counts as `refused` and fails the window). */
  check?: (body: string) => boolean;
  connections?: number;
  seconds: number;
  /** Process whose CPU use is measured during the window. */
  pid?: number;
}

export async function load(spec: LoadSpec): Promise<LoadResult> {
  const cpuBefore = spec.pid ? cpuSeconds(spec.pid) : 0;
  const started = Date.now();
  let refused = 0;
  const samples: string[] = [];
  const onResponse = (status: number, body: string) => {
    const ok = status >= 200 && status < 300;
    if (ok && (!spec.check || spec.check(body))) return;
    if (ok) refused++;
    if (samples.length < 5) samples.push(`${status} ${body.slice(0, 200)}`);
  };
  const result = await autocannon({
    url: spec.url,
    method: spec.method ?? 'GET',
    headers: spec.headers,
    body: spec.body,
    connections: spec.connections ?? 50,
    pipelining: 1,
    duration: spec.seconds,
    requests: [spec.setupRequest ? { setupRequest: spec.setupRequest as never, onResponse } : { onResponse }],
  });
  const wall = Math.max(spec.seconds, (Date.now() - started) / 1000);
  return {
    // Completed requests over the window (per-second averages read 0 when answers take > 1 s).
    rps: result.requests.total / wall,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    refused,
    samples,
    cpu: spec.pid ? (cpuSeconds(spec.pid) - cpuBefore) / wall : 0,
    cpuPerRequest:
      spec.pid && result.requests.total
        ? ((cpuSeconds(spec.pid) - cpuBefore) * 1e6) / result.requests.total
        : undefined,
  };
}

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

export interface Comparison {
  baseline: LoadResult[];
  scenario: LoadResult[];
  ratio: number;
}

/**
 * Runs baseline and scenario alternately (A B A B …) after one warm-up each, and reports the
 * median of the per-round ratios, so drift in the machine's load affects both sides alike.
 */
export async function interleave(
  baseline: (seconds: number) => Promise<LoadResult>,
  scenario: (seconds: number) => Promise<LoadResult>,
  opts: { rounds: number; seconds: number; warmup: number },
): Promise<Comparison> {
  await baseline(opts.warmup);
  await scenario(opts.warmup);
  const a: LoadResult[] = [];
  const b: LoadResult[] = [];
  for (let i = 0; i < opts.rounds; i++) {
    a.push(await baseline(opts.seconds));
    b.push(await scenario(opts.seconds));
  }
  for (const [side, runs] of [
    ['baseline', a],
    ['scenario', b],
  ] as const) {
    for (const r of runs) {
      if (r.errors || r.non2xx || r.refused)
        throw new Error(
          `a measured ${side} window had ${r.errors} errors, ${r.non2xx} non-2xx and ${r.refused} refused answers, e.g.:\n${r.samples.join('\n')}`,
        );
    }
  }
  return { baseline: a, scenario: b, ratio: median(b.map((r, i) => r.rps / (a[i] as LoadResult).rps)) };
}

export const summarize = (runs: LoadResult[]) => ({
  rps: median(runs.map((r) => r.rps)),
  p50: median(runs.map((r) => r.p50)),
  p99: median(runs.map((r) => r.p99)),
  cpu: median(runs.map((r) => r.cpu)),
  rss: median(runs.map((r) => r.rss ?? 0)),
  cpuPerRequest: median(runs.map((r) => r.cpuPerRequest ?? 0)),
});
