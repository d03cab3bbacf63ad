// @ts-check
import { byId, callJson, el, formatBytes, say, setAvatar } from '/assets/api.js';
import {
  bearerAttachmentLoader,
  messageLog,
  newClientMsgId,
  sendOnce,
  typingIndicator,
  typingNotifier,
  uploadFile,
} from '/assets/chat.js';
import { CODES, EVENTS } from '/assets/contract.js';
import { describeSince, eventFeed, showConnection } from '/assets/feed.js';
import { openChannels } from '/assets/realtime.js';

/**
 * @typedef {import('/assets/chat.js').Message} Message
 * @typedef {import('/assets/chat.js').MessagePage} MessagePage
 * @typedef {{ agent_id: string, nickname: string, avatar: string }} AgentBrief
 * @typedef {{ id?: string, state: 'none' | 'queued' | 'active' | 'closed', agent?: AgentBrief | null, position?: number | null }} Conversation
 * @typedef {{ event: string, position: string, channel: string, data: any, at: string }} ChannelEvent
 */

const main = byId('main');
const loadError = byId('load-error');
const status = byId('connection-status');
const feed = eventFeed(byId('event-feed'));
const picker = byId('attachment', HTMLInputElement);
const result = byId('attachment-result');
const progress = byId('upload-progress', HTMLProgressElement);
const chatState = byId('chat-state');
const input = byId('message-input', HTMLTextAreaElement);
const sendError = byId('send-error');
const loadOlder = byId('load-older', HTMLButtonElement);
const closeButton = byId('close-chat', HTMLButtonElement);
const ratingForm = byId('rating-form', HTMLFormElement);
const ratingResult = byId('rating-result');
const VISITOR_UNAUTHENTICATED = CODES.VISITOR_UNAUTHENTICATED;

/**
 * Upload kinds: which switch and which `upload_limits` member apply to a file. A switch the
 * merchant has not configured (absent) counts as off: uploads need an explicit `on`.
 * @type {Record<'image' | 'video' | 'voice' | 'file', { label: string, switch: string, limit: string }>}
 */
const KINDS = {
  image: { label: 'image', switch: 'upload_img', limit: 'image_max_bytes' },
  video: { label: 'video', switch: 'upload_file', limit: 'video_max_bytes' },
  voice: { label: 'voice message', switch: 'voice', limit: 'voice_max_bytes' },
  file: { label: 'file', switch: 'upload_file', limit: 'file_max_bytes' },
};
/** @param {File} file @returns {keyof typeof KINDS} */
const kindOf = (file) => {
  if (file.type.startsWith('image/')) return 'image';
  if (file.type.startsWith('video/')) return 'video';
  if (file.type.startsWith('audio/')) return 'voice';
  return 'file';
};

/** @type {Record<string, any> | undefined} the bootstrap's `setting` */
let setting;
/** @type {ReturnType<typeof openChannels> | undefined} */
let channels;
/** @type {Record<string, string>} */
let auth = {};
/** @type {Conversation} */
let conversation = { state: 'none' };
/** The `before` cursor of the oldest page shown (null: nothing older). */
/** @type {string | null} */
let olderCursor = null;

const labels = { visitor: 'You', agent: 'Agent' };
// The visitor's identity is a bearer token, which an <img> or a link cannot send: unsigned
// attachment paths are fetched with it and shown from blob: URLs.
const log = messageLog(byId('messages'), {
  self: 'visitor',
  labels,
  loadAttachment: bearerAttachmentLoader(() => auth),
  onRetry: (p) => void send({ content: p.content }, p.clientMsgId),
});
const typing = typingIndicator(byId('typing'));
const notifier = typingNotifier((on) =>
  callJson('/visitor/chat/typing', { method: 'POST', json: { typing: on }, headers: auth }),
);

// The visitor token lives for this tab only (sessionStorage), so a reload keeps the same visitor.
const tokenStore = {
  key: (/** @type {string} */ appkey) => `parley.visitor-token:${appkey}`,
  /** @param {string} appkey @returns {string | undefined} */
  get(appkey) {
    try {
      return sessionStorage.getItem(this.key(appkey)) ?? undefined;
    } catch {
      return undefined;
    }
  },
  /** @param {string} appkey @param {string | undefined} token */
  set(appkey, token) {
    try {
      if (token) sessionStorage.setItem(this.key(appkey), token);
      else sessionStorage.removeItem(this.key(appkey));
    } catch {
      // storage unavailable: the token lives as long as the page
    }
  },
};

/** @param {string} appkey */
async function issueToken(appkey) {
  const { body } = await callJson('/visitor/token', { method: 'POST', json: { appkey } });
  if (body.code !== 0) throw new Error(body.msg || 'No visitor token could be issued.');
  tokenStore.set(appkey, body.data.token);
  return /** @type {string} */ (body.data.token);
}

/** @param {string} token */
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
    if (!token || !answer || answer.body.code === VISITOR_UNAUTHENTICATED) {
      token = await issueToken(appkey);
      answer = await bootstrap(token);
    }
    // Spec: with a non-zero code the client does not go on initializing the conversation.
    if (answer.body.code !== 0) throw new Error(answer.body.msg || 'The chat could not be loaded.');
    auth = { Authorization: `Bearer ${token}` };
    render(answer.body.data);
    // Subscribed first, so nothing published while the history loads is missed (duplicates merge).
    subscribe(answer.body.data, token);
    await loadHistory();
    await assign();
  } catch (error) {
    say(
      loadError,
      error instanceof TypeError ? 'The server could not be reached.' : String(/** @type {Error} */ (error).message),
    );
    byId('appkey-form').hidden = false;
    byId('appkey', HTMLInputElement).value = appkey;
  } finally {
    main.setAttribute('aria-busy', 'false');
  }
}

/** @param {{ visitor: any, setting: Record<string, any> }} data */
function render({ visitor, setting: s }) {
  setting = s;
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
    ? `Allowed: ${allowed.join('; ')}. Files are checked here before they are uploaded.`
    : 'This merchant has turned uploads off.';
  picker.disabled = allowed.length === 0;

  for (const id of ['profile', 'chat', 'live', 'settings']) byId(id).hidden = false;
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

// ---- the conversation ----------------------------------------------------------------------

/** Shows where the conversation stands: queued with its position, the agent, or closed. */
function showConversation(/** @type {Partial<Conversation>} */ next) {
  conversation = { ...conversation, ...next };
  const { state, agent, position } = conversation;
  if (agent) labels.agent = agent.nickname;
  chatState.dataset.state = state;
  chatState.textContent =
    state === 'queued'
      ? `Waiting for an agent${position ? ` (position ${position} in the queue)` : ''}…`
      : state === 'active'
        ? `Chatting with ${agent?.nickname ?? 'an agent'}`
        : state === 'closed'
          ? 'The conversation is closed. Write again to start a new one.'
          : 'Finding an agent…';
  closeButton.hidden = state !== 'queued' && state !== 'active';
  // An open conversation is a new one: the invitation to rate the last one is over.
  if (state === 'queued' || state === 'active') ratingForm.hidden = true;
}

/** The spec's step 2: the open conversation, or a new one with an agent or a queue position. */
async function assign() {
  const { body } = await callJson('/visitor/chat/assign', { method: 'POST', json: {}, headers: auth });
  if (body.code !== 0) return say(sendError, body.msg);
  showConversation({
    id: body.data.conversation_id,
    state: body.data.state,
    agent: body.data.agent,
    position: body.data.queue_position,
  });
}

/** The newest page of the history (and the cursor to scroll back from). */
async function loadHistory() {
  const page = await listMessages({ limit: '30' });
  if (!page) return;
  log.merge(page.messages);
  olderCursor = page.has_more ? page.start_cursor : null;
  loadOlder.hidden = !olderCursor;
  markReadSoon();
}

/** @param {Record<string, string>} query @returns {Promise<MessagePage | undefined>} */
async function listMessages(query) {
  const { body } = await callJson(`/visitor/message/list?${new URLSearchParams(query)}`, { headers: auth });
  if (body.code !== 0) {
    say(sendError, body.msg);
    return undefined;
  }
  return body.data;
}

loadOlder.addEventListener('click', async () => {
  if (!olderCursor) return;
  loadOlder.disabled = true;
  const page = await listMessages({ before: olderCursor, limit: '30' });
  loadOlder.disabled = false;
  if (!page) return;
  log.merge(page.messages);
  olderCursor = page.has_more ? page.start_cursor : null;
  loadOlder.hidden = !olderCursor;
});

/**
 * A message from the live stream. A `seq` jump (a message we never saw between the last one and
 * this) is filled from the history with `after` = the last seq we have, so nothing is skipped.
 * @param {Message} m
 */
async function receive(m) {
  const last = log.lastSeq(m.conversation_id);
  log.merge([m]);
  if (m.sender_type === 'agent') typing.show(labels.agent, false);
  if (m.seq > last + 1 && !log.hasAllUpTo(m.conversation_id, m.seq)) await fillHole(last);
  if (m.sender_type !== 'visitor') markReadSoon();
}

/** Fetches what follows seq `after` of the latest conversation, page by page. */
async function fillHole(/** @type {number} */ after) {
  /** @type {string} */
  let cursor = String(after);
  for (let pages = 0; pages < 20; pages++) {
    const page = await listMessages({ after: cursor, limit: '50' });
    if (!page) return;
    log.merge(page.messages);
    if (!page.has_more || !page.end_cursor) return;
    cursor = page.end_cursor;
  }
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let readTimer;
/** What the last read call covered: a new conversation starts again at seq 1. */
let readSent = { conversation: '', seq: 0 };
/** Marks the conversation read up to its newest seq while the page is visible. */
function markReadSoon() {
  clearTimeout(readTimer);
  readTimer = setTimeout(async () => {
    if (document.visibilityState === 'hidden') return;
    const newest = log.newest();
    if (!newest || (newest.conversation_id === readSent.conversation && newest.seq <= readSent.seq)) return;
    const { body } = await callJson('/visitor/message/read', {
      method: 'POST',
      json: { seq: newest.seq },
      headers: auth,
    });
    if (body.code === 0) readSent = { conversation: body.data.conversation_id, seq: body.data.read_seq };
  }, 300);
}
document.addEventListener('visibilitychange', markReadSoon);

/** @param {ChannelEvent} event */
function handle(event) {
  const data = event.data && typeof event.data === 'object' ? event.data : {};
  switch (event.event) {
    case EVENTS['message.created']:
      if (data.message) void receive(data.message);
      break;
    case EVENTS['message.read']:
      if (data.reader_type === 'agent') log.markReadByOther(data.conversation_id, data.seq);
      break;
    case EVENTS.typing:
      if (data.sender_type === 'agent') typing.show(labels.agent, data.typing === true);
      break;
    case EVENTS['conversation.queued']:
      showConversation({ id: data.conversation_id, state: 'queued', agent: null, position: data.queue_position });
      break;
    case EVENTS['conversation.assigned']:
      showConversation({ id: data.conversation_id, state: 'active', agent: data.agent, position: null });
      break;
    case EVENTS['conversation.transferred']:
      showConversation(
        data.to
          ? { id: data.conversation_id, state: 'active', agent: data.to, position: null }
          : { id: data.conversation_id, state: 'queued', agent: null },
      );
      break;
    case EVENTS['conversation.closed']:
      showConversation({ id: data.conversation_id, state: 'closed', position: null });
      typing.show(labels.agent, false);
      break;
    case EVENTS['conversation.rating_invited']:
      inviteRating(data.conversation_id, data.rating === true, data.resolved === true);
      break;
    case EVENTS['history.gap']:
      feed.note('Some events were missed while offline; reloading the conversation.', 'gap');
      void loadHistory().then(assign);
      break;
  }
}

/** Subscribes to the visitor's own channel, exactly as the bootstrap returned it. */
function subscribe(/** @type {any} */ data, /** @type {string} */ token) {
  let dropped = false;
  channels = openChannels({
    url: data.setting.ws_address,
    connectionParams: { appkey: data.setting.appkey, authorization: `Bearer ${token}` },
    channels: [data.visitor.channel],
    onStatus(/** @type {any} */ s) {
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
    onEvent(/** @type {ChannelEvent} */ event) {
      feed.event(event);
      handle(event);
    },
    onError(/** @type {{ message: string }} */ { message }) {
      feed.note(message, 'error');
    },
  });
}

// ---- sending -------------------------------------------------------------------------------

/**
 * Sends one message exactly once (its client_msg_id is reused by every retry); the stored
 * message replaces the pending one, and its answer tells whether a new conversation started.
 * @param {{ content?: string, type?: string, attachment_id?: string }} fields
 * @param {string} [clientMsgId] given when a message that was not sent is retried
 */
async function send(fields, clientMsgId = newClientMsgId()) {
  if (!fields.attachment_id) log.setPending({ clientMsgId, content: fields.content ?? '', state: 'sending' });
  /** @type {Record<string, string>} */
  const body = { client_msg_id: clientMsgId };
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) body[name] = value;
  const answer = await sendOnce('/visitor/message/send', body, { headers: auth });
  if (answer.code !== 0) {
    log.setPending({ clientMsgId, content: fields.content ?? '', state: 'failed', error: answer.msg });
    say(sendError, answer.msg);
    return answer;
  }
  say(sendError, '');
  log.merge([answer.data]);
  if (answer.data.conversation_id !== conversation.id) {
    // Writing after a close started a new conversation: ask where it stands.
    say(ratingResult, '');
    await assign();
  }
  return answer;
}

byId('composer').addEventListener('submit', (event) => {
  event.preventDefault();
  const content = input.value.trim();
  if (!content) return;
  input.value = '';
  notifier.stop();
  void send({ content });
});
input.addEventListener('input', () => notifier.input());
input.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey) {
    event.preventDefault();
    byId('composer', HTMLFormElement).requestSubmit();
  }
});

closeButton.addEventListener('click', async () => {
  const { body } = await callJson('/visitor/chat/close', { method: 'POST', headers: auth });
  if (body.code !== 0) return say(sendError, body.msg);
  showConversation({ state: 'closed', position: null });
});

// ---- rating --------------------------------------------------------------------------------

/** @type {string | undefined} */
let ratingConversation;
/** Shows the rating form the merchant's switches invite to (`rating`, `resolved`). */
function inviteRating(
  /** @type {string} */ conversationId,
  /** @type {boolean} */ rating,
  /** @type {boolean} */ resolved,
) {
  if (!rating && !resolved) return;
  ratingConversation = conversationId;
  byId('rating-resolved-label').hidden = !resolved;
  say(ratingResult, '');
  ratingForm.hidden = false;
}

ratingForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  /** @type {Record<string, unknown>} */
  const fields = { score: Number(byId('rating-score', HTMLSelectElement).value) };
  if (ratingConversation) fields.conversation_id = ratingConversation;
  if (!byId('rating-resolved-label').hidden) fields.resolved = byId('rating-resolved', HTMLInputElement).checked;
  const comment = byId('rating-comment', HTMLTextAreaElement).value.trim();
  if (comment) fields.comment = comment;
  const { body } = await callJson('/visitor/chat/rate', { method: 'POST', json: fields, headers: auth });
  ratingResult.className = `message ${body.code === 0 ? 'success' : 'error'}`;
  ratingResult.dataset.result = body.code === 0 ? 'rated' : 'refused';
  say(ratingResult, body.code === 0 ? 'Thank you for your rating.' : body.msg);
  if (body.code === 0) ratingForm.hidden = true;
});

// ---- attachments ---------------------------------------------------------------------------

/** Checks the picked file against the switches and `upload_limits` before anything is sent. */
function validate(/** @type {File} */ file) {
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
  return { ok: true, text: `Uploading ${name}…` };
}

/** @param {'accepted' | 'rejected' | 'uploading' | 'refused' | 'sent'} verdict @param {string} text */
function showResult(verdict, text) {
  result.dataset.verdict = verdict;
  result.className = `message ${verdict === 'rejected' || verdict === 'refused' ? 'error' : 'success'}`;
  say(result, text);
}

picker.addEventListener('change', async () => {
  const [file] = picker.files ?? [];
  if (!file) return say(result, '');
  const verdict = validate(file);
  if (!verdict.ok) {
    showResult('rejected', verdict.text);
    picker.value = '';
    return;
  }
  showResult('uploading', verdict.text);
  progress.value = 0;
  progress.hidden = false;
  picker.disabled = true;
  try {
    const answer = await uploadFile('/visitor/upload', file, {
      headers: auth,
      onProgress: (fraction) => {
        progress.value = fraction;
      },
    });
    // The server decides by the bytes and its own limits: its refusal is shown as it says it.
    if (answer.code !== 0) return showResult('refused', `${file.name} was refused: ${answer.msg}`);
    const sent = await send({ type: answer.data.kind, attachment_id: answer.data.attachment_id });
    if (sent.code !== 0) return showResult('refused', `${file.name} was not sent: ${sent.msg}`);
    showResult('sent', `${file.name} was sent.`);
  } finally {
    progress.hidden = true;
    picker.disabled = false;
    picker.value = '';
  }
});

// Test and debugging hooks (never in production: the server renders data-test-hooks="off" there).
if (document.documentElement.dataset.testHooks === 'on') {
  /** @type {any} */ (window).__parley = {
    /** Drop the real-time socket and keep it down, then let it reconnect. */
    dropSocket: () => channels?.dropSocket(),
    restoreSocket: () => channels?.restoreSocket(),
  };
}

start();
