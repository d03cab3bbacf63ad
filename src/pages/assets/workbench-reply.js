// @ts-check
import { byId, callJson, say } from '/assets/api.js';
import { uploadFile } from '/assets/chat-attachments.js';
import { newClientMsgId, sendOnce, typingNotifier } from '/assets/chat-send.js';
import { CODES } from '/assets/contract.js';
import { writeNote } from '/assets/desk.js';

/**
 * The workbench's reply area for the open conversation: the reply box (Enter sends, Shift+Enter a
 * new line, typing notices), the Note button, and files (uploaded with progress, then sent as a
 * message). Replies are sent exactly once: the same `client_msg_id` on every retry.
 *
 * @typedef {import('/assets/chat.js').Envelope} Envelope
 * @typedef {ReturnType<typeof import('/assets/chat.js').messageLog>} MessageLog
 * @param {{ log: MessageLog, visitorId: () => string | undefined, showError: (msg: string) => void }} options
 *   `visitorId` answers the open conversation's visitor (undefined: none open)
 */
export function replyArea({ log, visitorId, showError }) {
  const input = byId('message-input', HTMLTextAreaElement);
  const composer = byId('composer', HTMLFormElement);
  const picker = byId('attachment', HTMLInputElement);
  const progress = byId('upload-progress', HTMLProgressElement);
  const attachmentResult = byId('attachment-result');

  const notifier = typingNotifier((on) => {
    const uid = visitorId();
    return uid
      ? callJson('/agent/chat/typing', { method: 'POST', json: { visitor_id: uid, typing: on } })
      : Promise.resolve();
  });

  /**
   * Sends one reply exactly once (the same client_msg_id on every retry).
   * @param {{ content?: string, type?: string, attachment_id?: string }} fields
   * @param {string} [clientMsgId] given when a message that was not sent is retried
   * @returns {Promise<Envelope>}
   */
  async function send(fields, clientMsgId = newClientMsgId()) {
    const uid = visitorId();
    if (!uid) return { code: CODES.NOT_FOUND, msg: 'No conversation is open.', data: [] };
    if (!fields.attachment_id) log.setPending({ clientMsgId, content: fields.content ?? '', state: 'sending' });
    /** @type {Record<string, string>} */
    const body = { visitor_id: uid, client_msg_id: clientMsgId };
    for (const [name, value] of Object.entries(fields)) if (value !== undefined) body[name] = value;
    // Queued per conversation: a reply to one visitor never waits behind another's that hangs.
    const answer = await sendOnce('/agent/message/send', body, { conversation: uid });
    if (visitorId() !== uid) {
      // Answered after the agent opened another conversation: the log shows that one now, and a
      // "Not sent" line there would offer a Retry that sends to the open conversation instead.
      if (answer.code !== 0) showError(`A reply to another conversation was not sent: ${answer.msg}`);
      return answer;
    }
    if (answer.code !== 0) {
      log.setPending({ clientMsgId, content: fields.content ?? '', state: 'failed', error: answer.msg });
      showError(answer.msg);
    } else {
      showError('');
      log.merge([answer.data]);
    }
    return answer;
  }

  composer.addEventListener('submit', (event) => {
    event.preventDefault();
    const content = input.value.trim();
    if (!content || !visitorId()) return;
    input.value = '';
    notifier.stop();
    void send({ content });
  });
  input.addEventListener('input', () => notifier.input());
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });

  byId('add-note').addEventListener('click', async () => {
    const content = input.value.trim();
    const uid = visitorId();
    if (!content || !uid) return;
    const body = await writeNote(uid, content);
    if (body.code !== 0) return showError(body.msg);
    showError('');
    input.value = '';
    log.mergeNotes([body.data]);
  });

  picker.addEventListener('change', async () => {
    const [file] = picker.files ?? [];
    if (!file || !visitorId()) return;
    attachmentResult.dataset.verdict = 'uploading';
    say(attachmentResult, `Uploading ${file.name}…`);
    progress.value = 0;
    progress.hidden = false;
    try {
      const answer = await uploadFile('/agent/upload', file, {
        onProgress: (fraction) => {
          progress.value = fraction;
        },
      });
      const sent =
        answer.code === 0 ? await send({ type: answer.data.kind, attachment_id: answer.data.attachment_id }) : answer;
      attachmentResult.dataset.verdict = sent.code === 0 ? 'sent' : 'refused';
      attachmentResult.className = `message ${sent.code === 0 ? 'success' : 'error'}`;
      say(attachmentResult, sent.code === 0 ? `${file.name} was sent.` : `${file.name} was refused: ${sent.msg}`);
    } finally {
      progress.hidden = true;
      picker.value = '';
    }
  });

  return { send };
}
