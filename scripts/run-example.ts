import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { startGatewayProcess, stopProcess } from './gateway-process.js';

/**
 * CI's end-to-end run of the typed example client (`npm run example:ci`, after
 * `npm run example:build`): starts the real gateway (`node --import tsx src/main.ts`) on a free
 * port with an in-memory database and the demo data, runs the compiled client
 * (examples/typed-client/dist/main.js) against it, stops the server, and exits with the
 * client's exit code.
 */
const CAPTCHA = 'example1';
const INTERNAL_TOKEN = randomBytes(24).toString('hex');

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

const { child, url } = await startGatewayProcess({ CAPTCHA_TEST_ANSWER: CAPTCHA, INTERNAL_API_TOKEN: INTERNAL_TOKEN });
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
  await stopProcess(child);
}
console.log(code === 0 ? 'typed example client: passed' : `typed example client: failed (exit ${code})`);
process.exitCode = code;
