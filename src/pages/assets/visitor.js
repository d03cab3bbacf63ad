// @ts-check
import { byId, callJson, el, formatBytes, say, setAvatar } from '/assets/api.js';
import { eventFeed, showConnection } from '/assets/feed.js';
import { openChannels } from '/assets/realtime.js';

/**
 * The visitor demo (/visitor/?appkey=…): a host page that embeds the widget with the merchant's
 * snippet, as any site would. This script only shows the snippet and, behind the "Developer
 * details" toggle, what a developer wants to see: the visitor the widget created (its id,
 * channel, language, attributes), the merchant's switches and limits, and the raw events of the
 * visitor's channel. It reads the visitor token the panel keeps (this page and the panel share
 * the gateway's origin, so its sessionStorage), never the panel's DOM.
 */

const main = byId('main');
const details = byId('developer-details', HTMLDetailsElement);
const appkey = new URLSearchParams(location.search).get('appkey')?.trim() ?? '';
const tokenKey = `parley.visitor-token:${appkey}`;
/** @type {ReturnType<typeof openChannels> | undefined} */
let channels;
let shown = '';

byId('snippet').textContent =
  `<script src="${location.origin}/widget.js" data-appkey="${appkey || '…'}" async></script>`;

const storedToken = () => {
  try {
    return sessionStorage.getItem(tokenKey) ?? '';
  } catch {
    return '';
  }
};

/** Loads the bootstrap with the panel's token and shows it (once per token). */
async function showDetails() {
  const token = storedToken();
  if (!token || token === shown) return;
  shown = token;
  const { body } = await callJson('/visitor/data/get', { headers: { Authorization: `Bearer ${token}` } });
  if (body.code !== 0) {
    shown = '';
    return say(byId('load-error'), body.msg);
  }
  render(body.data);
  watch(body.data, token);
}

/** @param {{ visitor: any, setting: Record<string, any> }} data */
function render({ visitor, setting: s }) {
  document.title = `${s.appname} · Parley chat`;
  byId('merchant-name').textContent = s.appname;
  setAvatar(byId('visitor-avatar', HTMLImageElement), visitor.avatar);
  byId('visitor-nickname').textContent = visitor.nickname;
  byId('visitor-lang').textContent = visitor.lang;
  byId('visitor-facts').replaceChildren(
    ...fact('Visitor id', visitor.uid),
    el('dt', { text: 'Channel' }),
    el('dd', { id: 'visitor-channel', text: visitor.channel }),
  );
  /** @type {any[]} */
  const attributes = visitor.attributes ?? [];
  byId('visitor-attributes').replaceChildren(...attributes.flatMap(attribute));
  byId('attributes-empty').hidden = attributes.length > 0;
  const switches = [
    ['voice', 'Voice messages'],
    ['sound', 'Alert sound'],
    ['upload_file', 'File uploads'],
    ['upload_img', 'Image uploads'],
    ['emoji', 'Emoji'],
    ['session_invite_rating', 'Rating invitation'],
    ['session_invite_resolved', 'Resolved feedback'],
  ];
  byId('switches').replaceChildren(
    ...switches.flatMap(([key, label]) => switchFact(String(label), s[String(key)])),
    ...fact('Verified merchant', s.verified ? 'yes' : 'no'),
    ...fact('Paid order', s.paid ? String(s.paid) : 'none'),
    ...fact('Open now', s.business_hours?.open === false ? 'no' : 'yes'),
  );
  const limits = s.upload_limits ?? {};
  byId('upload-limits').replaceChildren(
    ...fact('Image', formatBytes(limits.image_max_bytes)),
    ...fact('File', formatBytes(limits.file_max_bytes)),
    ...fact('Video', formatBytes(limits.video_max_bytes)),
    ...fact('Voice', formatBytes(limits.voice_max_bytes)),
  );
  byId('details-empty').hidden = true;
  byId('details').hidden = false;
}

/** @param {string} term @param {unknown} value */
const fact = (term, value) => [el('dt', { text: term }), el('dd', { text: value ?? '' })];

/** @param {string} label @param {string | undefined} value */
const switchFact = (label, value) => [
  el('dt', { text: label }),
  el('dd', {
    className: `switch ${value ?? 'absent'}`,
    text: value === 'on' ? 'on' : value === 'off' ? 'off' : 'not configured',
  }),
];

/** @param {{ label: string, type: string, value: unknown }} a */
function attribute(a) {
  const term = el('dt', { text: a.label });
  if (a.type === 'image' && typeof a.value === 'string' && /^\/(?!\/)\S*$/.test(a.value)) {
    return [term, el('dd', {}, el('img', { src: a.value, alt: a.label, className: 'attribute-image', height: 48 }))];
  }
  return [term, el('dd', { text: a.value === null ? '—' : String(a.value) })];
}

/** The raw events of the visitor's channel, on a socket of this page's own. */
function watch(/** @type {any} */ data, /** @type {string} */ token) {
  channels?.close();
  const feed = eventFeed(byId('event-feed'));
  const status = byId('connection-status');
  channels = openChannels({
    url: data.setting.ws_address,
    connectionParams: { appkey: data.setting.appkey, authorization: `Bearer ${token}` },
    channels: [data.visitor.channel],
    onStatus: (s) => showConnection(status, s),
    onEvent: (event) => feed.event(event),
    onError: ({ message }) => feed.note(message, 'error'),
  });
}

if (!appkey) byId('appkey-form').hidden = false;
// The panel writes the token when it first opens; this page hears it (a storage event) and
// shows the details at once, open or not (the toggle only hides them).
window.addEventListener('storage', (event) => {
  if (event.key === tokenKey) void showDetails();
});
details.addEventListener('toggle', () => void showDetails());
void showDetails().finally(() => main.setAttribute('aria-busy', 'false'));
