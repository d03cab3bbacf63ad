import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * Starts the real gateway (`node --import tsx src/main.ts`) as a child process on a free port
 * with an in-memory database and the demo data, for the CI scripts that drive it from outside
 * (the typed example client, the OpenAPI conformance run). Resolves once it listens.
 */
export function startGatewayProcess(env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const childEnv: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: '0',
    PGLITE_DIR: 'memory://',
    DEMO_SEED: 'on',
    LOG_LEVEL: 'info',
    ...env,
  };
  delete childEnv.DATABASE_URL;
  delete childEnv.REDIS_URL;
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: childEnv,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the server did not start within 60 s')), 60_000);
    child.once('exit', (code) => reject(new Error(`the server exited with code ${code} before listening`)));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      try {
        const entry = JSON.parse(line) as { msg?: string; port?: number };
        if (entry.msg === 'parley listening' && entry.port) {
          clearTimeout(timer);
          resolve({ child, url: `http://127.0.0.1:${entry.port}` });
        }
      } catch {
        // not a log line (e.g. the SMS log driver's console output)
      }
    });
  });
}

/** Stops a child started above and waits for it to exit. */
export async function stopProcess(child: ChildProcess) {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}
