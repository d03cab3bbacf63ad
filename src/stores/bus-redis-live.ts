import type { Redis } from 'ioredis';
import type { ChannelEvent, LocalHubs } from './bus.js';

/**
 * The Redis bus's names and wire format (bus-redis.ts): keys go through the client's keyPrefix;
 * pub/sub topics are prefixed here (the subscriber connection has no keyPrefix, and topics are
 * not keys).
 */
export interface RedisBusNames {
  streamKey(channel: string): string;
  floorKey(channel: string): string;
  topic(channel: string): string;
}

export function redisBusNames(prefix: string): RedisBusNames {
  return {
    streamKey: (channel) => `stream:${channel}`,
    floorKey: (channel) => `stream-floor:${channel}`,
    topic: (channel) => `${prefix}events:${channel}`,
  };
}

/** An event as stored in a stream entry and published: `{event, data, at}`; the id is Redis's. */
function decode(channel: string, id: string, json: string): ChannelEvent {
  const { event, data, at } = JSON.parse(json) as { event: string; data: unknown; at: string };
  return { id, channel, event, data, at };
}

/** XRANGE replies (`[id, ['e', json]]`) as events. */
export const fromStream = (channel: string, entries: [string, string[]][]) =>
  entries.map(([id, fields]) => decode(channel, id, fields[1] ?? '{}'));

/**
 * Live delivery: pub/sub messages (`id json` on the channel's topic) to the local hubs. Returns
 * how to stop listening, for the bus's close.
 */
export function followLiveEvents(
  opts: { redis: Redis; subscriber: Redis; prefix: string; names: RedisBusNames },
  { deliver, cursors }: LocalHubs,
): () => void {
  const { redis, subscriber, prefix, names } = opts;
  const topicPrefix = `${prefix}events:`;
  const onMessage = (t: string, message: string) => {
    if (!t.startsWith(topicPrefix)) return;
    const space = message.indexOf(' ');
    deliver(decode(t.slice(topicPrefix.length), message.slice(0, space), message.slice(space + 1)));
  };
  // While the subscriber connection is down pub/sub delivers nothing: when it is back, fetch
  // the missed events from the streams (the hubs drop any duplicate).
  let downSince: number | undefined;
  const onClose = () => {
    downSince ??= Date.now();
  };
  const onReady = async () => {
    if (downSince === undefined) return;
    const fallback = `${downSince - 2000}-0`;
    downSince = undefined;
    for (const [channel, lastId] of cursors()) {
      const after = lastId ?? fallback;
      const entries = await redis.xrange(names.streamKey(channel), `(${after}`, '+').catch(() => []);
      for (const e of fromStream(channel, entries)) deliver(e);
    }
  };
  subscriber.on('message', onMessage);
  subscriber.on('close', onClose);
  subscriber.on('ready', onReady);
  return () => {
    subscriber.off('message', onMessage);
    subscriber.off('close', onClose);
    subscriber.off('ready', onReady);
  };
}
