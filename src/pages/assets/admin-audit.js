// @ts-check
import { call } from '/assets/admin-common.js';
import { byId, el } from '/assets/api.js';

/** The admin page's audit log: filtered by action and target, paged (older pages appended), before → after. */

/** A recorded state, short: `{…}` as JSON, `—` for none. */
const shown = (/** @type {unknown} */ v) => {
  const text = v === null || v === undefined ? '—' : JSON.stringify(v);
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
};

/** The end cursor of the last page shown (null: no older page). */
let auditCursor = /** @type {string | null} */ (null);
/** @param {boolean} [more] append the next (older) page instead of starting over */
export async function loadAudit(more = false) {
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
