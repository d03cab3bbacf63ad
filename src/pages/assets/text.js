// @ts-check

/**
 * Text helpers the pages share: cutting user text for display without breaking a character, and
 * relative times ("3 minutes ago") that keep themselves current. No imports: a page module or a
 * test can load it alone.
 */

/** Whether a UTF-16 unit is the first half of a surrogate pair. */
const isHighSurrogate = (/** @type {number} */ unit) => unit >= 0xd800 && unit <= 0xdbff;

/**
 * At most `max` UTF-16 units of `text`, then `ellipsis` when something was cut. The cut never
 * splits a surrogate pair (an emoji), and where `Intl.Segmenter` exists never a grapheme either
 * (a flag, a family emoji, a letter with its combining marks); a lone surrogate would show as
 * "�" and is refused by stores such as PostgreSQL's jsonb.
 * @param {string} text
 * @param {number} max
 */
export function truncate(text, max, ellipsis = '…') {
  if (text.length <= max) return text;
  let end = max;
  if (typeof Intl.Segmenter === 'function') {
    // Segment a little past the limit: enough to see whether the cluster at the limit ends there.
    let fits = 0;
    for (const { index, segment } of new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(
      text.slice(0, max + 32),
    )) {
      if (index + segment.length > max) break;
      fits = index + segment.length;
    }
    // A single cluster longer than the limit (combining-mark abuse): fall back to code points.
    if (fits > 0) end = fits;
  }
  if (end === max && isHighSurrogate(text.charCodeAt(end - 1))) end--;
  return text.slice(0, end) + ellipsis;
}

/** Units from the largest down, with their length in seconds. */
/** @type {[Intl.RelativeTimeFormatUnit, number][]} */
const UNITS = [
  ['year', 365 * 86400],
  ['month', 30 * 86400],
  ['week', 7 * 86400],
  ['day', 86400],
  ['hour', 3600],
  ['minute', 60],
];

/**
 * "now", "3 minutes ago", "yesterday", "in 2 hours": the time `at` (epoch ms) relative to `now`
 * with `Intl.RelativeTimeFormat` in `locale` (the page's language by default).
 * @param {number} at
 * @param {number} [now]
 * @param {string} [locale]
 */
export function relativeTime(at, now = Date.now(), locale = pageLocale()) {
  const format = new Intl.RelativeTimeFormat(locale, { numeric: 'auto' });
  const seconds = Math.round((at - now) / 1000);
  if (Math.abs(seconds) < 45) return format.format(0, 'second');
  for (const [unit, length] of UNITS) {
    if (Math.abs(seconds) >= length * 0.9 || unit === 'minute')
      return format.format(Math.round(seconds / length), unit);
  }
  return format.format(seconds, 'second');
}

/** The language the page is written in (`<html lang>`), so times read like the rest of it. */
const pageLocale = () => (typeof document === 'object' && document.documentElement.lang) || undefined;

/** How often relative times are refreshed. */
const TICK_MS = 30_000;

/**
 * A `<time>` that shows `at` relatively (kept current by `keepRelativeTimesCurrent`), with the
 * full local date and time as its tooltip and machine-readable `datetime`.
 * @param {number} at epoch milliseconds
 * @param {Record<string, string>} [attrs]
 */
export function relativeTimeElement(at, attrs = {}) {
  const node = document.createElement('time');
  const date = new Date(at);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  if (Number.isNaN(date.getTime())) return node;
  node.dateTime = date.toISOString();
  node.title = date.toLocaleString();
  node.dataset.relative = 'true';
  node.textContent = relativeTime(at);
  return node;
}

/**
 * Refreshes every `time[data-relative]` under `root` every 30 s (and when the tab becomes
 * visible again), so "2 minutes ago" does not stay "now". Answers a function that stops it.
 * @param {ParentNode} root
 */
export function keepRelativeTimesCurrent(root) {
  const refresh = () => {
    const now = Date.now();
    for (const node of root.querySelectorAll('time[data-relative]')) {
      if (!(node instanceof HTMLTimeElement)) continue;
      const at = Date.parse(node.dateTime);
      if (Number.isNaN(at)) continue;
      const text = relativeTime(at, now);
      if (node.textContent !== text) node.textContent = text;
    }
  };
  const timer = setInterval(refresh, TICK_MS);
  const onVisible = () => document.visibilityState === 'visible' && refresh();
  document.addEventListener('visibilitychange', onVisible);
  return () => {
    clearInterval(timer);
    document.removeEventListener('visibilitychange', onVisible);
  };
}

/**
 * Says `text` through a polite live region (`role="status"`): cleared first, so the same words
 * twice are announced twice.
 * @param {HTMLElement} region
 * @param {string} text
 */
export function announceIn(region, text) {
  region.textContent = '';
  setTimeout(() => {
    region.textContent = text;
  }, 50);
}
