// @ts-check
import { byId, callJson, el, say } from '/assets/api.js';

/** What every part of the admin page shares: its error and status lines, its calls, its buttons. */

const error = byId('admin-error');
const status = byId('admin-status');

/**
 * Calls an admin endpoint; shows its msg on failure and resolves with its data (undefined then).
 * @param {string} path
 * @param {unknown} [json] POSTed as JSON when given
 */
export async function call(path, json) {
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
export function done(text) {
  say(error, '');
  say(status, text);
}

/**
 * A small button.
 * @param {string} text
 * @param {() => unknown} onClick
 * @param {Record<string, unknown>} [attrs]
 */
export function button(text, onClick, attrs = {}) {
  const node = el('button', { type: 'button', text, ...attrs });
  node.addEventListener('click', () => void onClick());
  return node;
}
