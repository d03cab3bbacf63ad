import { createParleyClient } from '/assets/vendor/parley-client.js';

/**
 * The pages' real-time channels, on the Parley client (client/index.js, served at
 * /assets/vendor/parley-client.js): it reconnects with backoff and resubscribes each channel with
 * `since` = the last position it delivered, so the server replays what was missed.
 *
 * `onStatus` receives `{state}`: `connecting`, `live`, `resubscribed` (with `since`, a map of
 * channel to the position resumed after), `closed` (with `code`, then `reconnecting` with
 * `attempt`). `history.gap` reaches `onEvent` like any event (the pages reload their data on it).
 * `onError` receives `{channel, message, code}` when the server refuses a subscription.
 */
export function openChannels({ url, connectionParams, channels, onEvent, onStatus, onError }) {
  /** The open sockets, and a hold that keeps the next connection waiting (the drop hook below). */
  const sockets = new Set();
  let hold;
  class PageWebSocket extends WebSocket {
    constructor(address, protocols) {
      super(address, protocols);
      sockets.add(this);
      this.addEventListener('close', () => sockets.delete(this));
    }
  }

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
        let release;
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
