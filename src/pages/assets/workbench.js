// @ts-check
import { byId, callJson, el, LOGIN_PAGE, logout, say } from '/assets/api.js';
import { messageLog } from '/assets/chat.js';
import { typingIndicator } from '/assets/chat-send.js';
import { CODES, EVENTS, PATHS } from '/assets/contract.js';
import { cannedPicker, labelBar, labelFilter, loadNotes } from '/assets/desk.js';
import { developerToggle, eventFeed } from '/assets/feed.js';
import { historyPager } from '/assets/history.js';
import { announceIn, keepRelativeTimesCurrent, truncate } from '/assets/text.js';
import { businessHoursLine, messagesLeftList, requeueNotices } from '/assets/workbench-availability.js';
import { conversationLists } from '/assets/workbench-lists.js';
import { connectWorkbench } from '/assets/workbench-live.js';
import {
  renderAgentBadge,
  renderAgentState,
  renderMerchantPanel,
  renderTransferTargets as renderTargets,
} from '/assets/workbench-panels.js';
import { replyArea } from '/assets/workbench-reply.js';

/**
 * @typedef {import('/assets/chat.js').Message} Message
 * @typedef {import('/assets/chat.js').MessagePage} MessagePage
 * @typedef {{ event: string, position: string, channel: string, data: any, at: string }} ChannelEvent
 * @typedef {import('/assets/conversations.js').Chatting} Chatting
 * @typedef {{ visitorId: string, name: string, state: 'active' | 'queued' | 'closed' | 'elsewhere' }} OpenChat
 */

const TICKET_ENTRY = PATHS.TICKET_ENTRY;
const main = byId('main');
const loadError = byId('load-error');
const status = byId('connection-status');
const feed = eventFeed(byId('event-feed'));
const chatState = byId('chat-state');
const chatError = byId('chat-error');
const input = byId('message-input', HTMLTextAreaElement);
const loadOlder = byId('load-older', HTMLButtonElement);
const claimButton = byId('claim-chat', HTMLButtonElement);
const transferButton = byId('transfer-chat', HTMLButtonElement);
const transferTarget = byId('transfer-target', HTMLSelectElement);
const closeButton = byId('close-chat', HTMLButtonElement);
const composer = byId('composer', HTMLFormElement);
const picker = byId('attachment', HTMLInputElement);
const announcer = byId('announcer');

// The raw event feed is a developer's tool: shown only when its switch is on (remembered).
developerToggle(byId('dev-events', HTMLInputElement), byId('live-panel'), 'parley.workbench.dev-events');
// "3 minutes ago" in the conversation list and the queue stays true while the page is open.
keepRelativeTimesCurrent(main);

// Everything the page knows about the agent, merchant and capabilities comes from the last
// /agent/data/get answer: never from the URL or local storage (spec).
/** @type {any} */
let workbench;
/** @type {ReturnType<typeof connectWorkbench> | undefined} */
let channels;
/** @type {ReturnType<typeof setTimeout> | undefined} */
let reloading;
/** @type {OpenChat | undefined} the conversation shown in the chat panel */
let open;
/** Agents seen online through `global-{bid}` (agent.login / agent.state): the transfer targets. */
/** @type {Map<string, { nickname: string, state: string }>} */
const agentsOnline = new Map();

const labels = { visitor: 'Visitor', agent: 'Agent' };
const log = messageLog(byId('messages'), {
  self: 'agent',
  labels,
  onRetry: (p) => void reply.send({ content: p.content }, p.clientMsgId),
});
// The reply box, its Note button and file uploads (workbench-reply.js), on the open conversation.
const reply = replyArea({ log, visitorId: () => open?.visitorId, showError: (msg) => say(chatError, msg) });
const typing = typingIndicator(byId('typing'));
// Availability (workbench-availability.js): business hours, messages left, re-queued conversations.
const hours = businessHoursLine(byId('business-hours'));
const messagesLeft = messagesLeftList({ list: byId('left-list'), empty: byId('left-empty') });
const requeued = requeueNotices(byId('requeued'));
// The open conversation's history: newest page, "Earlier messages" (`before`), seq gaps (`after`).
const messageHistory = historyPager({ log, fetchPage: listMessages, older: loadOlder });
// The desk tools (desk.js): canned responses in the reply box, the conversation's labels, notes.
const canned = cannedPicker(input, byId('canned-picker'), { onError: (msg) => say(chatError, msg) });
byId('canned-open').addEventListener('click', () => canned.open());
const labelsOfOpen = labelBar({
  bar: byId('chat-labels'),
  list: byId('label-list'),
  select: byId('label-select', HTMLSelectElement),
  name: byId('new-label', HTMLInputElement),
  create: byId('create-label', HTMLButtonElement),
  onError: (msg) => say(chatError, msg),
  onChange: () => void filter.update(),
});
// The conversation list's label filter ("All" by default), asked again whenever the list is redrawn.
const filter = labelFilter({
  select: byId('label-filter', HTMLSelectElement),
  list: byId('conversation-list'),
  none: byId('label-filter-empty'),
});
// The agent's conversations and the queue (workbench-lists.js), by visitor uid.
const lists = conversationLists({ requeued, filter, openVisitorId: () => open?.visitorId });
byId('logout').addEventListener('click', () => {
  channels?.close();
  logout();
});

let leaving = false;
/** Navigates away once: several checks (an event, a socket close) may conclude at the same time. */
function leaveTo(/** @type {string} */ url) {
  if (leaving) return;
  leaving = true;
  location.replace(url);
}

/**
 * Loads the workbench bootstrap. Not logged in → login page; ticket agent (403) → ticket
 * entry; a network failure is retried, it does not end the login.
 */
async function load() {
  let answer;
  try {
    answer = await callJson('/agent/data/get');
  } catch {
    say(loadError, 'The server could not be reached; retrying…');
    setTimeout(load, 3000);
    return;
  }
  const { status: http, body } = answer;
  if (body.code === CODES.UNAUTHENTICATED) return leaveTo(LOGIN_PAGE);
  if (http === 403) return leaveTo(TICKET_ENTRY);
  if (body.code !== 0) {
    // A disabled account or a Session that no longer matches: show it and drop the local state.
    say(loadError, body.msg || 'The workbench could not be loaded.');
    clearState();
    if (body.code === CODES.SESSION_MISMATCH) setTimeout(() => leaveTo(LOGIN_PAGE), 1500);
    return;
  }
  say(loadError, '');
  workbench = body.data;
  render(workbench);
  await Promise.all([lists.loadQueue(), messagesLeft.load(), hours.load()]);
  showOpenChat();
  main.setAttribute('aria-busy', 'false');
  if (!channels) channels = connectWorkbench(workbench, { status, feed, load, reload, handle });
}

/** Reloads the bootstrap once for a burst of events that change it. */
function reload() {
  clearTimeout(reloading);
  reloading = setTimeout(load, 250);
}

function clearState() {
  channels?.close();
  channels = undefined;
  workbench = undefined;
  byId('conversation-list').replaceChildren();
  byId('queue-list').replaceChildren();
  byId('agent-groups').replaceChildren();
  byId('chat-actions').replaceChildren();
  byId('merchant-details').replaceChildren();
  byId('agent-badge').hidden = true;
  open = undefined;
  showOpenChat();
}

/** @param {any} data */
function render(data) {
  renderAgentBadge(data);
  lists.renderConversations(data.chatting ?? {});
  renderMerchantPanel(data);
}

// ---- the open conversation -----------------------------------------------------------------

/** Clicks on a conversation (open it) or on a queued one's Claim button. */
byId('main').addEventListener('click', (event) => {
  const target = /** @type {HTMLElement} */ (event.target);
  const claim = target.closest('[data-claim]');
  if (claim instanceof HTMLElement && claim.dataset.claim) return void claimChat(claim.dataset.claim);
  // A message left: take it and open it, the reply box ready.
  const answer = target.closest('[data-answer]');
  if (answer instanceof HTMLElement && answer.dataset.answer)
    return void claimChat(answer.dataset.answer).then(() => {
      if (!input.disabled) input.focus();
    });
  const opener = target.closest('[data-open]');
  if (opener instanceof HTMLElement && opener.dataset.open)
    void openChat(opener.dataset.open).then(() => {
      // Opened from the list: the reply box is where the agent goes next (keyboard users too).
      if (!input.disabled) input.focus();
    });
});

/** Shows one visitor's history (all its conversations) in the chat panel and marks it read. */
async function openChat(/** @type {string} */ visitorId) {
  if (open?.visitorId !== visitorId) {
    log.clear();
    messageHistory.reset();
    typing.show(labels.visitor, false);
    say(chatError, '');
  }
  open = { visitorId, name: nameOf(visitorId), state: stateOf(visitorId) };
  showOpenChat();
  for (const li of document.querySelectorAll('.conversation')) {
    if (li instanceof HTMLElement) li.setAttribute('aria-current', String(li.dataset.uid === visitorId));
  }
  labelsOfOpen.show(visitorId);
  const [page, notes] = await Promise.all([messageHistory.loadNewest(), loadNotes(visitorId)]);
  if (!page || open?.visitorId !== visitorId) return;
  log.mergeNotes(notes);
  markReadSoon();
}

/** @param {string} visitorId */
const nameOf = (visitorId) =>
  lists.mine.get(visitorId)?.name ??
  lists.queue.get(visitorId)?.visitor_name ??
  (open?.visitorId === visitorId ? open.name : visitorId);
/** @param {string} visitorId @returns {OpenChat['state']} */
const stateOf = (visitorId) =>
  lists.mine.has(visitorId)
    ? 'active'
    : lists.queue.has(visitorId)
      ? 'queued'
      : open?.visitorId === visitorId && open.state === 'closed'
        ? 'closed'
        : 'elsewhere';

/** The chat panel's heading, state and buttons for the open conversation. */
function showOpenChat() {
  byId('chat-body').hidden = !open;
  byId('chat-empty').hidden = Boolean(open);
  if (!open) return;
  open = { ...open, name: nameOf(open.visitorId), state: stateOf(open.visitorId) };
  labels.visitor = open.name;
  byId('chat-heading').replaceChildren('Chat with ', el('bdi', { text: open.name }));
  chatState.dataset.state = open.state;
  chatState.textContent = {
    active: 'Active: you are chatting.',
    queued: 'Waiting in the queue: claim it to reply.',
    closed: 'Closed.',
    elsewhere: 'Not yours: closed, or with another agent.',
  }[open.state];
  const active = open.state === 'active';
  claimButton.hidden = open.state !== 'queued';
  for (const node of [transferButton, transferTarget, closeButton, input, picker]) node.disabled = !active;
  for (const node of composer.elements) if (node instanceof HTMLButtonElement) node.disabled = !active;
  renderTransferTargets();
}

function renderTransferTargets() {
  renderTargets(transferTarget, agentsOnline, workbench?.agent?.agent_id);
}

/** @param {Record<string, string>} query @returns {Promise<MessagePage | undefined>} */
async function listMessages(query) {
  if (!open) return undefined;
  const params = new URLSearchParams({ visitor_id: open.visitorId, ...query });
  const { body } = await callJson(`/agent/message/list?${params}`);
  if (body.code !== 0) {
    say(chatError, body.msg);
    return undefined;
  }
  return body.data;
}

/**
 * A live message of the open conversation; a `seq` jump is filled from the history with
 * `after` = the last seq we have (of the visitor's latest conversation).
 * @param {Message} m
 */
async function receive(m) {
  announce(m);
  if (open?.visitorId !== m.visitor_id) return;
  if (m.sender_type === 'visitor') typing.show(labels.visitor, false);
  await messageHistory.receive(m);
  if (m.sender_type !== 'agent') markReadSoon();
}

/**
 * Tells screen readers about a visitor's new message (the list is redrawn whole, so it is not a
 * live region itself): its text when the conversation is open, otherwise who wrote.
 * @param {Message} m
 */
function announce(m) {
  if (m.sender_type !== 'visitor') return;
  const known = nameOf(m.visitor_id);
  const name = known === m.visitor_id ? 'a visitor' : known;
  const what = m.content ? truncate(m.content, 200) : 'a file';
  const text = open?.visitorId === m.visitor_id ? `${name}: ${what}` : `New message from ${name}`;
  announceIn(announcer, text);
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let readTimer;
/** Marks the open conversation read up to its newest seq while the page is visible. */
function markReadSoon() {
  clearTimeout(readTimer);
  readTimer = setTimeout(async () => {
    if (open?.state !== 'active' || document.visibilityState === 'hidden') return;
    const newest = log.newest();
    if (!newest || newest.visitor_id !== open.visitorId) return;
    const { body } = await callJson('/agent/message/read', {
      method: 'POST',
      json: { visitor_id: open.visitorId, seq: newest.seq },
    });
    if (body.code === 0 && body.data.unread_count === 0) reload();
  }, 300);
}
document.addEventListener('visibilitychange', markReadSoon);

/** Runs a conversation action on the open conversation and shows the server's refusal. */
async function act(/** @type {string} */ path, /** @type {Record<string, string>} */ fields) {
  const { body } = await callJson(path, { method: 'POST', json: fields });
  if (body.code !== 0) say(chatError, body.msg);
  else say(chatError, '');
  await load();
  return body;
}

async function claimChat(/** @type {string} */ visitorId) {
  const body = await act('/agent/chat/claim', { visitor_id: visitorId });
  if (body.code === 0) await openChat(visitorId);
}
claimButton.addEventListener('click', () => open && claimChat(open.visitorId));
transferButton.addEventListener('click', () => {
  if (!open) return;
  /** @type {Record<string, string>} */
  const fields = { visitor_id: open.visitorId };
  if (transferTarget.value) fields.to_agent_id = transferTarget.value;
  void act('/agent/chat/transfer', fields);
});
closeButton.addEventListener('click', async () => {
  if (!open) return;
  const visitorId = open.visitorId;
  const body = await act('/agent/chat/close', { visitor_id: visitorId });
  if (body.code === 0 && open?.visitorId === visitorId) {
    open = { ...open, state: 'closed' };
    showOpenChat();
  }
});

// ---- real time (the connection: workbench-live.js) ----------------------------------------

/** What an event changes on the page besides the feed. */
function handle(/** @type {ChannelEvent} */ event) {
  const data = event.data && typeof event.data === 'object' ? event.data : {};
  if (event.event === EVENTS['history.gap']) {
    feed.note('Some events were missed; reloading the workbench.', 'gap');
    reload();
    if (open) void openChat(open.visitorId);
    return;
  }
  if (event.event === EVENTS['session.ended']) return void load(); // this Session or another of the agent's: ask the server which
  if (event.event === EVENTS['message.created'] && data.message) void receive(data.message);
  if (event.event === EVENTS['note.created'] && data.note && open?.visitorId === data.note.visitor_id)
    log.mergeNotes([data.note]);
  if (event.event === EVENTS['message.read'] && data.reader_type === 'visitor' && open?.visitorId === data.visitor_id)
    log.markReadByOther(data.conversation_id, data.seq);
  if (event.event === EVENTS.typing && data.sender_type === 'visitor' && open?.visitorId === data.visitor_id)
    typing.show(labels.visitor, data.typing === true);
  if (event.event === EVENTS['conversation.closed'] && open && open.visitorId === data.visitor_id) {
    open = { ...open, state: 'closed' };
    typing.show(labels.visitor, false);
  }
  if (event.event === EVENTS['business_hours.changed']) hours.changed(data);
  if (event.event === EVENTS['conversation.requeued'] && typeof data.visitor_id === 'string') {
    const who = nameOf(data.visitor_id);
    const agent = agentsOnline.get(data.from_agent_id)?.nickname ?? 'its agent';
    announceIn(announcer, requeued.add(data, who === data.visitor_id ? 'A visitor' : who, agent));
  }
  if (event.event === EVENTS['agent.login']) {
    agentsOnline.set(data.agent_id, {
      nickname: data.nickname,
      state: agentsOnline.get(data.agent_id)?.state ?? 'online',
    });
    renderTransferTargets();
  }
  if (event.event === EVENTS['agent.state'] && typeof data.agent_id === 'string') {
    const known = agentsOnline.get(data.agent_id);
    agentsOnline.set(data.agent_id, { nickname: known?.nickname ?? data.agent_id, state: data.state });
    renderTransferTargets();
    if (workbench && data.agent_id === workbench.agent.agent_id && typeof data.state === 'string')
      renderAgentState(data.state);
  }
  if (/^(conversation|message|chat)\./.test(event.event) && event.event !== EVENTS['message.read']) reload();
}

// Test and debugging hooks (never in production: the server renders data-test-hooks="off" there).
if (document.documentElement.dataset.testHooks === 'on') {
  /** @type {any} */ (window).__parley = {
    /** Drop the real-time socket and keep it down, then let it reconnect. */
    dropSocket: () => channels?.dropSocket(),
    restoreSocket: () => channels?.restoreSocket(),
  };
}

load();
