// @ts-check
import { loadAudit } from '/assets/admin-audit.js';
import { button, call, done } from '/assets/admin-common.js';
import { loadSessions, showSessionsOf } from '/assets/admin-sessions.js';
import { bindSettingsForm, loadSettings } from '/assets/admin-settings.js';
import { byId, el, logout } from '/assets/api.js';

/**
 * The admin page (/agent/admin, docs/desk.md): the merchant's agents (create, change, reset a
 * password, disable), groups (create, rename, default, members), settings (switches, limits,
 * visitor attributes, display name…), any agent's Sessions and the audit log (filtered, paged,
 * before → after), through the REST twins of the admin surface. Text only is ever set from
 * answers (never HTML). Settings, Sessions and the audit log are admin-settings.js,
 * admin-sessions.js and admin-audit.js; the shared calls and buttons admin-common.js.
 */

/** @typedef {{ agent_id: string, username: string, nickname: string, level: string, capacity: number | null, group_ids: string[], disabled: boolean, state: string }} AdminAgent */
/** @typedef {{ id: string, name: string, is_default: boolean, member_ids: string[] }} AdminGroup */

/** @type {AdminGroup[]} */
let groups = [];
/** @type {AdminAgent[]} */
let agents = [];

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

bindSettingsForm(loadAudit);

byId('logout').addEventListener('click', () => void logout());

// Groups first: the agents' rows name their group.
await loadGroups();
await Promise.all([loadAgents(), loadSettings(), loadSessions(), loadAudit()]);
document.body.dataset.ready = 'true';
