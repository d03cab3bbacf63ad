// @ts-check
/**
 * The widget loader, served at /widget.js: what a merchant pastes into any page.
 *
 *   <script src="https://<parley>/widget.js" data-appkey="…" async></script>
 *
 * Options (data- attributes of that script tag): data-appkey (required), data-lang (the
 * visitor's language; the browser's by default), data-user-id + data-user-hash (an identified
 * visitor: hex HMAC-SHA256 of the user id under the merchant's identity secret), data-position
 * (`right`, the default, or `left`), data-color (any CSS colour of the launcher and panel head).
 *
 * It adds one <parley-widget> element holding a shadow root (open, so accessibility checkers and test tools see the launcher): the launcher button, and
 * the panel's iframe (served by Parley, /widget/frame) made only when the visitor first opens
 * it. No global is defined, the host's styles cannot reach inside the shadow root and its own
 * styles (a constructed stylesheet, allowed by any style-src CSP) cannot leak out. The iframe
 * and this script speak through postMessage, each checking the other's window and origin
 * (src/pages/assets/widget-host.js is the panel's side). docs/widget.md.
 */
(() => {
  /** The launcher's words in each language of the catalogue (widget-i18n.js), filled in by the server. */
  /** @type {Record<string, { launcher: string, launcherClose: string, unreadBadge: string }>} */
  const WORDS = /*WORDS*/ {};

  const script = /** @type {HTMLScriptElement | null} */ (
    document.currentScript ?? document.querySelector('script[data-appkey][src*="/widget.js"]')
  );
  if (!script) return;
  const options = script.dataset;
  const appkey = options.appkey?.trim() ?? '';
  if (!appkey) {
    console.warn('Parley widget: the script tag needs data-appkey');
    return;
  }
  const parley = new URL(script.src).origin;
  const lang = options.lang || navigator.language || 'en';
  const words = WORDS[lang] ?? WORDS[/^zh(-hans)?(-cn|-sg)?$/i.test(lang) ? 'zh-CN' : 'en'] ?? Object.values(WORDS)[0];
  const color = options.color && CSS.supports('color', options.color) ? options.color : '#1f5fbf';
  const side = options.position === 'left' ? 'left' : 'right';

  const STYLE = `
:host { all: initial; }
.corner { position: fixed; bottom: 20px; ${side}: 20px; z-index: 2147483000; width: 56px; height: 56px; }
button { all: initial; box-sizing: border-box; width: 56px; height: 56px; border-radius: 50%; background: ${color}; color: #fff; cursor: pointer;
  display: flex; align-items: center; justify-content: center; box-shadow: 0 4px 14px rgba(0,0,0,.25); }
button:focus-visible { outline: 3px solid #f0a500; outline-offset: 3px; }
svg { width: 28px; height: 28px; fill: currentColor; }
.badge { position: absolute; pointer-events: none; top: -4px; ${side === 'left' ? 'right' : 'left'}: -4px; min-width: 22px; height: 22px;
  padding: 0 6px; box-sizing: border-box; border-radius: 11px; background: #c62828; color: #fff;
  font: 700 12px/22px system-ui, sans-serif; text-align: center; }
.panel { position: fixed; bottom: 88px; ${side}: 20px; z-index: 2147483000; width: 380px;
  height: min(620px, calc(100vh - 108px)); border-radius: 12px; overflow: hidden; background: #fff;
  box-shadow: 0 8px 30px rgba(0,0,0,.3); }
iframe { border: 0; width: 100%; height: 100%; display: block; }
[hidden] { display: none !important; }
@media (max-width: 480px) {
  .panel { inset: 0; width: 100vw; height: 100dvh; border-radius: 0; }
  .panel:not([hidden]) + .corner { display: none; }
}`;

  const make = (/** @type {string} */ tag, /** @type {Record<string, string>} */ attrs = {}) => {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
    return node;
  };

  function mount() {
    // The snippet pasted twice (a template and a tag manager, say) still makes one launcher.
    if (document.querySelector('parley-widget')) return;
    const holder = document.createElement('parley-widget');
    const root = holder.attachShadow({ mode: 'open' });
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(STYLE);
    root.adoptedStyleSheets = [sheet];

    const panel = make('div', { class: 'panel' });
    panel.hidden = true;
    const launcher = make('button', { type: 'button', 'aria-expanded': 'false', 'aria-label': words.launcher });
    // Built node by node (no innerHTML: a host page may enforce Trusted Types).
    const svgNs = 'http://www.w3.org/2000/svg';
    const icon = document.createElementNS(svgNs, 'svg');
    icon.setAttribute('viewBox', '0 0 24 24');
    icon.setAttribute('aria-hidden', 'true');
    const path = document.createElementNS(svgNs, 'path');
    path.setAttribute('d', 'M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H8l-4 4V5a2 2 0 0 1 2-2z');
    icon.append(path);
    launcher.append(icon);
    // Beside the button, not in it: the button's name says the count (its visible text would not match it).
    const badge = make('span', { class: 'badge', 'aria-hidden': 'true' });
    badge.hidden = true;
    const corner = make('div', { class: 'corner' });
    corner.append(launcher, badge);
    root.append(panel, corner);

    /** @type {HTMLIFrameElement | undefined} */
    let frame;
    let open = false;
    let unread = 0;
    // The panel is told nothing before it says `ready` (until then the iframe holds another document).
    let ready = false;

    const tell = (/** @type {Record<string, unknown>} */ message) => {
      if (ready) frame?.contentWindow?.postMessage({ parley: 1, ...message }, parley);
    };
    const label = () => {
      const base = open ? words.launcherClose : words.launcher;
      launcher.setAttribute(
        'aria-label',
        unread > 0 && !open ? `${base} (${words.unreadBadge.replace('{n}', String(unread))})` : base,
      );
      badge.textContent = String(unread > 99 ? '99+' : unread);
      badge.hidden = open || unread === 0;
    };
    const show = (/** @type {boolean} */ next) => {
      open = next;
      if (open && !frame) {
        const query = new URLSearchParams({ appkey, lang, host: location.origin, color });
        const identity =
          options.userId && options.userHash
            ? `#${new URLSearchParams({ user_id: options.userId, user_hash: options.userHash })}`
            : '';
        frame = /** @type {HTMLIFrameElement} */ (
          make('iframe', {
            src: `${parley}/widget/frame?${query}${identity}`,
            title: words.launcher,
            allow: 'autoplay',
          })
        );
        panel.append(frame);
      }
      panel.hidden = !open;
      launcher.setAttribute('aria-expanded', String(open));
      if (open) unread = 0;
      label();
      tell({ type: 'visibility', open });
      if (open) frame?.focus();
      else launcher.focus();
    };
    launcher.addEventListener('click', () => show(!open));

    window.addEventListener('message', (event) => {
      if (!frame || event.source !== frame.contentWindow || event.origin !== parley) return;
      const data = event.data;
      if (!data || typeof data !== 'object' || data.parley !== 1) return;
      if (data.type === 'ready') {
        ready = true;
        tell({ type: 'visibility', open });
      } else if (data.type === 'close' && open) show(false);
      else if (data.type === 'unread' && Number.isInteger(data.count) && data.count >= 0) {
        unread = open ? 0 : data.count;
        label();
      }
    });

    label();
    document.body.append(holder);
  }

  if (document.body) mount();
  else document.addEventListener('DOMContentLoaded', mount, { once: true });
})();
