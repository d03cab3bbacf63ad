import { type Command, Redis, ReplyError } from 'ioredis';
import { BackendUnavailableError } from '../errors.js';

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
  classifyFailures(client);
  return client;
}

/**
 * Every command of `client` that fails for any reason but a Redis reply (the connection is
 * closed, the stream not writable, a timeout, retries exhausted) rejects with a
 * BackendUnavailableError wrapping the original, so every caller (stores, rate limits, the bus,
 * the Session store, pipelines included) is classified as unavailable by class, never by the
 * message text of ioredis.
 */
function classifyFailures(client: Redis) {
  const send = client.sendCommand.bind(client);
  client.sendCommand = ((command: Command, ...rest: unknown[]) => {
    const reject = command.reject;
    command.reject = (error: Error) =>
      reject(error instanceof ReplyError ? error : new BackendUnavailableError('redis', { cause: error }));
    return (send as (c: Command, ...r: unknown[]) => unknown)(command, ...rest);
  }) as typeof client.sendCommand;
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
