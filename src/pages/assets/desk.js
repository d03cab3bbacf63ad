// @ts-check
import { callJson, el } from '/assets/api.js';
import { truncate } from '/assets/text.js';

/**
 * The workbench's desk tools (docs/desk.md "Desk tools"): the canned-response picker of the
 * reply box, the open conversation's labels, and internal notes. Every rule is the server's;
 * this module only calls `/agent/canned/*`, `/agent/label/*` and `/agent/note/*` and sets text.
 *
 * @typedef {import('/assets/chat.js').Note} Note
 * @typedef {{ id: string, scope: 'merchant' | 'personal', shortcut: string, content: string }} Canned
 * @typedef {{ id: string, name: string, color: string }} Label
 * @typedef {(message: string) => void} ShowError
 */

/** The `/shortcut` being typed just before the caret, if any. */
const SHORTCUT_BEFORE_CARET = /(?:^|\s)\/([\p{L}\p{N}_-]*)$/u;

/**
 * The canned-response picker: typing `/` and the start of a shortcut lists the matching
 * responses (the merchant's and the agent's own); arrows choose, Enter/Tab/click insert the
 * content in place of `/shortcut`, Escape closes. `open()` lists them all (the Canned button).
 * @param {HTMLTextAreaElement} input
 * @param {HTMLElement} picker a `role="listbox"` list
 * @param {{ onError: ShowError }} options
 */
export function cannedPicker(input, picker, { onError }) {
  /** @type {Canned[]} */
  let shown = [];
  let selected = 0;
  /** Where the `/shortcut` being replaced starts (-1: insert at the caret). */
  let from = -1;
  let asked = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;

  const close = () => {
    picker.hidden = true;
    shown = [];
    input.removeAttribute('aria-activedescendant');
  };

  const render = () => {
    picker.replaceChildren(
      ...shown.map((c, i) =>
        el(
          'div',
          {
            id: `canned-${i}`,
            role: 'option',
            'data-canned-id': c.id,
            'data-shortcut': c.shortcut,
            'aria-selected': String(i === selected),
          },
          el('span', { className: 'canned-shortcut', text: `/${c.shortcut}` }),
          el('span', {
            className: 'canned-content',
            text: truncate(c.content, 80),
          }),
          c.scope === 'merchant' ? null : el('span', { className: 'hint', text: ' (yours)' }),
        ),
      ),
    );
    picker.hidden = shown.length === 0;
    if (shown.length) input.setAttribute('aria-activedescendant', `canned-${selected}`);
  };

  /** Lists the responses matching `search` (the latest answer wins). */
  async function search(/** @type {string} */ term) {
    const mine = ++asked;
    const { body } = await callJson(`/agent/canned/list?${new URLSearchParams({ search: term })}`);
    if (mine !== asked) return;
    if (body.code !== 0) {
      onError(body.msg);
      return close();
    }
    shown = body.data.list;
    selected = 0;
    render();
  }

  /** Replaces `/shortcut` (or inserts at the caret) with the chosen response's content. */
  function insert(/** @type {Canned | undefined} */ chosen) {
    if (!chosen) return;
    const caret = input.selectionStart ?? input.value.length;
    const start = from >= 0 ? from : caret;
    input.value = input.value.slice(0, start) + chosen.content + input.value.slice(caret);
    const at = start + chosen.content.length;
    input.setSelectionRange(at, at);
    close();
    input.focus();
    input.dispatchEvent(new Event('input', { bubbles: true }));
  }

  input.addEventListener('input', () => {
    const caret = input.selectionStart ?? input.value.length;
    const typed = SHORTCUT_BEFORE_CARET.exec(input.value.slice(0, caret));
    clearTimeout(timer);
    if (!typed) {
      from = -1;
      return close();
    }
    from = caret - typed[1].length - 1;
    timer = setTimeout(() => void search(typed[1]), 120);
  });
  // Capture: the picker's keys run before the composer's Enter-to-send on the same textarea.
  input.addEventListener(
    'keydown',
    (event) => {
      if (picker.hidden || shown.length === 0) return;
      if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
        selected = (selected + (event.key === 'ArrowDown' ? 1 : shown.length - 1)) % shown.length;
        render();
      } else if (event.key === 'Enter' || event.key === 'Tab') insert(shown[selected]);
      else if (event.key === 'Escape') close();
      else return;
      event.preventDefault();
      event.stopImmediatePropagation();
    },
    true,
  );
  input.addEventListener('blur', () => setTimeout(close, 200));
  picker.addEventListener('mousedown', (event) => {
    const item = event.target instanceof Element ? event.target.closest('[data-canned-id]') : null;
    if (!(item instanceof HTMLElement)) return;
    event.preventDefault(); // keep the focus in the reply box
    insert(shown.find((c) => c.id === item.dataset.cannedId));
  });

  return {
    /** Lists every response (the Canned button): the chosen one is inserted at the caret. */
    open() {
      from = -1;
      input.focus();
      void search('');
    },
    close,
  };
}

/**
 * The open conversation's labels: chips with a remove button, a select of the merchant's other
 * labels to add, and a field to create one (and put it on).
 * @param {{ bar: HTMLElement, list: HTMLElement, select: HTMLSelectElement, name: HTMLInputElement,
 *   create: HTMLButtonElement, onError: ShowError, onChange?: () => void }} nodes `onChange`: after
 *   a label went on or off
 */
export function labelBar({ bar, list, select, name, create, onError, onChange }) {
  /** @type {string | undefined} */
  let visitorId;

  /** @param {Label[]} applied @param {Label[]} all */
  const render = (applied, all) => {
    list.replaceChildren(
      ...applied.map((l) => {
        const chip = el(
          'li',
          { className: 'label-chip', 'data-label-id': l.id },
          el('span', { text: l.name }),
          el('button', { type: 'button', 'data-unlabel': l.id, 'aria-label': `Remove label ${l.name}`, text: '×' }),
        );
        if (/^#[0-9a-f]{6}$/i.test(l.color)) chip.style.setProperty('--label-color', l.color);
        return chip;
      }),
    );
    const on = new Set(applied.map((l) => l.id));
    select.replaceChildren(
      el('option', { value: '', text: 'Add a label…' }),
      ...all.filter((l) => !on.has(l.id)).map((l) => el('option', { value: l.id, text: l.name })),
    );
  };

  async function refresh() {
    const uid = visitorId;
    if (!uid) return;
    const [mine, all] = await Promise.all([
      callJson(`/agent/label/get?${new URLSearchParams({ visitor_id: uid })}`),
      callJson('/agent/label/list'),
    ]);
    if (uid !== visitorId) return;
    // No conversation yet (or not this merchant's): nothing to label.
    bar.hidden = mine.body.code !== 0;
    if (mine.body.code === 0 && all.body.code === 0) render(mine.body.data.labels, all.body.data.list);
  }

  async function change(/** @type {'add' | 'remove'} */ action, /** @type {string} */ labelId) {
    if (!visitorId) return;
    const { body } = await callJson(`/agent/label/${action}`, {
      method: 'POST',
      json: { visitor_id: visitorId, label_id: labelId },
    });
    if (body.code !== 0) onError(body.msg);
    await refresh();
    onChange?.();
  }

  select.addEventListener('change', () => {
    if (select.value) void change('add', select.value);
  });
  list.addEventListener('click', (event) => {
    const button = event.target instanceof Element ? event.target.closest('[data-unlabel]') : null;
    if (button instanceof HTMLElement && button.dataset.unlabel) void change('remove', button.dataset.unlabel);
  });
  create.addEventListener('click', async () => {
    const label = name.value.trim();
    if (!label) return;
    const { body } = await callJson('/agent/label/create', { method: 'POST', json: { name: label } });
    if (body.code !== 0) return onError(body.msg);
    name.value = '';
    await change('add', body.data.id);
  });

  return {
    /** Shows the labels of this visitor's conversation (or hides the bar when none is open). */
    show(/** @type {string | undefined} */ uid) {
      visitorId = uid;
      bar.hidden = !uid;
      if (uid) void refresh();
    },
  };
}

/**
 * The conversation list's label filter: a select of the merchant's labels, "All" by default.
 * With a label chosen, only the rows of the agent's conversations carrying it are shown. The
 * server says which (`GET /agent/chat/list?scope=mine&label_id=`, every page), asked again at
 * each `update()` (the workbench calls it whenever the list is redrawn and a label goes on or
 * off), so live events cannot show a row the label does not cover.
 * @param {{ select: HTMLSelectElement, list: HTMLElement, none: HTMLElement }} nodes `none`: the
 *   hint shown when no row carries the label
 */
export function labelFilter({ select, list, none }) {
  /** @type {{ labelId: string, uids: Set<string> } | undefined} the last answer for a label */
  let carrying;
  let asked = 0;

  /** Hides the rows the chosen label does not cover (nothing until its answer came). */
  function apply() {
    const known = select.value && carrying?.labelId === select.value ? carrying.uids : undefined;
    let shown = 0;
    const rows = list.querySelectorAll('li[data-uid]');
    for (const row of rows) {
      if (!(row instanceof HTMLElement)) continue;
      row.hidden = Boolean(known && !known.has(row.dataset.uid ?? ''));
      if (!row.hidden) shown += 1;
    }
    none.hidden = !(known && rows.length > 0 && shown === 0);
  }

  /** @param {string} labelId @returns {Promise<Set<string> | undefined>} */
  async function conversationsWith(labelId) {
    /** @type {Set<string>} */
    const uids = new Set();
    let after = '';
    do {
      const query = new URLSearchParams({ scope: 'mine', limit: '100', label_id: labelId });
      if (after) query.set('after', after);
      const { body } = await callJson(`/agent/chat/list?${query}`);
      if (body.code !== 0) return undefined;
      for (const c of body.data.list) uids.add(c.visitor_id);
      after = body.data.has_next_page ? body.data.end_cursor : '';
    } while (after);
    return uids;
  }

  async function update() {
    apply();
    const n = ++asked;
    const labelId = select.value;
    const [all, uids] = await Promise.all([
      callJson('/agent/label/list'),
      labelId ? conversationsWith(labelId) : undefined,
    ]);
    if (n !== asked) return; // a later update is on its way
    // The merchant's labels, kept current (not while the agent is choosing one).
    if (all.body.code === 0 && document.activeElement !== select) {
      /** @type {Label[]} */
      const labels = all.body.data.list;
      select.replaceChildren(
        el('option', { value: '', text: 'All' }),
        ...labels.map((l) => el('option', { value: l.id, text: l.name })),
      );
      select.value = labels.some((l) => l.id === labelId) ? labelId : '';
      if (select.value !== labelId) return void update(); // the chosen label is gone: All
    }
    if (labelId && uids) carrying = { labelId, uids };
    apply();
  }

  select.addEventListener('change', () => void update());
  return { update };
}

/** The internal notes of a visitor's conversations, in history order. */
export async function loadNotes(/** @type {string} */ visitorId) {
  const { body } = await callJson(`/agent/note/list?${new URLSearchParams({ visitor_id: visitorId })}`);
  return body.code === 0 ? /** @type {Note[]} */ (body.data.list) : [];
}

/** Writes an internal note on the visitor's conversation; resolves with the envelope. */
export async function writeNote(/** @type {string} */ visitorId, /** @type {string} */ content) {
  const { body } = await callJson('/agent/note/add', { method: 'POST', json: { visitor_id: visitorId, content } });
  return body;
}
