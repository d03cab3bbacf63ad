// @ts-check
import { pickLanguage, translator } from '/assets/widget-i18n.js';

/**
 * What the widget's panel is opened with (assets/widget.js): the snippet's settings in the
 * query (appkey, language, colour) and the merchant's user in the fragment, the page's words
 * in that language, and where the visitor token is kept for this tab.
 */

const params = new URLSearchParams(location.search);
export const appkey = params.get('appkey')?.trim() ?? '';
// The requested language tag (the snippet's data-lang), kept for the server and Intl when well formed.
const requested = params.get('lang') ?? '';
export const langTag = /^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$/.test(requested) ? requested : undefined;
export const lang = pickLanguage(langTag ?? navigator.language);
export const locale = langTag ?? lang;
export const t = translator(lang);
// The merchant's user, for an identified visitor: in the fragment (never sent to a server nor in a Referer).
const identity = new URLSearchParams(location.hash.slice(1));
export const userId = identity.get('user_id') ?? undefined;
export const userHash = identity.get('user_hash') ?? undefined;
if (location.hash) history.replaceState(null, '', location.pathname + location.search);

document.documentElement.lang = lang;
// The merchant's colour (the snippet's data-color) for the panel's head and buttons: a CSS colour or nothing.
const color = params.get('color');
if (color && CSS.supports('color', color)) document.documentElement.style.setProperty('--accent', color);
for (const node of document.querySelectorAll('[data-i18n]')) {
  node.textContent = t(/** @type {any} */ (node.getAttribute('data-i18n')));
}
for (const [attribute, target] of [
  ['data-i18n-label', 'aria-label'],
  ['data-i18n-placeholder', 'placeholder'],
  ['data-i18n-title', 'title'],
]) {
  for (const node of document.querySelectorAll(`[${attribute}]`)) {
    node.setAttribute(String(target), t(/** @type {any} */ (node.getAttribute(String(attribute)))));
  }
}

// The visitor token lives for this tab only (sessionStorage of the frame's origin, partitioned
// by the host site in browsers that partition third-party storage): a reload keeps the visitor.
const tokenKey = `parley.visitor-token:${appkey}${userId ? `:${userId}` : ''}`;
export const storedToken = () => {
  try {
    return sessionStorage.getItem(tokenKey) ?? undefined;
  } catch {
    return undefined;
  }
};
export const storeToken = (/** @type {string} */ token) => {
  try {
    sessionStorage.setItem(tokenKey, token);
  } catch {
    // storage unavailable: the token lives as long as the panel
  }
};
