// @ts-check
import { byId, callJson, say } from '/assets/api.js';
import { messageLog } from '/assets/chat.js';
import { bearerAttachmentLoader } from '/assets/chat-attachments.js';
import { newClientMsgId, sendOnce, typingIndicator, typingNotifier } from '/assets/chat-send.js';
import { CODES, EVENTS } from '/assets/contract.js';
import { historyPager } from '/assets/history.js';
import { openChannels } from '/assets/realtime.js';
import { attachments } from '/assets/widget-attachments.js';
import { contactForm, ratingForm } from '/assets/widget-forms.js';
import { hostLink } from '/assets/widget-host.js';
import { showBusinessHours, showChatState, showConnection, showLeftNotice } from '/assets/widget-notices.js';
import { appkey, langTag, locale, storedToken, storeToken, t, userHash, userId } from '/assets/widget-setup.js';
import { alertSounder } from '/assets/widget-sound.js';

/**
 * The widget's panel (/widget/frame, inside the iframe the loader adds): the visitor's
 * conversation through the public visitor API and the first-party real-time client. Nothing
 * here reaches the host page but the few postMessage calls of widget-host.js.
 *
 * @typedef {import('/assets/chat.js').Message} Message
 * @typedef {import('/assets/chat.js').MessagePage} MessagePage
 * @typedef {{ agent_id: string, nickname: string, avatar: string }} AgentBrief
 * @typedef {{ id?: string, state: 'none' | 'queued' | 'active' | 'closed', agent?: AgentBrief | null, position?: number | null, requeued?: boolean }} Conversation
 * @typedef {{ open: boolean, next_open_at: number | null, timezone?: string }} BusinessHours
 * @typedef {{ event: string, position: string, channel: string, data: any, at: string }} ChannelEvent
 */

const main = byId('main');
const input = byId('message-input', HTMLTextAreaElement);
const sendError = byId('send-error');
const closeButton = byId('close-chat', HTMLButtonElement);
const announcer = byId('announcer');
const soundToggle = byId('sound-toggle', HTMLButtonElement);

const timeFormat = new Intl.DateTimeFormat(locale, { hour: 'numeric', minute: '2-digit' });

/** @type {Record<string, any>} the bootstrap's `setting` */
let setting = {};
/** @type {ReturnType<typeof openChannels> | undefined} */
let channels;
/** @type {Record<string, string>} */
let auth = {};
/** @type {Conversation} */
let conversation = { state: 'none' };
/** Whether the panel is shown (the loader says; always when opened as a page). */
let open = true;
let unread = 0;

const labels = { visitor: t('you'), agent: t('agent') };
const log = messageLog(byId('messages'), {
  self: 'visitor',
  labels,
  loadAttachment: bearerAttachmentLoader(() => auth),
  onRetry: (p) => void send({ content: p.content }, p.clientMsgId),
  formatTime: (date) => timeFormat.format(date),
  strings: {
    you: t('you'),
    bot: t('bot'),
    sending: t('sending'),
    notSent: (error) => t('notSent', { error }),
    retry: t('retry'),
    read: t('read'),
    recalled: t('recalled'),
    notePrefix: '',
    anAgent: t('agent'),
    onlyAgents: '',
  },
});
const typing = typingIndicator(byId('typing'), (name) => t('typing', { name }));
const notifier = typingNotifier((on) =>
  callJson('/visitor/chat/typing', { method: 'POST', json: { typing: on }, headers: auth }),
);
const files = attachments({
  picker: byId('attachment', HTMLInputElement),
  rules: byId('attachment-rules'),
  result: byId('attachment-result'),
  progress: byId('upload-progress', HTMLProgressElement),
  t,
  headers: () => auth,
  send: (fields) => send(fields),
});
const rating = ratingForm({ t, headers: () => auth });
const contact = contactForm({ t, headers: () => auth });

const host = hostLink({
  onVisibility(shown) {
    open = shown;
    if (!shown) return;
    unread = 0;
    host.unread(0);
    markReadSoon();
    input.focus();
  },
});
if (host.embedded) {
  open = false;
  const minimize = byId('minimize', HTMLButtonElement);
  minimize.hidden = false;
  minimize.addEventListener('click', () => host.close());
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') host.close();
  });
}

// ---- identity and bootstrap -----------------------------------------------------------------

async function issueToken() {
  /** @type {Record<string, string>} */
  const fields = { appkey };
  if (langTag) fields.lang = langTag;
  if (userId) fields.user_id = userId;
  if (userHash) fields.user_hash = userHash;
  const { body } = await callJson('/visitor/token', { method: 'POST', json: fields });
  if (body.code !== 0) throw new Error(body.msg || t('loadError'));
  storeToken(body.data.token);
  return /** @type {string} */ (body.data.token);
}

const bootstrap = (/** @type {string} */ token) =>
  callJson('/visitor/data/get', { headers: { Authorization: `Bearer ${token}` } });

async function start() {
  host.ready();
  try {
    if (!appkey) throw new Error(t('loadError'));
    let token = storedToken();
    let answer = token ? await bootstrap(token) : undefined;
    if (!token || !answer || answer.body.code === CODES.VISITOR_UNAUTHENTICATED) {
      token = await issueToken();
      answer = await bootstrap(token);
    }
    // Spec: with a non-zero code the client does not go on initializing the conversation.
    if (answer.body.code !== 0) throw new Error(answer.body.msg || t('loadError'));
    auth = { Authorization: `Bearer ${token}` };
    configure(answer.body.data);
    // Subscribed first, so nothing published while the history loads is missed (duplicates merge).
    subscribe(answer.body.data, token);
    await loadHistory();
    await assign();
  } catch (error) {
    say(
      byId('load-error'),
      error instanceof TypeError ? t('unreachable') : String(/** @type {Error} */ (error).message),
    );
    byId('composer').hidden = true;
  } finally {
    main.setAttribute('aria-busy', 'false');
  }
}

/** @param {{ visitor: any, setting: Record<string, any> }} data */
function configure({ visitor, setting: s }) {
  setting = s;
  document.title = s.appname;
  byId('merchant-name').textContent = s.appname;
  main.dataset.visitorId = visitor.uid;
  files.configure(s);
  soundToggle.hidden = s.sound !== 'on';
  showBusinessHours(s.business_hours);
}

// ---- the alert sound ----------------------------------------------------------------------------

const alertSound = alertSounder(soundToggle, main, () => setting.sound === 'on');

// ---- the conversation -----------------------------------------------------------------------

/** Shows where the conversation stands: queued with its position, the agent, or closed. */
function showConversation(/** @type {Partial<Conversation>} */ next) {
  conversation = { ...conversation, ...next };
  if (conversation.state !== 'queued') conversation.requeued = false;
  const { state, agent } = conversation;
  if (agent) labels.agent = agent.nickname;
  showChatState(conversation);
  closeButton.hidden = state !== 'queued' && state !== 'active';
  if (state === 'queued' || state === 'active') rating.hide();
  if (state !== 'queued') showMessageLeft(null);
}

/** What happens to a message nobody can answer now (out of hours, or no agent online). */
function showMessageLeft(
  /** @type {{ reason: string, next_open_at: number | null, contact_fields?: string[] } | null} */ left,
) {
  showLeftNotice(left);
  if (!left) contact.hide();
  else contact.show(left.contact_fields ?? setting.contact_fields ?? []);
}

async function assign() {
  const { body } = await callJson('/visitor/chat/assign', { method: 'POST', json: {}, headers: auth });
  if (body.code !== 0) return say(sendError, body.msg);
  showConversation({
    id: body.data.conversation_id,
    state: body.data.state,
    agent: body.data.agent,
    position: body.data.queue_position,
  });
  showMessageLeft(body.data.message_left ?? null);
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

// The newest page, "Earlier messages" (before) and a live message's seq jump (after): assets/history.js.
const pager = historyPager({ log, fetchPage: listMessages, older: byId('load-older', HTMLButtonElement) });

async function loadHistory() {
  if (await pager.loadNewest()) markReadSoon();
}

/**
 * A message from the live stream. A `seq` jump is filled from the history (the pager), so
 * nothing is skipped. The agent's messages are announced (live region), counted on the
 * launcher's badge and sounded while the panel is not in view.
 * @param {Message} m
 */
async function receive(m) {
  const known = log.hasAllUpTo(m.conversation_id, m.seq) && m.seq <= log.lastSeq(m.conversation_id);
  if (m.sender_type === 'agent') typing.show(labels.agent, false);
  if (m.sender_type !== 'visitor' && !known) {
    const bot = m.sender_type === 'bot' || m.meta?.bot === true;
    const name = bot ? t('bot') : m.sender_type === 'agent' ? labels.agent : setting.appname;
    announcer.textContent = m.attachment
      ? t('newAttachment', { name, text: m.attachment.name })
      : t('newMessage', { name, text: m.content });
    if (!open || document.visibilityState === 'hidden') {
      unread += 1;
      host.unread(unread);
      alertSound();
    }
  }
  await pager.receive(m);
  if (m.sender_type !== 'visitor') markReadSoon();
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let readTimer;
let readSent = { conversation: '', seq: 0 };
/** Marks the conversation read up to its newest seq while the panel is shown and the page visible. */
function markReadSoon() {
  clearTimeout(readTimer);
  readTimer = setTimeout(async () => {
    if (!open || document.visibilityState === 'hidden' || !auth.Authorization) return;
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
    case EVENTS['conversation.requeued']:
      // Its agent went offline: back at the front of the queue (`conversation.queued` brings the position).
      showConversation({ id: data.conversation_id, state: 'queued', agent: null, position: null, requeued: true });
      break;
    case EVENTS['conversation.queued']:
      showConversation({ id: data.conversation_id, state: 'queued', agent: null, position: data.queue_position });
      break;
    case EVENTS['conversation.queue_position']:
      // The place moved while waiting; a late push for a conversation no longer waiting changes nothing.
      if (conversation.state === 'queued' && conversation.id === data.conversation_id)
        showConversation({ position: data.queue_position });
      break;
    case EVENTS['business_hours.changed']:
      showBusinessHours(data);
      break;
    case EVENTS['conversation.message_left']:
      showConversation({ id: data.conversation_id, state: 'queued', agent: null });
      showMessageLeft({ reason: data.reason, next_open_at: data.next_open_at });
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
      rating.invite(data.conversation_id, data.rating === true, data.resolved === true);
      break;
    case EVENTS['history.gap']:
      void loadHistory().then(assign);
      break;
  }
}

/** Subscribes to the visitor's own channel, exactly as the bootstrap returned it. */
function subscribe(/** @type {any} */ data, /** @type {string} */ token) {
  channels = openChannels({
    url: data.setting.ws_address,
    connectionParams: { appkey: data.setting.appkey, authorization: `Bearer ${token}` },
    channels: [data.visitor.channel],
    onStatus(status) {
      showConnection(status);
      if (status.state === 'resubscribed') void catchUpBusinessHours(token);
    },
    onEvent: handle,
  });
}

/**
 * `business_hours.changed` reaches only the visitor channels subscribed at the boundary (and an
 * admin's change none), and resuming replays no such event: after a reconnect the bootstrap says
 * again whether the merchant is open.
 */
async function catchUpBusinessHours(/** @type {string} */ token) {
  const { body } = await bootstrap(token);
  if (body.code === 0) showBusinessHours(body.data.setting.business_hours);
}

// ---- sending --------------------------------------------------------------------------------

/**
 * Sends one message exactly once (its client_msg_id is reused by every retry).
 * @param {{ content?: string, type?: string, attachment_id?: string }} fields
 * @param {string} [clientMsgId]
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
    rating.hide();
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
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    byId('composer', HTMLFormElement).requestSubmit();
  }
});

closeButton.addEventListener('click', async () => {
  const { body } = await callJson('/visitor/chat/close', { method: 'POST', headers: auth });
  if (body.code !== 0) return say(sendError, body.msg);
  showConversation({ state: 'closed', position: null });
});

// Test and debugging hooks (never in production: the server renders data-test-hooks="off" there).
if (document.documentElement.dataset.testHooks === 'on') {
  /** @type {any} */ (window).__parley = {
    dropSocket: () => channels?.dropSocket(),
    restoreSocket: () => channels?.restoreSocket(),
  };
}

start();
