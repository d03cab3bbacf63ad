// @ts-check
import { call, done } from '/assets/admin-common.js';
import { byId, el } from '/assets/api.js';

/** The admin page's Sessions: any agent's live Sessions (the chosen one, or mine), each with End. */

/** @param {string} agentId */
export async function showSessionsOf(agentId) {
  byId('session-agent', HTMLSelectElement).value = agentId;
  await loadSessions();
  byId('sessions-heading').scrollIntoView({ block: 'nearest' });
}
byId('session-agent').addEventListener('change', () => void loadSessions());

/** The latest list asked for: an earlier answer arriving after it (the page's first load, say) is dropped. */
let latest = 0;

export async function loadSessions() {
  const request = ++latest;
  const whose = byId('session-agent', HTMLSelectElement).value;
  const list = await call(`/agent/session/list${whose ? `?agent_id=${encodeURIComponent(whose)}` : ''}`);
  if (!list || request !== latest) return;
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
