// @ts-check
import { formatBytes, say } from '/assets/api.js';
import { uploadFile } from '/assets/chat-attachments.js';

/**
 * The widget's attachments: a file is checked against the merchant's switches and
 * `upload_limits` before anything leaves the browser (refused with a sentence in the visitor's
 * language), then uploaded with progress and sent as a message. The server checks again, by the
 * bytes; its refusal is shown as it says it.
 */

/**
 * Upload kinds: which switch and which `upload_limits` member apply to a file. A switch the
 * merchant has not configured (absent) counts as off: uploads need an explicit `on`.
 * @type {Record<'image' | 'video' | 'voice' | 'file', { word: 'kindImage' | 'kindVideo' | 'kindVoice' | 'kindFile', switch: string, limit: string }>}
 */
const KINDS = {
  image: { word: 'kindImage', switch: 'upload_img', limit: 'image_max_bytes' },
  video: { word: 'kindVideo', switch: 'upload_file', limit: 'video_max_bytes' },
  voice: { word: 'kindVoice', switch: 'voice', limit: 'voice_max_bytes' },
  file: { word: 'kindFile', switch: 'upload_file', limit: 'file_max_bytes' },
};
/** @param {File} file @returns {keyof typeof KINDS} */
const kindOf = (file) => {
  if (file.type.startsWith('image/')) return 'image';
  if (file.type.startsWith('video/')) return 'video';
  if (file.type.startsWith('audio/')) return 'voice';
  return 'file';
};

/**
 * @param {{
 *   picker: HTMLInputElement, rules: HTMLElement, result: HTMLElement, progress: HTMLProgressElement,
 *   t: ReturnType<typeof import('/assets/widget-i18n.js').translator>,
 *   headers: () => Record<string, string>,
 *   send: (fields: { type: string, attachment_id: string }) => Promise<{ code: number, msg: string }>,
 * }} parts
 */
export function attachments({ picker, rules, result, progress, t, headers, send }) {
  /** @type {Record<string, any>} */
  let setting = {};

  /** @param {'rejected' | 'uploading' | 'refused' | 'sent'} verdict @param {string} text */
  const show = (verdict, text) => {
    result.dataset.verdict = verdict;
    result.className = `notice ${verdict === 'rejected' || verdict === 'refused' ? 'error' : 'success'}`;
    say(result, text);
  };

  /** Checks a file against the switches and limits: the refusal's sentence, or null when it may go. */
  const refusal = (/** @type {File} */ file) => {
    const kind = KINDS[kindOf(file)];
    const limit = Number(setting.upload_limits?.[kind.limit]);
    const name = `${file.name} (${formatBytes(file.size)})`;
    if (setting[kind.switch] !== 'on') return t('refusedKind', { name, kind: t(kind.word) });
    if (!Number.isFinite(limit) || file.size > limit) {
      return t('refusedSize', { name, kind: t(kind.word), size: formatBytes(limit) });
    }
    return null;
  };

  picker.addEventListener('change', async () => {
    const [file] = picker.files ?? [];
    if (!file) return;
    const refused = refusal(file);
    picker.value = '';
    if (refused) return show('rejected', refused);
    show('uploading', t('uploading', { name: file.name }));
    progress.value = 0;
    progress.hidden = false;
    picker.disabled = true;
    try {
      const answer = await uploadFile('/visitor/upload', file, {
        headers: headers(),
        onProgress: (fraction) => {
          progress.value = fraction;
        },
      });
      if (answer.code !== 0) return show('refused', t('uploadRefused', { name: file.name, reason: answer.msg }));
      const sent = await send({ type: answer.data.kind, attachment_id: answer.data.attachment_id });
      if (sent.code !== 0) return show('refused', t('uploadRefused', { name: file.name, reason: sent.msg }));
      show('sent', t('uploadSent', { name: file.name }));
    } finally {
      progress.hidden = true;
      picker.disabled = !allowedAny();
    }
  });

  const allowedAny = () => Object.values(KINDS).some((k) => setting[k.switch] === 'on');

  return {
    /** The bootstrap's `setting`: says what may be sent, and turns the picker off when nothing may. */
    configure(/** @type {Record<string, any>} */ s) {
      setting = s;
      const limits = s.upload_limits ?? {};
      const seen = new Set();
      const allowed = Object.values(KINDS)
        .filter((k) => s[k.switch] === 'on' && !seen.has(k.word) && seen.add(k.word))
        .map((k) => t('upTo', { kind: t(k.word), size: formatBytes(limits[k.limit]) }));
      rules.textContent = allowed.length ? t('allowed', { list: allowed.join(', ') }) : t('uploadsOff');
      picker.disabled = allowed.length === 0;
      const button = picker.labels?.[0];
      if (button) button.hidden = allowed.length === 0;
    },
  };
}
