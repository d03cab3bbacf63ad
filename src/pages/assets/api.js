// @ts-check
import { CODES, PATHS } from '/assets/contract.js';
/**
 * What every page shares: calling the gateway's JSON endpoints, the captcha control, and a few
 * DOM helpers that only ever set text (never HTML), so nothing a server or visitor sends can
 * become markup.
 */

export const LOGIN_PAGE = PATHS.LOGIN;

/**
 * @typedef {{ code: number, msg: string, data: any }} Envelope The gateway's answer.
 * @typedef {{ method?: string, form?: Record<string, string>, json?: unknown, headers?: Record<string, string>, signal?: AbortSignal }} CallOptions
 */

/**
 * Calls a JSON endpoint with the browser's cookies and resolves with the HTTP status, headers
 * and the `{code, msg, data}` envelope (a non-JSON answer becomes an envelope too). A network
 * failure rejects.
 * @param {string} path
 * @param {CallOptions} [options]
 * @returns {Promise<{ status: number, headers: Headers, body: Envelope }>}
 */
export async function callJson(path, { method = 'GET', form, json, headers = {}, signal } = {}) {
  /** @type {RequestInit & { headers: Record<string, string> }} */
  const init = { method, credentials: 'include', headers: { Accept: 'application/json', ...headers }, signal };
  if (form) init.body = new URLSearchParams(form);
  if (json !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(json);
  }
  const res = await fetch(path, init);
  /** @type {Envelope | undefined} */
  let body;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  if (!body || typeof body.code !== 'number') {
    body = { code: CODES.INTERNAL, msg: `Unexpected answer from the server (HTTP ${res.status})`, data: [] };
  }
  return { status: res.status, headers: res.headers, body };
}

/**
 * `document.getElementById` that fails loudly when the page and its script disagree, also about
 * the kind of element (`byId('captcha', HTMLInputElement)`).
 * @template {HTMLElement} [T=HTMLElement]
 * @param {string} id
 * @param {{ new (): T, prototype: T }} [type]
 * @returns {T}
 */
export function byId(id, type) {
  const node = document.getElementById(id);
  if (!node) throw new Error(`missing #${id}`);
  if (type && !(node instanceof type)) throw new Error(`#${id} is not a ${type.name}`);
  return /** @type {T} */ (node);
}

/**
 * Creates an element with attributes (`text` sets textContent) and children.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, unknown>} [attrs]
 * @param {...(Node | string | null | undefined)} children
 * @returns {HTMLElementTagNameMap[K]}
 */
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

/**
 * Shows `text` in a message element, or hides it when `text` is empty.
 * @param {HTMLElement} node
 * @param {string | null | undefined} text
 */
export function say(node, text) {
  node.textContent = text ?? '';
  node.hidden = !text;
}

/**
 * Only site-relative paths are used as image sources (the CSP allows this server only).
 * @param {unknown} value
 * @param {string} fallback
 * @returns {string}
 */
export function imageSrc(value, fallback) {
  return typeof value === 'string' && /^\/(?!\/)[^\s]*$/.test(value) ? value : fallback;
}

/**
 * Sets an avatar, falling back to the default picture when it does not load.
 * @param {HTMLImageElement} img
 * @param {unknown} value
 */
export function setAvatar(img, value, fallback = '/assets/avatar-default.svg') {
  if (!img.dataset.fallback) {
    img.dataset.fallback = fallback;
    img.addEventListener('error', () => {
      const fallbackSrc = img.dataset.fallback ?? fallback;
      if (!img.src.endsWith(fallbackSrc)) img.src = fallbackSrc;
    });
  }
  const src = imageSrc(value, fallback);
  if (img.getAttribute('src') !== src) img.src = src;
}

/** @param {number} bytes */
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
/**
 * @param {{ image: HTMLImageElement, button: HTMLElement, input: HTMLInputElement, endpoint: string }} parts
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
