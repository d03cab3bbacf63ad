import { byId, callJson, el, formatBytes, say, setAvatar } from '/assets/api.js';
import { CODES } from '/assets/contract.js';
import { describeSince, eventFeed, showConnection } from '/assets/feed.js';
import { openChannels } from '/assets/realtime.js';

const main = byId('main');
const loadError = byId('load-error');
const status = byId('connection-status');
const feed = eventFeed(byId('event-feed'));
const picker = byId('attachment');
const result = byId('attachment-result');
const VISITOR_UNAUTHENTICATED = CODES.VISITOR_UNAUTHENTICATED;

/**
 * Upload kinds: which switch and which `upload_limits` member apply to a file. A switch the
 * merchant has not configured (absent) counts as off: uploads need an explicit `on`.
 */
const KINDS = {
  image: { label: 'image', switch: 'upload_img', limit: 'image_max_bytes' },
  video: { label: 'video', switch: 'upload_file', limit: 'video_max_bytes' },
  voice: { label: 'voice message', switch: 'voice', limit: 'voice_max_bytes' },
  file: { label: 'file', switch: 'upload_file', limit: 'file_max_bytes' },
};
const kindOf = (file) => {
  if (file.type.startsWith('image/')) return 'image';
  if (file.type.startsWith('video/')) return 'video';
  if (file.type.startsWith('audio/')) return 'voice';
  return 'file';
};

let setting;
let channels;

// The visitor token lives for this tab only (sessionStorage), so a reload keeps the same visitor.
const tokenStore = {
  key: (appkey) => `parley.visitor-token:${appkey}`,
  get(appkey) {
    try {
      return sessionStorage.getItem(this.key(appkey)) ?? undefined;
    } catch {
      return undefined;
    }
  },
  set(appkey, token) {
    try {
      if (token) sessionStorage.setItem(this.key(appkey), token);
      else sessionStorage.removeItem(this.key(appkey));
    } catch {
      // storage unavailable: the token lives as long as the page
    }
  },
};

async function issueToken(appkey) {
  const { body } = await callJson('/visitor/token', { method: 'POST', json: { appkey } });
  if (body.code !== 0) throw new Error(body.msg || 'No visitor token could be issued.');
  tokenStore.set(appkey, body.data.token);
  return body.data.token;
}

const bootstrap = (token) =>
  callJson('/visitor/data/get', { headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' } });

async function start() {
  const appkey = new URLSearchParams(location.search).get('appkey')?.trim();
  if (!appkey) {
    byId('appkey-form').hidden = false;
    main.setAttribute('aria-busy', 'false');
    return;
  }
  try {
    let token = tokenStore.get(appkey);
    let answer = token ? await bootstrap(token) : undefined;
    if (!answer || answer.body.code === VISITOR_UNAUTHENTICATED) {
      token = await issueToken(appkey);
      answer = await bootstrap(token);
    }
    // Spec: with a non-zero code the client does not go on initializing the conversation.
    if (answer.body.code !== 0) throw new Error(answer.body.msg || 'The chat could not be loaded.');
    render(answer.body.data);
    subscribe(answer.body.data, token);
  } catch (error) {
    say(loadError, error instanceof TypeError ? 'The server could not be reached.' : error.message);
    byId('appkey-form').hidden = false;
    byId('appkey').value = appkey;
  } finally {
    main.setAttribute('aria-busy', 'false');
  }
}

function render({ visitor, setting: s }) {
  setting = s;
  document.title = `${s.appname} · Parley chat`;
  byId('merchant-name').textContent = s.appname;
  setAvatar(byId('visitor-avatar'), visitor.avatar);
  byId('visitor-nickname').textContent = visitor.nickname;
  byId('visitor-lang').textContent = visitor.lang;
  byId('visitor-facts').replaceChildren(
    ...fact('Visitor id', visitor.uid),
    el('dt', { text: 'Channel' }),
    el('dd', { id: 'visitor-channel', text: visitor.channel }),
  );
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
    ...switches.flatMap(([key, label]) => switchFact(label, s[key])),
    ...fact('Verified merchant', s.verified ? 'yes' : 'no'),
    ...fact('Paid order', s.paid ? String(s.paid) : 'none'),
  );
  const limits = s.upload_limits ?? {};
  byId('upload-limits').replaceChildren(
    ...fact('Image', formatBytes(limits.image_max_bytes)),
    ...fact('File', formatBytes(limits.file_max_bytes)),
    ...fact('Video', formatBytes(limits.video_max_bytes)),
    ...fact('Voice', formatBytes(limits.voice_max_bytes)),
  );
  const allowed = Object.values(KINDS)
    .filter((k) => s[k.switch] === 'on')
    .map((k) => `${k.label} up to ${formatBytes(limits[k.limit])}`);
  byId('attachment-rules').textContent = allowed.length
    ? `Allowed: ${allowed.join('; ')}. Files are checked here before anything is sent.`
    : 'This merchant has turned uploads off.';
  picker.disabled = allowed.length === 0;

  for (const id of ['profile', 'chat', 'settings']) byId(id).hidden = false;
}

const fact = (term, value) => [el('dt', { text: term }), el('dd', { text: value ?? '' })];

const switchFact = (label, value) => [
  el('dt', { text: label }),
  el('dd', {
    className: `switch ${value ?? 'absent'}`,
    text: value === 'on' ? 'on' : value === 'off' ? 'off' : 'not configured',
  }),
];

function attribute(a) {
  const term = el('dt', { text: a.label });
  if (a.type === 'image' && typeof a.value === 'string' && /^\/(?!\/)\S*$/.test(a.value)) {
    return [term, el('dd', {}, el('img', { src: a.value, alt: a.label, className: 'attribute-image', height: 48 }))];
  }
  return [term, el('dd', { text: a.value === null ? '—' : String(a.value) })];
}

/** Subscribes to the visitor's own channel, exactly as the bootstrap returned it. */
function subscribe(data, token) {
  let dropped = false;
  channels = openChannels({
    url: data.setting.ws_address,
    connectionParams: { appkey: data.setting.appkey, authorization: `Bearer ${token}` },
    channels: [data.visitor.channel],
    onStatus(s) {
      showConnection(status, s);
      if (s.state === 'closed' && !dropped) {
        dropped = true;
        feed.note('Connection lost; reconnecting.', 'disconnected');
      }
      if (s.state === 'resubscribed') {
        dropped = false;
        feed.note(`Reconnected: resubscribed to ${describeSince(s.since)}.`, 'resubscribed');
      }
      if (s.state === 'live') dropped = false;
    },
    onEvent(event) {
      feed.event(event);
      if (event.event === 'history.gap') feed.note('Some events were missed while offline.', 'gap');
    },
    onError({ message }) {
      feed.note(message, 'error');
    },
  });
}

/** Checks the picked file against the switches and `upload_limits` before anything is sent. */
function validate(file) {
  const kind = KINDS[kindOf(file)];
  const limit = Number(setting?.upload_limits?.[kind.limit]);
  const name = `${file.name} (${formatBytes(file.size)})`;
  if (setting?.[kind.switch] !== 'on') {
    return { ok: false, text: `${name} was not sent: this merchant does not accept ${kind.label} uploads.` };
  }
  if (!Number.isFinite(limit) || file.size > limit) {
    return {
      ok: false,
      text: `${name} was not sent: it is larger than the ${kind.label} limit of ${formatBytes(limit)}.`,
    };
  }
  return {
    ok: true,
    text: `${name} is within the ${kind.label} limit of ${formatBytes(limit)} and could be sent. Uploading is not part of this demo, so nothing was sent.`,
  };
}

picker.addEventListener('change', () => {
  const [file] = picker.files ?? [];
  if (!file) return say(result, '');
  const verdict = validate(file);
  result.dataset.verdict = verdict.ok ? 'accepted' : 'rejected';
  result.className = `message ${verdict.ok ? 'success' : 'error'}`;
  say(result, verdict.text);
  if (!verdict.ok) picker.value = '';
});

window.__parley = {
  /** Test and debugging hooks: drop the real-time socket and keep it down, then let it reconnect. */
  dropSocket: () => channels?.dropSocket(),
  restoreSocket: () => channels?.restoreSocket(),
};

start();
