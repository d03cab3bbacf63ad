import { runCli } from './cli/main.js';

/** `npm run cli -- <command> …`: the operator's day-one tasks (see `npm run cli -- help`). */
try {
  process.exitCode = await runCli(process.argv.slice(2), process.env, {
    out: (text) => process.stdout.write(`${text}\n`),
    err: (text) => process.stderr.write(`${text}\n`),
  });
} catch (error) {
  process.stderr.write(`cli failed: ${(error as Error).message}\n`);
  process.exitCode = 1;
}
