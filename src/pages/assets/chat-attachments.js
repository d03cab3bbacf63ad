// @ts-check
import { el, formatBytes, imageSrc } from '/assets/api.js';
import { CODES } from '/assets/contract.js';

/**
 * Attachments on both chat pages (beside the message log of chat.js): an attachment shown in
 * the log, loaded with a bearer token when its path is not signed, and uploads with progress.
 *
 * @typedef {import('/assets/chat.js').Attachment} Attachment
 * @typedef {import('/assets/chat.js').Envelope} Envelope
 */

/**
 * Loads an attachment path the browser cannot fetch by itself (no signature in it, and the
 * identity is a bearer token, not a cookie) and answers a `blob:` URL for it.
 * @typedef {(path: string) => Promise<string>} AttachmentLoader
 */

/** Whether a download path carries its own signature (then anybody holding it may fetch it). */
const isSigned = (/** @type {string} */ path) => /[?&]sig=/.test(path);

/**
 * An image inline as its thumbnail (a link to the full picture), any other file as a link.
 * `load` fetches unsigned paths with the page's identity (the visitor's bearer token).
 * @param {Attachment} a
 * @param {AttachmentLoader} [load]
 */
export function renderAttachment(a, load) {
  const href = imageSrc(a.url, '');
  const needsLoad = (/** @type {string} */ path) => Boolean(load && path && !isSigned(path));
  /** Opens or downloads through `load` when the plain link would not carry the identity. */
  const viaLoader = (/** @type {HTMLAnchorElement} */ link) =>
    link.addEventListener('click', async (event) => {
      if (!load || !needsLoad(href) || link.dataset.loaded) return;
      event.preventDefault();
      link.href = await load(href);
      link.dataset.loaded = 'true';
      link.click();
    });
  if (a.kind === 'image') {
    const src = imageSrc(a.thumbnail_url ?? a.url, '');
    const img = el('img', { className: 'attachment-thumb', alt: a.name, 'data-attachment-id': a.attachment_id });
    if (load && needsLoad(src))
      void load(src).then(
        (url) => (img.src = url),
        () => {},
      );
    else if (src) img.src = src;
    const link = el(
      'a',
      { className: 'attachment-link image', href: href || undefined, target: '_blank', rel: 'noopener' },
      img,
    );
    viaLoader(link);
    return link;
  }
  const link = el(
    'a',
    {
      className: 'attachment-link file',
      href: href || undefined,
      download: a.name,
      'data-attachment-id': a.attachment_id,
    },
    // The name isolated: a bidi override left in it cannot turn "(6 B)" or the line around.
    el('bdi', { text: a.name }),
    ` (${formatBytes(a.size)})`,
  );
  viaLoader(link);
  return link;
}

/**
 * An AttachmentLoader for a bearer identity: each path fetched once, kept as a `blob:` URL.
 * @param {() => Record<string, string>} headers
 * @returns {AttachmentLoader}
 */
export function bearerAttachmentLoader(headers) {
  /** @type {Map<string, Promise<string>>} */
  const cache = new Map();
  return (path) => {
    let url = cache.get(path);
    if (!url) {
      url = fetch(path, { headers: headers() }).then(async (res) => {
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        return URL.createObjectURL(await res.blob());
      });
      url.catch(() => cache.delete(path));
      cache.set(path, url);
    }
    return url;
  };
}

/**
 * Uploads one file as multipart (field `file`) with XMLHttpRequest, so the upload's progress can
 * be shown. Resolves with the envelope (the server's refusal included).
 * @param {string} path
 * @param {File} file
 * @param {{ headers?: Record<string, string>, onProgress?: (fraction: number) => void }} [options]
 * @returns {Promise<Envelope>}
 */
export function uploadFile(path, file, { headers = {}, onProgress } = {}) {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', path);
    xhr.withCredentials = true;
    xhr.setRequestHeader('Accept', 'application/json');
    for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value);
    xhr.upload.addEventListener('progress', (event) => {
      if (event.lengthComputable) onProgress?.(event.loaded / event.total);
    });
    xhr.addEventListener('load', () => {
      /** @type {Envelope | undefined} */
      let body;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        body = undefined;
      }
      resolve(
        body && typeof body.code === 'number'
          ? body
          : { code: CODES.INTERNAL, msg: `Unexpected answer from the server (HTTP ${xhr.status})`, data: [] },
      );
    });
    const failed = () =>
      resolve({ code: CODES.SERVICE_UNAVAILABLE, msg: 'The upload did not reach the server.', data: [] });
    xhr.addEventListener('error', failed);
    xhr.addEventListener('abort', failed);
    const form = new FormData();
    form.append('file', file, file.name);
    xhr.send(form);
  });
}
