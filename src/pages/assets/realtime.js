import { createClient } from '/assets/vendor/graphql-ws/client.js';

const CHANNEL_SUBSCRIPTION = `subscription Channel($name: String!, $since: String) {
  channel(name: $name, since: $since) { id position channel event data at }
}`;

/** Event ids are `<ms>-<seq>`: compared as numbers, part by part. */
export function compareEventIds(a, b) {
  const [am = 0n, as = 0n] = String(a).split('-').map(BigInt);
  const [bm = 0n, bs = 0n] = String(b).split('-').map(BigInt);
  if (am !== bm) return am < bm ? -1 : 1;
  if (as !== bs) return as < bs ? -1 : 1;
  return 0;
}

/**
 * Subscribes to `channels` over graphql-ws and keeps them alive across network drops: the
 * client reconnects with backoff, and each channel is resubscribed with `since` = the last event
 * position it delivered, so the server replays what was missed (or sends `history.gap`).
 *
 * `onStatus` receives `{state}`: `connecting`, `live`, `resubscribed` (with `since`, a map of
 * channel to the position resumed after), `reconnecting` (with `attempt`) or `closed` (with `code`).
 * `onError` receives `{channel, message, code}` when the server refuses or ends a subscription
 * with an error; `onComplete` a channel whose subscription the server ended.
 */
export function openChannels({ url, connectionParams, channels, onEvent, onStatus, onError, onComplete }) {
  let socket;
  let hold;
  let closedByUs = false;
  const payloads = new Map(
    channels.map((name) => [name, { query: CHANNEL_SUBSCRIPTION, variables: { name, since: null } }]),
  );

  const client = createClient({
    url,
    connectionParams,
    retryAttempts: Number.POSITIVE_INFINITY,
    shouldRetry: () => true,
    retryWait: async (retries) => {
      onStatus({ state: 'reconnecting', attempt: retries + 1 });
      if (hold) await hold.promise;
      const backoff = Math.min(500 * 2 ** retries, 15_000) + Math.floor(Math.random() * 250);
      await new Promise((resolve) => setTimeout(resolve, backoff));
    },
    on: {
      connecting: () => onStatus({ state: 'connecting' }),
      opened: (opened) => {
        socket = opened;
      },
      connected: (_socket, _payload, wasRetry) => {
        if (!wasRetry) return onStatus({ state: 'live' });
        // The subscribe messages about to be re-sent carry these ids as `since`.
        const since = {};
        for (const [name, payload] of payloads) since[name] = payload.variables.since;
        onStatus({ state: 'resubscribed', since });
      },
      closed: (event) => {
        socket = undefined;
        onStatus({ state: 'closed', code: event?.code, reason: event?.reason });
      },
    },
  });

  const disposers = [...payloads].map(([name, payload]) =>
    // graphql-ws re-sends this same payload object after every reconnect, so keeping
    // `variables.since` current is what makes the resubscription resume where we left off.
    client.subscribe(payload, {
      next(result) {
        if (result.errors?.length) {
          const [first] = result.errors;
          onError?.({ channel: name, message: first.message, code: first.extensions?.code });
          return;
        }
        const event = result.data?.channel;
        if (!event) return;
        const last = payload.variables.since;
        if (last && compareEventIds(event.position, last) <= 0) return; // already shown
        payload.variables.since = event.position;
        // `subscribed` only gives the position to resume from, even before any event arrives.
        if (event.event !== 'subscribed') onEvent(event);
      },
      error(error) {
        const first = Array.isArray(error) ? error[0] : error;
        const message = first?.message ?? (first?.code ? `Connection closed (${first.code})` : 'Subscription failed');
        onError?.({ channel: name, message, code: first?.extensions?.code ?? first?.code });
      },
      complete() {
        if (!closedByUs) onComplete?.(name);
      },
    }),
  );

  return {
    /** Test and debugging hook: closes the socket and keeps it down until `restoreSocket`. */
    dropSocket() {
      if (!hold) {
        let release;
        const promise = new Promise((resolve) => {
          release = resolve;
        });
        hold = { promise, release };
      }
      socket?.close(3000, 'Dropped on purpose');
    },
    /** Lets the client reconnect after `dropSocket`. */
    restoreSocket() {
      const held = hold;
      hold = undefined;
      held?.release();
    },
    close() {
      closedByUs = true;
      for (const dispose of disposers) dispose();
      void client.dispose();
    },
  };
}
