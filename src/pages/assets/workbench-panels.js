// @ts-check
import { byId, el, setAvatar } from '/assets/api.js';
import { unreadTotal } from '/assets/conversations.js';

/**
 * The workbench's side panels, drawn from the last `/agent/data/get` answer only: the merchant
 * facts, agent groups, chat actions and extension links; and the transfer targets of the open
 * conversation (agents seen online on `global-{bid}`).
 */

/** @param {string} term @param {unknown} value */
const fact = (term, value) => [el('dt', { text: term }), el('dd', { text: value ?? '' })];

/** The Merchant panel and the extension navigation. @param {any} data the bootstrap's `data` */
export function renderMerchantPanel(data) {
  const { agent, setting, extensions } = data;
  const levelLabel = extensions?.account_level_options?.[agent.level] ?? agent.level;
  byId('agent-groups').replaceChildren(
    ...(data.agent_groups ?? []).map((/** @type {any} */ g) =>
      el('li', { text: g.is_default ? `${g.name} (default)` : g.name, 'data-group': g.id }),
    ),
  );
  /** @type {any[]} */
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
  /** @type {any[]} */
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

/**
 * The transfer select: the queue, then every other agent seen online; the choice is kept when
 * that agent is still there.
 * @param {HTMLSelectElement} select
 * @param {Map<string, { nickname: string, state: string }>} agentsOnline
 * @param {string | undefined} me the agent's own id
 */
export function renderTransferTargets(select, agentsOnline, me) {
  const selected = select.value;
  select.replaceChildren(
    el('option', { value: '', text: 'the queue' }),
    ...[...agentsOnline]
      .filter(([id, a]) => id !== me && a.state === 'online')
      .map(([id, a]) => el('option', { value: id, text: a.nickname })),
  );
  if ([...select.options].some((o) => o.value === selected)) select.value = selected;
}

/** The page title and the agent badge (avatar, nickname, state). @param {any} data the bootstrap's `data` */
export function renderAgentBadge(data) {
  const { agent, setting } = data;
  const unread = unreadTotal(Object.values(data.chatting ?? {}));
  document.title = `${unread > 0 ? `(${unread}) ` : ''}${agent.nickname} · ${setting.appname} · Parley`;
  byId('merchant-name').textContent = setting.appname;
  setAvatar(byId('agent-avatar', HTMLImageElement), agent.avatar);
  byId('agent-nickname').textContent = agent.nickname;
  renderAgentState(agent.state);
  byId('agent-badge').hidden = false;
}

/** The agent's own state in the badge. */
export function renderAgentState(/** @type {string} */ state) {
  const node = byId('agent-state');
  node.textContent = state;
  node.dataset.state = state;
}
