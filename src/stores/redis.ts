import { Redis } from 'ioredis';

/**
 * An ioredis client that fails fast: while Redis is down, commands are refused at once
 * instead of queueing, so requests answer 503 quickly rather than hang.
 */
export function connectRedis(url: string, opts: { keyPrefix?: string; lazy?: boolean } = {}): Redis {
  const client = new Redis(url, {
    keyPrefix: opts.keyPrefix,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 2000,
    connectTimeout: 2000,
    lazyConnect: opts.lazy ?? false,
    // Keep trying to reconnect, never more than a second apart, so recovery needs no restart.
    retryStrategy: (times) => Math.min(times * 100, 1000),
  });
  // Errors surface through the failing commands; an unhandled 'error' event would crash the process.
  client.on('error', () => {});
  return client;
}

/** Resolves once the client is connected (or rejects after `timeoutMs`). */
export function redisReady(client: Redis, timeoutMs = 5000): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`Redis did not become ready within ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const cleanup = () => {
      clearTimeout(timer);
      client.off('ready', onReady);
    };
    client.on('ready', onReady);
  });
}
