// @ts-check
import { createParleyClient } from '/assets/vendor/parley-client.js';

/**
 * @typedef {import('/assets/vendor/parley-client.js').ChannelEvent} ChannelEvent
 * @typedef {import('/assets/vendor/parley-client.js').ChannelSubscription} ChannelSubscription
 * @typedef {(
 *   | { state: 'connecting' | 'live' }
 *   | { state: 'resubscribed', since: Record<string, string | null> }
 *   | { state: 'reconnecting', attempt: number }
 *   | { state: 'closed', code?: number, reason?: string }
 * )} PageStatus
 * @typedef {object} OpenChannelsOptions
 * @property {string} url
 * @property {import('/assets/vendor/parley-client.js').Identity} connectionParams
 * @property {string[]} channels
 * @property {(event: ChannelEvent) => void} onEvent
 * @property {(status: PageStatus) => void} onStatus
 * @property {(error: { channel: string, message: string, code?: string }) => void} [onError]
 */

/**
 * The pages' real-time channels, on the Parley client (client/index.js, served at
 * /assets/vendor/parley-client.js): it reconnects with backoff and resubscribes each channel with
 * `since` = the last position it delivered, so the server replays what was missed.
 *
 * `onStatus` receives `{state}`: `connecting`, `live`, `resubscribed` (with `since`, a map of
 * channel to the position resumed after), `closed` (with `code`, then `reconnecting` with
 * `attempt`). `history.gap` reaches `onEvent` like any event (the pages reload their data on it).
 * `onError` receives `{channel, message, code}` when the server refuses a subscription.
 * @param {OpenChannelsOptions} options
 */
export function openChannels({ url, connectionParams, channels, onEvent, onStatus, onError }) {
  /** The open sockets, and a hold that keeps the next connection waiting (the drop hook below). */
  /** @type {Set<WebSocket>} */
  const sockets = new Set();
  /** @type {{ promise: Promise<void>, release: () => void } | undefined} */
  let hold;
  class PageWebSocket extends WebSocket {
    /** @param {string | URL} address @param {string | string[]} [protocols] */
    constructor(address, protocols) {
      super(address, protocols);
      sockets.add(this);
      this.addEventListener('close', () => sockets.delete(this));
    }
  }

  /** @type {Map<string, ChannelSubscription>} */
  const subscriptions = new Map();
  const client = createParleyClient({
    url,
    webSocketImpl: PageWebSocket,
    identity: async () => {
      if (hold) await hold.promise;
      return connectionParams;
    },
    // The page asks the server what happened (logged out, token revoked) on `closed` with the Session-ended or forbidden close code (CLOSE in contract.js).
    onIdentityGone: () => {},
    onStatus(status) {
      if (status.state === 'connecting') onStatus({ state: 'connecting' });
      else if (status.state === 'connected' && !status.resumed) onStatus({ state: 'live' });
      else if (status.state === 'connected') {
        /** @type {Record<string, string | null>} */
        const since = {};
        for (const [name, sub] of subscriptions) since[name] = sub.position() ?? null;
        onStatus({ state: 'resubscribed', since });
      } else if (status.state === 'reconnecting') {
        if (status.close) onStatus({ state: 'closed', code: status.close.code, reason: status.close.reason });
        onStatus({ state: 'reconnecting', attempt: status.attempt });
      } else onStatus({ state: 'closed', code: status.close?.code, reason: status.close?.reason });
    },
  });
  for (const name of channels) {
    subscriptions.set(
      name,
      client.subscribe(name, {
        onEvent,
        onGap: onEvent,
        onError: ({ message, code }) => onError?.({ channel: name, message, code }),
      }),
    );
  }

  return {
    /** Test and debugging hook: closes the socket and keeps the next one waiting until `restoreSocket`. */
    dropSocket() {
      if (!hold) {
        /** @type {() => void} */
        let release = () => {};
        /** @type {Promise<void>} */
        const promise = new Promise((resolve) => {
          release = resolve;
        });
        hold = { promise, release };
      }
      for (const socket of sockets) socket.close(3000, 'Dropped on purpose');
    },
    /** Lets the client reconnect after `dropSocket`. */
    restoreSocket() {
      const held = hold;
      hold = undefined;
      held?.release();
    },
    close() {
      void client.close();
    },
  };
}
