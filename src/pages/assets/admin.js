// @ts-check
import { byId, callJson, el, logout, say } from '/assets/api.js';

/**
 * The admin page (/agent/admin, docs/desk.md): the merchant's agents, groups, settings, the
 * admin's Sessions and the audit log, through the REST twins of the admin surface. Text only is
 * ever set from answers (never HTML).
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

/** @type {{ id: string, name: string }[]} */
let groups = [];

async function loadAgents() {
  const list = await call('/agent/admin/agents');
  if (!list) return;
  const body = byId('agents');
  body.replaceChildren(
    ...list.map((/** @type {any} */ a) => {
      const toggle = el('button', { type: 'button', text: a.disabled ? 'Enable' : 'Disable' });
      toggle.addEventListener('click', async () => {
        const path = a.disabled ? '/agent/admin/agent/enable' : '/agent/admin/agent/disable';
        if (await call(path, { agent_id: a.agent_id })) {
          done(`${a.username} ${a.disabled ? 'enabled' : 'disabled'}.`);
          await Promise.all([loadAgents(), loadAudit()]);
        }
      });
      return el(
        'tr',
        { 'data-agent': a.username },
        el('td', { text: a.username }),
        el('td', { text: a.nickname }),
        el('td', { text: a.level }),
        el('td', { text: a.capacity ?? 'default' }),
        el('td', { text: a.disabled ? 'disabled' : a.state }),
        el('td', {}, toggle),
      );
    }),
  );
}

async function loadGroups() {
  const list = await call('/agent/admin/groups');
  if (!list) return;
  groups = list;
  byId('groups').replaceChildren(
    ...list.map((/** @type {any} */ g) =>
      el('li', { text: `${g.name}${g.is_default ? ' (default)' : ''} — ${g.member_ids.length} member(s)` }),
    ),
  );
  const select = byId('agent-group', HTMLSelectElement);
  select.replaceChildren(
    el('option', { value: '', text: 'Default group' }),
    ...groups.map((g) => el('option', { value: g.id, text: g.name })),
  );
}

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
  byId('idle-close', HTMLInputElement).value = String(s.idle_close_minutes);
  byId('history-only-mine', HTMLInputElement).checked = s.history_only_mine;
}

async function loadSessions() {
  const list = await call('/agent/session/list');
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
      return el('li', {}, `${s.device || 'unknown device'} from ${s.address || '?'}, last seen ${when} `, end);
    }),
  );
}

async function loadAudit() {
  const page = await call('/agent/admin/audit?first=20');
  if (!page) return;
  byId('audit').replaceChildren(
    ...page.entries.map((/** @type {any} */ e) =>
      el(
        'tr',
        {},
        el('td', { text: new Date(e.created_at).toLocaleString() }),
        el('td', { text: e.actor.name }),
        el('td', { text: e.action }),
        el('td', { text: `${e.target_type} ${e.target_id}` }),
        el('td', { text: e.client_address ?? '' }),
      ),
    ),
  );
}

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
    switches: Object.fromEntries(SWITCHES.map((key) => [key, byId(`switch-${key}`, HTMLSelectElement).value])),
    upload_limits: Object.fromEntries(LIMITS.map((key) => [key, Number(byId(`limit-${key}`, HTMLInputElement).value)])),
    idle_close_minutes: Number(byId('idle-close', HTMLInputElement).value),
    history_only_mine: byId('history-only-mine', HTMLInputElement).checked,
  });
  if (!saved) return;
  done('Settings saved.');
  await Promise.all([loadSettings(), loadAudit()]);
});

byId('logout').addEventListener('click', () => void logout());

await Promise.all([loadAgents(), loadGroups(), loadSettings(), loadSessions(), loadAudit()]);
document.body.dataset.ready = 'true';
