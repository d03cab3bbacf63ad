// @ts-check
import { byId } from '/assets/api.js';
import { CLOSE } from '/assets/contract.js';
import { describeSince, showConnection } from '/assets/feed.js';
import { openChannels } from '/assets/realtime.js';

/**
 * The workbench's real-time connection: `agent-{agent_id}` and `global-{bid}` on the bootstrap's
 * ws_address, its status line and the feed's notes on drops and resubscriptions.
 */

/**
 * Subscribes to `agent-{agent_id}` and `global-{bid}` on the bootstrap's ws_address.
 * @param {any} data the bootstrap's `data`
 * @param {{
 *   status: HTMLElement,
 *   feed: ReturnType<typeof import('/assets/feed.js').eventFeed>,
 *   load: () => unknown,
 *   reload: () => void,
 *   handle: (event: any) => void,
 * }} page
 */
export function connectWorkbench(data, { status, feed, load, reload, handle }) {
  const names = [`agent-${data.agent.agent_id}`, `global-${data.setting.bid}`];
  byId('feed-channels').textContent = `Channels: ${names.join(', ')}`;
  let dropped = false;
  return openChannels({
    url: data.setting.ws_address,
    // The Session cookie identifies the agent on the upgrade request; the token never reaches scripts.
    connectionParams: { appkey: data.setting.appkey },
    channels: names,
    onStatus(/** @type {any} */ s) {
      showConnection(status, s);
      if (s.state === 'closed' && !dropped) {
        dropped = true;
        feed.note('Connection lost; reconnecting.', 'disconnected');
        // SessionEnded/Forbidden: the server no longer accepts this Session; find out whether we are logged out.
        if (s.code === CLOSE.SessionEnded || s.code === CLOSE.Forbidden) load();
      }
      if (s.state === 'resubscribed') {
        dropped = false;
        feed.note(`Reconnected: resubscribed to ${describeSince(s.since)}.`, 'resubscribed');
      }
      if (s.state === 'live') dropped = false;
      // Connecting changes the agent's own state (presence): show the state the server now has.
      if (s.state === 'live' || s.state === 'resubscribed') reload();
    },
    onEvent(/** @type {any} */ event) {
      feed.event(event);
      handle(event);
    },
    onError(/** @type {{ channel: string, message: string }} */ { channel, message }) {
      feed.note(`${channel}: ${message}`, 'error');
      load(); // not logged in any more → login page; otherwise the page carries on
    },
  });
}
