import { buildDeps } from '../compose.js';
import { ConfigError, loadConfig } from '../config.js';
import { createLogger } from '../log.js';
import { loadDemoData } from '../resolvers/demo.js';

/** `npm run seed`: migrates and (re)loads the demo data, its conversations included; idempotent. */
try {
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  const deps = await buildDeps(config, log);
  await deps.database.migrate();
  await loadDemoData(deps);
  await deps.close();
  console.log('demo data loaded');
} catch (error) {
  console.error(error instanceof ConfigError ? error.message : `seed failed: ${(error as Error).message}`);
  process.exit(1);
}
