import { promisify } from 'node:util';
import { buildDeps } from '../compose.js';
import { ConfigError, loadConfig } from '../config.js';
import { createSessionLayer } from '../http/session.js';
import { createLogger } from '../log.js';
import type { SessionTerminator } from '../resolvers/admin.js';
import { type CliIO, NEEDS_NO_DATABASE, runCommand, usage } from './commands.js';

/**
 * The admin CLI: reads the environment like the gateway, opens the same database (migrating it
 * when needed) and Redis, runs one command and closes them. Resolves with the exit code.
 */
export async function runCli(argv: string[], env: NodeJS.ProcessEnv, io: CliIO): Promise<number> {
  const [command] = argv;
  if (!command || command === 'help' || command === '--help') {
    io.out(usage());
    return 0;
  }
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      io.err(error.message);
      return 2;
    }
    throw error;
  }
  // Logs go to stderr: stdout carries only the command's JSON result.
  const log = createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel, process.stderr);
  if (NEEDS_NO_DATABASE(command, argv)) {
    // Publishing through a running gateway opens nothing here (an embedded database may be in use by it).
    return runCommand({ deps: undefined as never, sessions: noSessions, env, io }, argv);
  }
  const deps = await buildDeps(config, log);
  try {
    await deps.database.migrate();
    const store = createSessionLayer(config, deps.redis).store;
    const sessions: SessionTerminator = {
      destroy: (sid) => promisify<string, void>(store.destroy.bind(store))(sid),
    };
    return await runCommand({ deps, sessions, env, io }, argv);
  } finally {
    await deps.close();
  }
}

const noSessions: SessionTerminator = { destroy: async () => {} };
