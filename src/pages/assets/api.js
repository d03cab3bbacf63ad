import { PATHS } from '/assets/contract.js';
/**
 * What every page shares: calling the gateway's JSON endpoints, the captcha control, and a few
 * DOM helpers that only ever set text (never HTML), so nothing a server or visitor sends can
 * become markup.
 */

export const LOGIN_PAGE = PATHS.LOGIN;

/**
 * Calls a JSON endpoint with the browser's cookies and resolves with the HTTP status, headers
 * and the `{code, msg, data}` envelope (a non-JSON answer becomes an envelope too). A network
 * failure rejects.
 */
export async function callJson(path, { method = 'GET', form, json, headers = {} } = {}) {
  const init = { method, credentials: 'include', headers: { Accept: 'application/json', ...headers } };
  if (form) init.body = new URLSearchParams(form);
  if (json !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(json);
  }
  const res = await fetch(path, init);
  let body;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  if (!body || typeof body.code !== 'number') {
    body = { code: 1500, msg: `Unexpected answer from the server (HTTP ${res.status})`, data: [] };
  }
  return { status: res.status, headers: res.headers, body };
}

/** `document.getElementById` that fails loudly when the page and its script disagree. */
export function byId(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error(`missing #${id}`);
  return node;
}

/** Creates an element with attributes (`text` sets textContent) and children. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') node.textContent = String(value);
    else if (name === 'className') node.className = String(value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child !== undefined && child !== null) node.append(child);
  }
  return node;
}

/** Shows `text` in a message element, or hides it when `text` is empty. */
export function say(node, text) {
  node.textContent = text ?? '';
  node.hidden = !text;
}

/** Only site-relative paths are used as image sources (the CSP allows this server only). */
export function imageSrc(value, fallback) {
  return typeof value === 'string' && /^\/(?!\/)[^\s]*$/.test(value) ? value : fallback;
}

/** Sets an avatar, falling back to the default picture when it does not load. */
export function setAvatar(img, value, fallback = '/assets/avatar-default.svg') {
  if (!img.dataset.fallback) {
    img.dataset.fallback = fallback;
    img.addEventListener('error', () => {
      if (!img.src.endsWith(img.dataset.fallback)) img.src = img.dataset.fallback;
    });
  }
  const src = imageSrc(value, fallback);
  if (img.getAttribute('src') !== src) img.src = src;
}

export function formatBytes(bytes) {
  if (!Number.isFinite(bytes)) return 'unknown size';
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/**
 * A captcha image with its input: reloading asks for a new image with a fresh `rand` (the old
 * answer is invalid at once on the server); `reset` does so and clears the input.
 */
export function captchaControl({ image, button, input, endpoint }) {
  const reload = () => {
    image.src = `${endpoint}?rand=${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
  };
  button.addEventListener('click', () => {
    input.value = '';
    reload();
    input.focus();
  });
  return {
    reload,
    reset() {
      input.value = '';
      reload();
    },
  };
}

/** Logs out and goes to the login page, whatever the answer (the Session is gone either way). */
export async function logout() {
  try {
    await callJson('/agent/logout', { method: 'POST' });
  } finally {
    location.assign(LOGIN_PAGE);
  }
}
