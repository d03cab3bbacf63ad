// @ts-check
import { button, call, done } from '/assets/admin-common.js';
import { byId, el } from '/assets/api.js';
import { SETTINGS } from '/assets/contract.js';

/**
 * The admin page's settings: switches, upload limits, visitor attribute definitions, display
 * name, idle close, concurrent chats, history visibility.
 */

export async function loadSettings() {
  const s = await call('/agent/admin/settings');
  if (!s) return;
  byId('switches').replaceChildren(
    ...SETTINGS.SWITCHES.flatMap((key) => {
      const select = el(
        'select',
        { id: `switch-${key}` },
        ...SETTINGS.SWITCH_VALUES.map((v) => el('option', { value: v, text: v, selected: s.switches[key] === v })),
      );
      return [el('label', { for: `switch-${key}`, text: key }), select];
    }),
  );
  byId('limits').replaceChildren(
    ...SETTINGS.UPLOAD_LIMITS.flatMap((key) => [
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
        ...SETTINGS.ATTRIBUTE_TYPES.map((t) => el('option', { value: t, text: t, selected: t === a.type })),
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

/**
 * Saves the settings form; then reloads the settings and runs `afterSave` (the audit log).
 * @param {() => Promise<unknown>} afterSave
 */
export function bindSettingsForm(afterSave) {
  byId('settings-form', HTMLFormElement).addEventListener('submit', async (event) => {
    event.preventDefault();
    const saved = await call('/agent/admin/settings/update', {
      appname: byId('appname', HTMLInputElement).value.trim(),
      max_concurrent_chats: Number(byId('max-concurrent', HTMLInputElement).value),
      attributes: attributesOfTable(),
      switches: Object.fromEntries(
        SETTINGS.SWITCHES.map((key) => [key, byId(`switch-${key}`, HTMLSelectElement).value]),
      ),
      upload_limits: Object.fromEntries(
        SETTINGS.UPLOAD_LIMITS.map((key) => [key, Number(byId(`limit-${key}`, HTMLInputElement).value)]),
      ),
      idle_close_minutes: Number(byId('idle-close', HTMLInputElement).value),
      history_only_mine: byId('history-only-mine', HTMLInputElement).checked,
    });
    if (!saved) return;
    done('Settings saved.');
    for (const node of document.querySelectorAll('.merchant-name')) node.textContent = saved.appname;
    await Promise.all([loadSettings(), afterSave()]);
  });
}
