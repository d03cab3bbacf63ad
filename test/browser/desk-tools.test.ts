import { eq } from 'drizzle-orm';
import type { Browser, Page } from 'playwright-core';
import { expect, it } from 'vitest';
import { agents } from '../../src/db/schema.js';
import { closeConversation } from '../../src/resolvers/conversations/closing.js';
import { assignAgent } from '../../src/resolvers/conversations/routing.js';
import { createCannedResponse } from '../../src/resolvers/desk/canned.js';
import { sendMessage } from '../../src/resolvers/messages/send.js';
import { expectNoSeriousViolations } from '../support/axe.js';
import {
  type BrowserTab,
  describeInBrowser,
  waitUntilLive as live,
  openWorkbenchLoggedIn,
  screenshot,
  useBrowserApp,
  useChatTabs,
} from '../support/browser.js';
import { factories } from '../support/deps.js';
import type { TestApp } from '../support/test-app.js';

/**
 * The desk tools in the workbench, in Chromium (docs/desk.md "Desk tools"): an agent inserts a
 * canned response by typing `/shortcut`, labels the conversation (and filters the conversation
 * list by that label), and writes an internal note
 * that shows in its place in the history, marked — and never on the visitor's page.
 */

const poll = <T>(read: () => Promise<T>) => expect.poll(read, { timeout: 20_000, interval: 100 });
const STORY_TIMEOUT = 120_000;

let t: TestApp;
let browser: Browser;
useBrowserApp((made) => ({ t, browser } = made));

describeInBrowser('the workbench’s desk tools', () => {
  let agentTab: BrowserTab;
  let visitorTab: BrowserTab;
  let agent: Page;
  let visitor: Page;

  useChatTabs(
    () => browser,
    (made) => ({ agentTab, visitorTab, agent, visitor } = made),
  );

  it(
    '/shortcut inserts a canned response; a label goes on and off and filters the list; a note shows in its place, marked, and never reaches the visitor',
    async () => {
      // The demo merchant's admin ada keeps a merchant-wide response; alice uses it.
      const f = factories(t.app.deps);
      const [ada] = await t.app.deps.db.select().from(agents).where(eq(agents.username, 'ada'));
      if (!ada) throw new Error('no demo admin ada');
      const adaViewer = await f.agentViewer(ada.id);
      await createCannedResponse(t.app.deps, adaViewer, {
        shortcut: 'ship',
        content: 'Your parcel ships <b>today</b> & arrives tomorrow.',
        scope: 'merchant',
      });

      await openWorkbenchLoggedIn(agent, t, 'alice');
      await live(agent);
      await visitor.goto(`${t.url}/widget/frame?appkey=demo-appkey`);
      await visitor.locator('#main[data-visitor-id]').waitFor({ state: 'attached' });
      await live(visitor);
      const uid = (await visitor.locator('#main').getAttribute('data-visitor-id')) ?? '';
      await poll(() => visitor.locator('#chat-state').getAttribute('data-state')).toBe('active');
      await visitor.locator('#message-input').fill('When does it ship?');
      await visitor.getByRole('button', { name: 'Send', exact: true }).click();
      await agent.locator(`#conversation-list li[data-uid="${uid}"] .conversation-open`).click();
      await agent.locator('#messages li[data-sender="visitor"]', { hasText: 'When does it ship?' }).waitFor();

      // Typing /sh lists the response; Enter inserts it (hostile markup stays text) instead of sending.
      const input = agent.locator('#message-input');
      await input.pressSequentially('Hi! /sh');
      const option = agent.locator('#canned-picker [role="option"][data-shortcut="ship"]');
      await option.waitFor();
      await input.press('Enter');
      await poll(() => input.inputValue()).toBe('Hi! Your parcel ships <b>today</b> & arrives tomorrow.');
      expect(await agent.locator('#canned-picker').isHidden()).toBe(true);
      await agent.getByRole('button', { name: 'Send', exact: true }).click();
      await visitor
        .locator('#messages li[data-sender="agent"]', { hasText: 'Your parcel ships <b>today</b>' })
        .waitFor();
      expect(await visitor.locator('#messages b').count()).toBe(0);

      // A label: created from the workbench, shown on the conversation, taken off again.
      await agent.locator('#new-label').fill('Shipping <i>');
      await agent.getByRole('button', { name: 'Create label' }).click();
      const chip = agent.locator('#label-list .label-chip', { hasText: 'Shipping <i>' });
      await chip.waitFor();
      const labelled = await agent.evaluate(
        async (v) => (await (await fetch(`/agent/label/get?visitor_id=${v}`)).json()).data.labels,
        uid,
      );
      expect(labelled.map((l: { name: string }) => l.name)).toEqual(['Shipping <i>']);
      await chip.getByRole('button', { name: 'Remove label Shipping <i>' }).click();
      await poll(() => agent.locator('#label-list .label-chip').count()).toBe(0);
      await agent.locator('#label-select').selectOption({ label: 'Shipping <i>' });
      await chip.waitFor();

      // The list filters by label: of alice's two conversations only the labelled one shows, also
      // when an event redraws the list; All shows both again.
      const other = await f.visitor(
        { merchantId: 'm_demo', bid: 'demo', appkey: 'demo-appkey' },
        { nickname: 'Unlabelled visitor' },
      );
      await assignAgent(t.app.deps, other, { agentId: 'a_alice' });
      const row = (v: string) => agent.locator(`#conversation-list li[data-uid="${v}"]`);
      await row(other.visitorId).waitFor();
      const filter = agent.getByRole('combobox', { name: 'Label', exact: true });
      await filter.selectOption({ label: 'Shipping <i>' });
      await poll(() => row(other.visitorId).isHidden()).toBe(true);
      expect(await row(uid).isVisible()).toBe(true);
      await sendMessage(t.app.deps, other, { clientMsgId: 'unlabelled-1', content: 'Anyone there?' });
      await poll(() => row(other.visitorId).getAttribute('data-unread')).toBe('1');
      expect(await row(other.visitorId).isHidden()).toBe(true);
      expect(await row(uid).isVisible()).toBe(true);
      await filter.selectOption({ label: 'All' });
      await poll(() => row(other.visitorId).isVisible()).toBe(true);
      expect(await row(uid).isVisible()).toBe(true);
      await closeConversation(t.app.deps, other);

      // A note: written with the Note button, shown after the last message, marked; the visitor never sees it.
      const lastSeq = Number(await agent.locator('#messages li[data-seq]').last().getAttribute('data-seq'));
      await input.fill('VIP <script>alert(1)</script> — offer free shipping');
      await agent.getByRole('button', { name: 'Note', exact: true }).click();
      const note = agent.locator('#messages li.note', { hasText: 'offer free shipping' });
      await note.waitFor();
      expect(await note.getAttribute('data-after-seq')).toBe(String(lastSeq));
      expect(await note.locator('.message-sender').textContent()).toBe('Note · Alice');
      // Cleared when the note's answer arrives, which may come after its live event drew it.
      await poll(() => input.inputValue()).toBe('');
      // In its place: right after the message it follows, before what comes next.
      await visitor.locator('#message-input').fill('Thanks!');
      await visitor.getByRole('button', { name: 'Send', exact: true }).click();
      await agent.locator('#messages li[data-sender="visitor"]', { hasText: 'Thanks!' }).waitFor();
      const order = await agent
        .locator('#messages li')
        .evaluateAll((nodes) =>
          nodes.map((n) => ((n as HTMLElement).classList.contains('note') ? 'note' : (n as HTMLElement).dataset.seq)),
        );
      const at = order.indexOf('note');
      expect(order[at - 1]).toBe(String(lastSeq));
      expect(order[at + 1]).toBe(String(lastSeq + 1));
      // Reloading the workbench shows it again, from the note list.
      await agent.reload();
      await live(agent);
      await agent.locator(`#conversation-list li[data-uid="${uid}"] .conversation-open`).click();
      await agent.locator('#messages li.note', { hasText: 'offer free shipping' }).waitFor();
      expect(await agent.locator('#messages script').count()).toBe(0);
      await screenshot(agent, 'desk-tools-workbench');
      await expectNoSeriousViolations(agent, 'the workbench with a note and labels');

      // The visitor's page: the messages, no note (and no seq hole left to fetch).
      await visitor.locator('#messages li', { hasText: 'Thanks!' }).waitFor();
      expect(await visitor.locator('#messages').textContent()).not.toContain('free shipping');
      const seqs = (await visitor
        .locator('#messages li[data-seq]')
        .evaluateAll((nodes) => nodes.map((n) => Number((n as HTMLElement).dataset.seq)))) as number[];
      expect(seqs).toEqual(seqs.map((_, i) => (seqs[0] ?? 1) + i));
      await screenshot(visitor, 'desk-tools-visitor');
      expect(agentTab.problems).toEqual([]);
      expect(visitorTab.problems).toEqual([]);
    },
    STORY_TIMEOUT,
  );
});
