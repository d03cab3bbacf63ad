// @ts-check
/**
 * The widget's one message catalogue: every word the panel shows, in each language it speaks.
 * The visitor's `lang` (the snippet's `data-lang`, else the browser's language) picks one;
 * anything else falls back to English. A language is added by adding one object here with the
 * same keys (test/browser/widget.test.ts checks that every catalogue has every key).
 */

/** @typedef {typeof en} Catalogue */

const en = {
  // The launcher's words (the loader, /widget.js, gets these three from the server).
  launcher: 'Chat with us',
  launcherClose: 'Close the chat',
  unreadBadge: '{n} unread',
  title: 'Chat',
  minimize: 'Minimize the chat',
  connecting: 'Connecting…',
  live: 'Connected',
  resubscribed: 'Connected again',
  reconnecting: 'Connection lost, reconnecting…',
  closedConnection: 'Disconnected',
  findingAgent: 'Finding an agent…',
  queued: 'Waiting for an agent…',
  queuedAt: 'Waiting for an agent: you are number {n} in the queue.',
  requeued: 'Your agent left: you are back at the front of the queue.',
  requeuedAt: 'Your agent left: you are back in the queue, number {n}.',
  hoursClosed: 'We are closed right now{when}. You can still write: your message is kept.',
  hoursOpensAt: '; we open again on {time}',
  chattingWith: 'Chatting with {name}',
  conversationClosed: 'The conversation is closed. Write again to start a new one.',
  messages: 'Messages',
  earlier: 'Earlier messages',
  message: 'Message',
  placeholder: 'Write a message…',
  send: 'Send',
  you: 'You',
  agent: 'Agent',
  bot: 'Bot',
  sending: 'Sending…',
  notSent: 'Not sent: {error}',
  retry: 'Retry',
  read: 'Read',
  recalled: '(recalled)',
  typing: '{name} is typing…',
  newMessage: 'New message from {name}: {text}',
  newAttachment: 'New file from {name}: {text}',
  attach: 'Attach a file',
  allowed: 'Allowed: {list}.',
  uploadsOff: 'Uploads are turned off here.',
  upTo: '{kind} up to {size}',
  kindImage: 'images',
  kindFile: 'files',
  kindVideo: 'videos',
  kindVoice: 'voice messages',
  refusedKind: '{name} was not sent: {kind} are not accepted here.',
  refusedSize: '{name} was not sent: it is larger than the limit of {size} for {kind}.',
  uploading: 'Uploading {name}…',
  uploadRefused: '{name} was refused: {reason}',
  uploadSent: '{name} was sent.',
  uploadProgress: 'Upload progress',
  endChat: 'End the conversation',
  rateTitle: 'How did we do?',
  rating: 'Rating',
  score5: '5 – excellent',
  score4: '4 – good',
  score3: '3 – fair',
  score2: '2 – poor',
  score1: '1 – bad',
  resolved: 'My question was resolved',
  comment: 'Comment (optional)',
  sendRating: 'Send rating',
  rated: 'Thank you for your rating.',
  sound: 'Alert sound',
  leftClosed: 'We are closed now. Write your message: it is kept, and an agent answers here when we open{when}.',
  leftNoAgent: 'Nobody can answer right now. Write your message: it is kept, and an agent answers here.',
  leftOpensAt: ' ({time})',
  contactTitle: 'How can we reach you?',
  contactName: 'Name',
  contactEmail: 'E-mail',
  contactPhone: 'Phone',
  contactSend: 'Send my details',
  contactSaved: 'Thank you: we will get back to you.',
  loadError: 'The chat could not be loaded.',
  unreachable: 'The server could not be reached.',
};

/** @type {Catalogue} */
const zhCN = {
  launcher: '在线咨询',
  launcherClose: '关闭聊天窗口',
  unreadBadge: '{n} 条未读',
  title: '在线客服',
  minimize: '收起聊天窗口',
  connecting: '正在连接…',
  live: '已连接',
  resubscribed: '已重新连接',
  reconnecting: '连接已断开，正在重新连接…',
  closedConnection: '已断开',
  findingAgent: '正在为您寻找客服…',
  queued: '正在等待客服…',
  queuedAt: '正在等待客服：您排在第 {n} 位。',
  requeued: '您的客服已离开：您已回到队列最前面。',
  requeuedAt: '您的客服已离开：您已回到队列中，排在第 {n} 位。',
  hoursClosed: '现在是非工作时间{when}。您仍可留言：消息会被保存。',
  hoursOpensAt: '，将于 {time} 恢复服务',
  chattingWith: '正在与 {name} 对话',
  conversationClosed: '会话已结束。再次发送消息即可开始新的会话。',
  messages: '消息',
  earlier: '更早的消息',
  message: '消息',
  placeholder: '输入消息…',
  send: '发送',
  you: '我',
  agent: '客服',
  bot: '机器人',
  sending: '发送中…',
  notSent: '未发送：{error}',
  retry: '重试',
  read: '已读',
  recalled: '（已撤回）',
  typing: '{name} 正在输入…',
  newMessage: '{name} 发来新消息：{text}',
  newAttachment: '{name} 发来文件：{text}',
  attach: '发送文件',
  allowed: '允许：{list}。',
  uploadsOff: '此处不接受文件。',
  upTo: '{kind}不超过 {size}',
  kindImage: '图片',
  kindFile: '文件',
  kindVideo: '视频',
  kindVoice: '语音',
  refusedKind: '{name} 未发送：此处不接受{kind}。',
  refusedSize: '{name} 未发送：超过了{kind}的大小上限 {size}。',
  uploading: '正在上传 {name}…',
  uploadRefused: '{name} 被拒绝：{reason}',
  uploadSent: '{name} 已发送。',
  uploadProgress: '上传进度',
  endChat: '结束会话',
  rateTitle: '请评价本次服务',
  rating: '评分',
  score5: '5 – 非常满意',
  score4: '4 – 满意',
  score3: '3 – 一般',
  score2: '2 – 不满意',
  score1: '1 – 很不满意',
  resolved: '我的问题已解决',
  comment: '留言（可选）',
  sendRating: '提交评价',
  rated: '感谢您的评价。',
  sound: '提示音',
  leftClosed: '现在是非工作时间。请留下您的消息：消息会被保存，客服上班后{when}会在这里回复您。',
  leftNoAgent: '暂时没有客服在线。请留下您的消息：消息会被保存，客服会在这里回复您。',
  leftOpensAt: '（{time}）',
  contactTitle: '我们如何联系您？',
  contactName: '姓名',
  contactEmail: '电子邮箱',
  contactPhone: '电话',
  contactSend: '提交联系方式',
  contactSaved: '谢谢，我们会尽快联系您。',
  loadError: '聊天无法加载。',
  unreachable: '无法连接到服务器。',
};

/** The words of the launcher, the only ones the loader needs before the panel is opened. */
export const LAUNCHER_KEYS = /** @type {const} */ (['launcher', 'launcherClose', 'unreadBadge']);

/** The catalogues by language tag. */
export const CATALOGUES = /** @type {Record<string, Catalogue>} */ ({ en, 'zh-CN': zhCN });

/**
 * The catalogue's tag for a requested language: `zh`, `zh-CN`, `zh-Hans`, `zh-Hans-CN`… → `zh-CN`;
 * any English or unknown tag → `en`.
 * @param {string | null | undefined} requested
 * @returns {keyof typeof CATALOGUES}
 */
export function pickLanguage(requested) {
  const tag = String(requested ?? '').toLowerCase();
  if (/^zh(-hans)?(-cn|-sg)?$/.test(tag) || tag === 'zh-hans-cn') return 'zh-CN';
  return 'en';
}

/**
 * The translator of one language: `t('queuedAt', { n: 3 })` fills `{n}`; values are plain text
 * (the pages set textContent, never HTML).
 * @param {string} lang a catalogue tag (pickLanguage's answer)
 */
export function translator(lang) {
  const catalogue = CATALOGUES[lang] ?? en;
  /**
   * @param {keyof Catalogue} key
   * @param {Record<string, string | number>} [values]
   */
  return (key, values = {}) =>
    (catalogue[key] ?? en[key]).replace(/\{(\w+)\}/g, (_m, name) => String(values[name] ?? ''));
}
