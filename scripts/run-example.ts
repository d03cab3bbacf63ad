import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';

/**
 * CI's end-to-end run of the typed example client (`npm run example:ci`, after
 * `npm run example:build`): starts the real gateway (`node --import tsx src/main.ts`) on a free
 * port with an in-memory database and the demo data, runs the compiled client
 * (examples/typed-client/dist/main.js) against it, stops the server, and exits with the
 * client's exit code.
 */
const CAPTCHA = 'example1';
const INTERNAL_TOKEN = randomBytes(24).toString('hex');

function startServer(): Promise<{ child: ChildProcess; url: string }> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: '0',
    PGLITE_DIR: 'memory://',
    DEMO_SEED: 'on',
    CAPTCHA_TEST_ANSWER: CAPTCHA,
    INTERNAL_API_TOKEN: INTERNAL_TOKEN,
    LOG_LEVEL: 'info',
  };
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env,
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

function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: 'inherit' });
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code ?? 1);
    });
  });
}

const { child, url } = await startServer();
console.log(`gateway listening at ${url}; running the typed example client`);
let code = 1;
try {
  code = await run(process.execPath, ['examples/typed-client/dist/main.js'], {
    ...process.env,
    PARLEY_URL: url,
    PARLEY_CAPTCHA: CAPTCHA,
    INTERNAL_API_TOKEN: INTERNAL_TOKEN,
  });
} finally {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}
console.log(code === 0 ? 'typed example client: passed' : `typed example client: failed (exit ${code})`);
process.exitCode = code;
