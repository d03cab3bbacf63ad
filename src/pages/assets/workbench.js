import { byId, callJson, el, LOGIN_PAGE, logout, say, setAvatar } from '/assets/api.js';
import { CLOSE, CODES, PATHS } from '/assets/contract.js';
import { describeSince, eventFeed, showConnection } from '/assets/feed.js';
import { openChannels } from '/assets/realtime.js';

const TICKET_ENTRY = PATHS.TICKET_ENTRY;
const main = byId('main');
const loadError = byId('load-error');
const status = byId('connection-status');
const feed = eventFeed(byId('event-feed'));

// Everything the page knows about the agent, merchant and capabilities comes from the last
// /agent/data/get answer: never from the URL or local storage (spec).
let workbench;
let channels;
let reloading;

byId('logout').addEventListener('click', () => {
  channels?.close();
  logout();
});

let leaving = false;
/** Navigates away once: several checks (an event, a socket close) may conclude at the same time. */
function leaveTo(url) {
  if (leaving) return;
  leaving = true;
  location.replace(url);
}

/**
 * Loads the workbench bootstrap. Not logged in → login page; ticket agent (403) → ticket
 * entry; a network failure is retried, it does not end the login.
 */
async function load() {
  let answer;
  try {
    answer = await callJson('/agent/data/get');
  } catch {
    say(loadError, 'The server could not be reached; retrying…');
    setTimeout(load, 3000);
    return;
  }
  const { status: http, body } = answer;
  if (body.code === CODES.UNAUTHENTICATED) return leaveTo(LOGIN_PAGE);
  if (http === 403) return leaveTo(TICKET_ENTRY);
  if (body.code !== 0) {
    // A disabled account or a Session that no longer matches: show it and drop the local state.
    say(loadError, body.msg || 'The workbench could not be loaded.');
    clearState();
    if (body.code === CODES.SESSION_MISMATCH) setTimeout(() => leaveTo(LOGIN_PAGE), 1500);
    return;
  }
  say(loadError, '');
  workbench = body.data;
  render(workbench);
  main.setAttribute('aria-busy', 'false');
  if (!channels) connect(workbench);
}

/** Reloads the bootstrap once for a burst of events that change it. */
function reload() {
  clearTimeout(reloading);
  reloading = setTimeout(load, 250);
}

function clearState() {
  channels?.close();
  channels = undefined;
  workbench = undefined;
  byId('conversation-list').replaceChildren();
  byId('agent-groups').replaceChildren();
  byId('chat-actions').replaceChildren();
  byId('merchant-details').replaceChildren();
  byId('agent-badge').hidden = true;
}

function render(data) {
  const { agent, setting, extensions } = data;
  const levelLabel = extensions?.account_level_options?.[agent.level] ?? agent.level;
  document.title = `${agent.nickname} · ${setting.appname} · Parley`;
  byId('merchant-name').textContent = setting.appname;
  setAvatar(byId('agent-avatar'), agent.avatar);
  byId('agent-nickname').textContent = agent.nickname;
  renderState(agent.state);
  byId('agent-badge').hidden = false;

  renderConversations(data.chatting ?? {});

  byId('agent-groups').replaceChildren(
    ...(data.agent_groups ?? []).map((g) =>
      el('li', { text: g.is_default ? `${g.name} (default)` : g.name, 'data-group': g.id }),
    ),
  );
  const actions = extensions?.chat_actions ?? [];
  byId('chat-actions').replaceChildren(
    ...(actions.length ? actions.map((a) => el('li', { text: a.label ?? a.key })) : [el('li', { text: 'None' })]),
  );
  const flags = Object.entries(extensions?.flags ?? {})
    .filter(([, on]) => on === true)
    .map(([name]) => name);
  byId('merchant-details').replaceChildren(
    ...fact('Merchant', setting.appname),
    ...fact('bid', setting.bid),
    ...fact('Your role', levelLabel),
    ...fact('Features', flags.length ? flags.join(', ') : 'none'),
  );
  const nav = extensions?.nav ?? [];
  const navNode = byId('extension-nav');
  navNode.replaceChildren(
    ...nav
      .filter((item) => typeof item.path === 'string' && item.path.startsWith('/'))
      .map((item) =>
        el('a', {
          href: item.path,
          text: item.label ?? item.key,
          'aria-current': item.path === location.pathname ? 'page' : undefined,
        }),
      ),
  );
  navNode.hidden = nav.length === 0;
}

function renderState(state) {
  const node = byId('agent-state');
  node.textContent = state;
  node.dataset.state = state;
}

const fact = (term, value) => [el('dt', { text: term }), el('dd', { text: value ?? '' })];

/** Pinned conversations first (latest pin first), then the most recent. */
function renderConversations(chatting) {
  const entries = Object.values(chatting).sort(
    (a, b) =>
      Number(b.pinned_at > 0) - Number(a.pinned_at > 0) || b.pinned_at - a.pinned_at || b.timestamp - a.timestamp,
  );
  byId('conversations-empty').hidden = entries.length > 0;
  byId('conversation-list').replaceChildren(
    ...entries.map((c) => {
      const last = Array.isArray(c.items) ? c.items[c.items.length - 1] : undefined;
      const preview = typeof last?.content === 'string' ? last.content : '';
      const unread = Number(c.unread_count) || 0;
      return el(
        'li',
        { className: 'conversation', 'data-uid': c.id, 'data-pinned': c.pinned_at > 0 ? 'true' : 'false' },
        el(
          'div',
          { className: 'conversation-head' },
          el('span', { className: 'conversation-name', text: c.name }),
          c.pinned_at > 0 ? el('span', { className: 'badge pinned', text: 'Pinned' }) : null,
          unread > 0
            ? el('span', { className: 'badge unread', text: String(unread), 'aria-label': `${unread} unread` })
            : null,
        ),
        preview ? el('p', { className: 'conversation-preview', text: preview }) : null,
        el('time', {
          className: 'hint',
          datetime: new Date(c.timestamp * 1000).toISOString(),
          text: new Date(c.timestamp * 1000).toLocaleString(),
        }),
      );
    }),
  );
}

/** Subscribes to `agent-{agent_id}` and `global-{bid}` on the bootstrap's ws_address. */
function connect(data) {
  const names = [`agent-${data.agent.agent_id}`, `global-${data.setting.bid}`];
  byId('feed-channels').textContent = `Channels: ${names.join(', ')}`;
  let dropped = false;
  channels = openChannels({
    url: data.setting.ws_address,
    // The Session cookie identifies the agent on the upgrade request; the token never reaches scripts.
    connectionParams: { appkey: data.setting.appkey },
    channels: names,
    onStatus(s) {
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
    onEvent(event) {
      feed.event(event);
      handle(event);
    },
    onError({ channel, message }) {
      feed.note(`${channel}: ${message}`, 'error');
      load(); // not logged in any more → login page; otherwise the page carries on
    },
    onComplete() {
      load();
    },
  });
}

/** What an event changes on the page besides the feed. */
function handle(event) {
  const data = event.data && typeof event.data === 'object' ? event.data : {};
  if (event.event === 'history.gap') {
    feed.note('Some events were missed; reloading the workbench.', 'gap');
    reload();
  } else if (event.event === 'session.ended') {
    load(); // this Session or another of the agent's: ask the server which
  } else if (/^(conversation|message|chat)\./.test(event.event)) {
    reload();
  } else if (workbench && data.agent_id === workbench.agent.agent_id && typeof data.state === 'string') {
    renderState(data.state);
  }
}

window.__parley = {
  /** Test and debugging hooks: drop the real-time socket and keep it down, then let it reconnect. */
  dropSocket: () => channels?.dropSocket(),
  restoreSocket: () => channels?.restoreSocket(),
};

load();
