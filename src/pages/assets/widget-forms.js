// @ts-check
import { byId, callJson, say } from '/assets/api.js';

/**
 * The widget's two small forms: the rating the merchant invites to after a conversation, and the
 * contact details a visitor leaves with a message nobody can answer now.
 * @typedef {ReturnType<typeof import('/assets/widget-i18n.js').translator>} Translate
 */

/** @param {{ t: Translate, headers: () => Record<string, string> }} parts */
export function ratingForm({ t, headers }) {
  const form = byId('rating-form', HTMLFormElement);
  const result = byId('rating-result');
  const resolvedLabel = byId('rating-resolved-label');
  /** @type {string | undefined} */
  let conversationId;

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    /** @type {Record<string, unknown>} */
    const fields = { score: Number(byId('rating-score', HTMLSelectElement).value) };
    if (conversationId) fields.conversation_id = conversationId;
    if (!resolvedLabel.hidden) fields.resolved = byId('rating-resolved', HTMLInputElement).checked;
    const comment = byId('rating-comment', HTMLTextAreaElement).value.trim();
    if (comment) fields.comment = comment;
    const { body } = await callJson('/visitor/chat/rate', { method: 'POST', json: fields, headers: headers() });
    result.className = `notice ${body.code === 0 ? 'success' : 'error'}`;
    result.dataset.result = body.code === 0 ? 'rated' : 'refused';
    say(result, body.code === 0 ? t('rated') : body.msg);
    if (body.code === 0) form.hidden = true;
  });

  return {
    /** Shows the form the merchant's switches invite to (`rating`, `resolved`). */
    invite(/** @type {string} */ id, /** @type {boolean} */ rating, /** @type {boolean} */ resolved) {
      if (!rating && !resolved) return;
      conversationId = id;
      resolvedLabel.hidden = !resolved;
      say(result, '');
      form.hidden = false;
      byId('rating-score', HTMLSelectElement).focus();
    },
    /** An open conversation is a new one: the invitation to rate the last one is over. */
    hide() {
      form.hidden = true;
      say(result, '');
    },
  };
}

/** @param {{ t: Translate, headers: () => Record<string, string> }} parts */
export function contactForm({ t, headers }) {
  const form = byId('contact-form', HTMLFormElement);
  const result = byId('contact-result');
  let sent = false;

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    /** @type {Record<string, string>} */
    const fields = {};
    for (const input of form.querySelectorAll('input')) {
      if (!input.hidden && input.value.trim()) fields[input.name] = input.value.trim();
    }
    if (Object.keys(fields).length === 0) return;
    const { body } = await callJson('/visitor/chat/contact', { method: 'POST', json: fields, headers: headers() });
    result.className = `notice ${body.code === 0 ? 'success' : 'error'}`;
    say(result, body.code === 0 ? t('contactSaved') : body.msg);
    if (body.code === 0) sent = true;
  });

  return {
    /** Asks for the details the merchant wants (`name`, `email`, `phone`); nothing when it wants none. */
    show(/** @type {string[]} */ wanted) {
      if (sent || wanted.length === 0) return;
      for (const node of form.querySelectorAll('[data-field]')) {
        if (node instanceof HTMLElement) node.hidden = !wanted.includes(node.dataset.field ?? '');
      }
      form.hidden = false;
    },
    hide() {
      form.hidden = true;
    },
  };
}
