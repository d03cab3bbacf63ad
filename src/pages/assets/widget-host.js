// @ts-check
/**
 * The panel's side of the conversation with the page that embeds it (the loader, /widget.js).
 * The loader names the host page's origin in the frame's address (`host=`); the panel believes
 * it only when the browser agrees (`location.ancestorOrigins`, where the browser has it), posts
 * only to that origin, and reads only messages whose source is its parent window and whose
 * origin is that origin. Every message is `{ parley: 1, type, … }`:
 *
 * - panel → loader: `ready`, `unread` (`count`), `close` (the visitor minimised the panel);
 * - loader → panel: `visibility` (`open`: whether the panel is shown).
 *
 * Opened on its own (no parent: `/widget/frame?appkey=…` as a page), the panel is always open.
 */

const params = new URLSearchParams(location.search);
const embedded = window.parent !== window;

/** The host page's origin, or null when not embedded or when the browser says otherwise. */
const hostOrigin = (() => {
  if (!embedded) return null;
  const claimed = params.get('host');
  if (!claimed) return null;
  let origin;
  try {
    origin = new URL(claimed).origin;
  } catch {
    return null;
  }
  const ancestors = location.ancestorOrigins;
  if (ancestors && ancestors.length > 0 && ancestors[0] !== origin) return null;
  return origin;
})();

/**
 * @param {{ onVisibility: (open: boolean) => void }} handlers
 */
export function hostLink({ onVisibility }) {
  /** @param {Record<string, unknown>} message */
  const post = (message) => {
    if (hostOrigin) window.parent.postMessage({ parley: 1, ...message }, hostOrigin);
  };
  window.addEventListener('message', (event) => {
    if (!hostOrigin || event.source !== window.parent || event.origin !== hostOrigin) return;
    const data = event.data;
    if (!data || typeof data !== 'object' || data.parley !== 1) return;
    if (data.type === 'visibility') onVisibility(data.open === true);
  });
  return {
    /** Whether a loader embeds this panel (it then has a minimise button). */
    embedded: Boolean(hostOrigin),
    ready: () => post({ type: 'ready' }),
    /** @param {number} count */
    unread: (count) => post({ type: 'unread', count }),
    close: () => post({ type: 'close' }),
  };
}
