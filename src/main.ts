import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';

/** Reads the environment, starts the gateway and stops it gracefully on SIGTERM/SIGINT. */
try {
  const app = await buildApp(loadConfig());
  await app.start();
  let signals = 0;
  const shutdown = (signal: string) => {
    if (++signals > 1) process.exit(1); // a second signal: stop waiting
    app.deps.log.info({ signal }, 'shutting down');
    app.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
} catch (error) {
  console.error(error instanceof ConfigError ? error.message : `parley failed to start: ${(error as Error).message}`);
  process.exit(1);
}
