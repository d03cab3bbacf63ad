// @ts-check
import { byId, callJson, el, logout, say } from '/assets/api.js';

/**
 * The admin page (/agent/admin, docs/desk.md): the merchant's agents (create, change, reset a
 * password, disable), groups (create, rename, default, members), settings (switches, limits,
 * visitor attributes, display name…), any agent's Sessions and the audit log (filtered, paged,
 * before → after), through the REST twins of the admin surface. Text only is ever set from
 * answers (never HTML).
 */

const error = byId('admin-error');
const status = byId('admin-status');

const SWITCHES = [
  'voice',
  'sound',
  'upload_file',
  'upload_img',
  'emoji',
  'session_invite_rating',
  'session_invite_resolved',
];
const LIMITS = ['image_max_bytes', 'file_max_bytes', 'video_max_bytes', 'voice_max_bytes'];

/**
 * Calls an admin endpoint; shows its msg on failure and resolves with its data (undefined then).
 * @param {string} path
 * @param {unknown} [json] POSTed as JSON when given
 */
async function call(path, json) {
  try {
    const { body } = await callJson(path, json === undefined ? {} : { method: 'POST', json });
    if (body.code === 0) return body.data;
    say(error, body.msg || 'The request failed.');
  } catch {
    say(error, 'The server could not be reached. Check your connection and try again.');
  }
  return undefined;
}

/** @param {string} text */
function done(text) {
  say(error, '');
  say(status, text);
}

/** @typedef {{ agent_id: string, username: string, nickname: string, level: string, capacity: number | null, group_ids: string[], disabled: boolean, state: string }} AdminAgent */
/** @typedef {{ id: string, name: string, is_default: boolean, member_ids: string[] }} AdminGroup */

/** @type {AdminGroup[]} */
let groups = [];
/** @type {AdminAgent[]} */
let agents = [];

/**
 * A small button.
 * @param {string} text
 * @param {() => unknown} onClick
 * @param {Record<string, unknown>} [attrs]
 */
function button(text, onClick, attrs = {}) {
  const node = el('button', { type: 'button', text, ...attrs });
  node.addEventListener('click', () => void onClick());
  return node;
}

/** @param {AdminAgent} a */
function agentRow(a) {
  const toggle = button(a.disabled ? 'Enable' : 'Disable', async () => {
    const path = a.disabled ? '/agent/admin/agent/enable' : '/agent/admin/agent/disable';
    if (await call(path, { agent_id: a.agent_id })) {
      done(`${a.username} ${a.disabled ? 'enabled' : 'disabled'}.`);
      await Promise.all([loadAgents(), loadAudit()]);
    }
  });
  const group = groups.find((g) => a.group_ids.includes(g.id)) ?? groups.find((g) => g.is_default);
  return el(
    'tr',
    { 'data-agent': a.username },
    el('td', { text: a.username }),
    el('td', { text: a.nickname }),
    el('td', { text: a.level }),
    el('td', { text: a.capacity ?? 'default' }),
    el('td', { text: group?.name ?? '' }),
    el('td', { text: a.disabled ? 'disabled' : a.state }),
    el(
      'td',
      {},
      button('Edit', () => editAgent(a), { 'aria-label': `Edit ${a.username}` }),
      ' ',
      toggle,
      ' ',
      button('Sessions', () => showSessionsOf(a.agent_id), { 'aria-label': `Sessions of ${a.username}` }),
    ),
  );
}

async function loadAgents() {
  const list = await call('/agent/admin/agents');
  if (!list) return;
  agents = list;
  byId('agents').replaceChildren(...agents.map(agentRow));
  const whose = byId('session-agent', HTMLSelectElement);
  const chosen = whose.value;
  whose.replaceChildren(
    el('option', { value: '', text: 'Mine' }),
    ...agents.map((a) => el('option', { value: a.agent_id, text: a.username, selected: a.agent_id === chosen })),
  );
}

/** The group options of a select: the default group first ('' for "the default group"). */
function groupOptions(/** @type {HTMLSelectElement} */ select, /** @type {string} */ chosen) {
  select.replaceChildren(
    el('option', { value: '', text: 'Default group' }),
    ...groups.map((g) => el('option', { value: g.id, text: g.name, selected: g.id === chosen })),
  );
}

/** @type {AdminAgent | undefined} */
let editing;
/** @param {AdminAgent} a */
function editAgent(a) {
  editing = a;
  const form = byId('agent-edit', HTMLFormElement);
  byId('agent-edit-heading').textContent = `Change ${a.username}`;
  byId('edit-nickname', HTMLInputElement).value = a.nickname;
  byId('edit-level', HTMLSelectElement).value = a.level;
  byId('edit-capacity', HTMLInputElement).value = a.capacity === null ? '' : String(a.capacity);
  groupOptions(byId('edit-group', HTMLSelectElement), a.group_ids[0] ?? '');
  byId('edit-password', HTMLInputElement).value = '';
  form.hidden = false;
  byId('edit-nickname', HTMLInputElement).focus();
}

byId('agent-edit', HTMLFormElement).addEventListener('submit', async (event) => {
  event.preventDefault();
  if (!editing) return;
  const capacity = byId('edit-capacity', HTMLInputElement).value.trim();
  const group = byId('edit-group', HTMLSelectElement).value;
  const password = byId('edit-password', HTMLInputElement).value;
  const saved = await call('/agent/admin/agent/update', {
    agent_id: editing.agent_id,
    nickname: byId('edit-nickname', HTMLInputElement).value.trim(),
    level: byId('edit-level', HTMLSelectElement).value,
    capacity: capacity ? Number(capacity) : null,
    group_ids: group ? [group] : [],
    ...(password ? { password } : {}),
  });
  if (!saved) return;
  done(`${saved.username} saved${password ? ' (new password: its sessions ended)' : ''}.`);
  byId('agent-edit', HTMLFormElement).hidden = true;
  editing = undefined;
  await Promise.all([loadAgents(), loadGroups(), loadAudit()]);
});
byId('agent-edit-cancel').addEventListener('click', () => {
  byId('agent-edit', HTMLFormElement).hidden = true;
  editing = undefined;
});

async function loadGroups() {
  const list = await call('/agent/admin/groups');
  if (!list) return;
  groups = list;
  byId('groups').replaceChildren(
    ...groups.map((g) =>
      el(
        'li',
        { 'data-group': g.name },
        `${g.name}${g.is_default ? ' (default)' : ''} — ${g.member_ids.length} member(s) `,
        button('Edit', () => editGroup(g), { 'aria-label': `Edit group ${g.name}` }),
      ),
    ),
  );
  groupOptions(byId('agent-group', HTMLSelectElement), '');
}

/** @type {AdminGroup | undefined} */
let editingGroup;
/** @param {AdminGroup} g */
function editGroup(g) {
  editingGroup = g;
  byId('group-edit-heading').textContent = `Change group ${g.name}`;
  byId('group-edit-name', HTMLInputElement).value = g.name;
  byId('group-edit-default', HTMLInputElement).checked = g.is_default;
  byId('group-edit-members').replaceChildren(
    el('legend', { text: 'Members' }),
    ...agents.map((a) =>
      el(
        'label',
        {},
        el('input', { type: 'checkbox', value: a.agent_id, checked: g.member_ids.includes(a.agent_id) }),
        ` ${a.username}`,
      ),
    ),
  );
  byId('group-edit', HTMLFormElement).hidden = false;
  byId('group-edit-name', HTMLInputElement).focus();
}

byId('group-edit', HTMLFormElement).addEventListener('submit', async (event) => {
  event.preventDefault();
  if (!editingGroup) return;
  const members = [...byId('group-edit-members').querySelectorAll('input:checked')].map(
    (box) => /** @type {HTMLInputElement} */ (box).value,
  );
  const isDefault = byId('group-edit-default', HTMLInputElement).checked;
  const saved = await call('/agent/admin/group/update', {
    id: editingGroup.id,
    name: byId('group-edit-name', HTMLInputElement).value.trim(),
    // Only a change is sent: the default group cannot be "un-defaulted", another one is made default instead.
    ...(isDefault !== editingGroup.is_default ? { is_default: isDefault } : {}),
    member_ids: members,
  });
  if (!saved) return;
  done(`Group ${saved.name} saved.`);
  byId('group-edit', HTMLFormElement).hidden = true;
  editingGroup = undefined;
  await Promise.all([loadGroups(), loadAgents(), loadAudit()]);
});
byId('group-edit-cancel').addEventListener('click', () => {
  byId('group-edit', HTMLFormElement).hidden = true;
  editingGroup = undefined;
});

async function loadSettings() {
  const s = await call('/agent/admin/settings');
  if (!s) return;
  byId('switches').replaceChildren(
    ...SWITCHES.flatMap((key) => {
      const select = el(
        'select',
        { id: `switch-${key}` },
        ...['on', 'off', 'unset'].map((v) => el('option', { value: v, text: v, selected: s.switches[key] === v })),
      );
      return [el('label', { for: `switch-${key}`, text: key }), select];
    }),
  );
  byId('limits').replaceChildren(
    ...LIMITS.flatMap((key) => [
      el('label', { for: `limit-${key}`, text: `${key} (bytes)` }),
      el('input', { id: `limit-${key}`, type: 'number', min: 0, value: s.upload_limits[key] }),
    ]),
  );
  byId('appname', HTMLInputElement).value = s.appname;
  byId('idle-close', HTMLInputElement).value = String(s.idle_close_minutes);
  byId('max-concurrent', HTMLInputElement).value = String(s.max_concurrent_chats);
  byId('history-only-mine', HTMLInputElement).checked = s.history_only_mine;
  byId('attributes').replaceChildren(...s.attributes.map(attributeRow));
}

const ATTRIBUTE_TYPES = ['text', 'number', 'boolean', 'image', 'url'];
let attributeRows = 0;
/**
 * One editable row of a visitor attribute definition.
 * @param {{ key: string, label: string, type: string, editable: boolean }} a
 */
function attributeRow(a) {
  const n = ++attributeRows;
  const row = el(
    'tr',
    { 'data-attribute': a.key },
    el('td', {}, el('input', { 'aria-label': `Attribute ${n} key`, name: 'key', value: a.key, maxlength: 32 })),
    el('td', {}, el('input', { 'aria-label': `Attribute ${n} label`, name: 'label', value: a.label, maxlength: 64 })),
    el(
      'td',
      {},
      el(
        'select',
        { 'aria-label': `Attribute ${n} type`, name: 'type' },
        ...ATTRIBUTE_TYPES.map((t) => el('option', { value: t, text: t, selected: t === a.type })),
      ),
    ),
    el(
      'td',
      {},
      el('input', { 'aria-label': `Attribute ${n} editable`, name: 'editable', type: 'checkbox', checked: a.editable }),
    ),
  );
  row.append(
    el(
      'td',
      {},
      button('Remove', () => row.remove(), { 'aria-label': `Remove attribute ${n}` }),
    ),
  );
  return row;
}
byId('attribute-add').addEventListener('click', () => {
  const row = attributeRow({ key: '', label: '', type: 'text', editable: true });
  byId('attributes').append(row);
  /** @type {HTMLInputElement | null} */ (row.querySelector('input'))?.focus();
});

/** The attribute definitions as the table holds them, in order. */
function attributesOfTable() {
  return [...byId('attributes').querySelectorAll('tr')].map((row) => {
    const field = (/** @type {string} */ name) =>
      /** @type {HTMLInputElement} */ (row.querySelector(`[name="${name}"]`));
    return {
      key: field('key').value.trim(),
      label: field('label').value.trim(),
      type: field('type').value,
      editable: field('editable').checked,
    };
  });
}

/** @param {string} agentId */
async function showSessionsOf(agentId) {
  byId('session-agent', HTMLSelectElement).value = agentId;
  await loadSessions();
  byId('sessions-heading').scrollIntoView({ block: 'nearest' });
}
byId('session-agent').addEventListener('change', () => void loadSessions());

async function loadSessions() {
  const whose = byId('session-agent', HTMLSelectElement).value;
  const list = await call(`/agent/session/list${whose ? `?agent_id=${encodeURIComponent(whose)}` : ''}`);
  if (!list) return;
  byId('sessions').replaceChildren(
    ...list.map((/** @type {any} */ s) => {
      const end = el('button', { type: 'button', text: s.current ? 'End (this one)' : 'End' });
      end.addEventListener('click', async () => {
        if (await call('/agent/session/end', { id: s.id })) {
          if (s.current) return location.assign('/agent/login');
          done('Session ended.');
          await loadSessions();
        }
      });
      const when = s.last_seen_at ? new Date(s.last_seen_at).toLocaleString() : 'unknown';
      const since = s.created_at ? new Date(s.created_at).toLocaleString() : 'unknown';
      return el(
        'li',
        { 'data-session': s.id },
        `${s.device || 'unknown device'} from ${s.address || '?'}, logged in ${since}, last seen ${when} `,
        end,
      );
    }),
  );
  if (list.length === 0) byId('sessions').append(el('li', { text: 'No live sessions.' }));
}

/** A recorded state, short: `{…}` as JSON, `—` for none. */
const shown = (/** @type {unknown} */ v) => {
  const text = v === null || v === undefined ? '—' : JSON.stringify(v);
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
};

/** The end cursor of the last page shown (null: no older page). */
let auditCursor = /** @type {string | null} */ (null);
/** @param {boolean} [more] append the next (older) page instead of starting over */
async function loadAudit(more = false) {
  const query = new URLSearchParams({ first: '20' });
  const action = byId('audit-action', HTMLInputElement).value.trim();
  const target = byId('audit-target', HTMLInputElement).value.trim();
  if (action) query.set('action', action);
  if (target) query.set('target_id', target);
  if (more && auditCursor) query.set('after', auditCursor);
  const page = await call(`/agent/admin/audit?${query}`);
  if (!page) return;
  const rows = page.entries.map((/** @type {any} */ e) =>
    el(
      'tr',
      { 'data-action': e.action },
      el('td', { text: new Date(e.created_at).toLocaleString() }),
      el('td', { text: e.actor.name }),
      el('td', { text: e.action }),
      el('td', { text: `${e.target_type} ${e.target_id}` }),
      el('td', { className: 'change', text: `${shown(e.before)} → ${shown(e.after)}` }),
      el('td', { text: e.client_address ?? '' }),
    ),
  );
  if (more) byId('audit').append(...rows);
  else byId('audit').replaceChildren(...rows);
  auditCursor = page.end_cursor;
  byId('audit-more').hidden = !page.has_next_page;
}
byId('audit-filter', HTMLFormElement).addEventListener('submit', (event) => {
  event.preventDefault();
  void loadAudit();
});
byId('audit-more').addEventListener('click', () => void loadAudit(true));

byId('agent-form', HTMLFormElement).addEventListener('submit', async (event) => {
  event.preventDefault();
  const value = (/** @type {string} */ id) => byId(id, HTMLInputElement).value.trim();
  const capacity = value('agent-capacity');
  const group = byId('agent-group', HTMLSelectElement).value;
  const created = await call('/agent/admin/agent/create', {
    username: value('agent-username'),
    nickname: value('agent-nickname'),
    password: byId('agent-password', HTMLInputElement).value,
    level: byId('agent-level', HTMLSelectElement).value,
    capacity: capacity ? Number(capacity) : null,
    group_ids: group ? [group] : [],
  });
  if (!created) return;
  done(`Agent ${created.username} created.`);
  byId('agent-form', HTMLFormElement).reset();
  await Promise.all([loadAgents(), loadGroups(), loadAudit()]);
});

byId('group-form', HTMLFormElement).addEventListener('submit', async (event) => {
  event.preventDefault();
  const name = byId('group-name', HTMLInputElement);
  const created = await call('/agent/admin/group/create', { name: name.value.trim() });
  if (!created) return;
  done(`Group ${created.name} created.`);
  name.value = '';
  await Promise.all([loadGroups(), loadAudit()]);
});

byId('settings-form', HTMLFormElement).addEventListener('submit', async (event) => {
  event.preventDefault();
  const saved = await call('/agent/admin/settings/update', {
    appname: byId('appname', HTMLInputElement).value.trim(),
    max_concurrent_chats: Number(byId('max-concurrent', HTMLInputElement).value),
    attributes: attributesOfTable(),
    switches: Object.fromEntries(SWITCHES.map((key) => [key, byId(`switch-${key}`, HTMLSelectElement).value])),
    upload_limits: Object.fromEntries(LIMITS.map((key) => [key, Number(byId(`limit-${key}`, HTMLInputElement).value)])),
    idle_close_minutes: Number(byId('idle-close', HTMLInputElement).value),
    history_only_mine: byId('history-only-mine', HTMLInputElement).checked,
  });
  if (!saved) return;
  done('Settings saved.');
  for (const node of document.querySelectorAll('.merchant-name')) node.textContent = saved.appname;
  await Promise.all([loadSettings(), loadAudit()]);
});

byId('logout').addEventListener('click', () => void logout());

// Groups first: the agents' rows name their group.
await loadGroups();
await Promise.all([loadAgents(), loadSettings(), loadSessions(), loadAudit()]);
document.body.dataset.ready = 'true';
