import { AxeBuilder } from '@axe-core/playwright';
import type { Result } from 'axe-core';
import type { Page } from 'playwright-core';
import { expect } from 'vitest';

/**
 * The accessibility check every page test runs (issue 34, "Pages people use all day"): axe-core
 * through @axe-core/playwright with the WCAG 2.0/2.1/2.2 A and AA rules, in the page's current
 * state. Serious and critical violations fail the test, with each rule, its help text and the
 * first offending elements in the message; minor and moderate ones are only reported.
 *
 * axe runs inside the page (injected through the DevTools protocol, so the pages' CSP is not
 * loosened): a page that trips its CSP still fails on `tab.problems` as before.
 */
export const WCAG_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'];
const FAILING = new Set(['serious', 'critical']);

/** Runs axe on the page (or on `include`, a CSS selector) and answers the serious/critical violations. */
export async function seriousViolations(page: Page, include?: string): Promise<Result[]> {
  // Only the violations are read: the other result types keep one node each instead of every
  // node's selector (axe's documented performance option; the rules run all the same).
  let builder = new AxeBuilder({ page }).options({ resultTypes: ['violations'] }).withTags(WCAG_TAGS);
  if (include) builder = builder.include(include);
  // With no cross-origin frame, one axe.run in the page (frames included, same-origin messaging)
  // finds what runPartial + finishRun find, without the blank page finishRun opens for each check
  // (a renderer process and a second axe injection). A cross-origin frame needs the blank page.
  const origin = new URL(page.url()).origin;
  const sameOrigin = (url: string) => url === 'about:blank' || url === '' || new URL(url).origin === origin;
  if (page.frames().every((frame) => sameOrigin(frame.url()))) builder = builder.setLegacyMode(true);
  const results = await builder.analyze();
  return results.violations.filter((v) => FAILING.has(v.impact ?? ''));
}

/** One line per violation: the rule, its impact, its help, and up to three element selectors. */
export const describeViolations = (violations: Result[]) =>
  violations
    .map(
      (v) =>
        `${v.id} (${v.impact}): ${v.help} — ${v.nodes
          .slice(0, 3)
          .map((n) => `${n.target.join(' ')}${n.failureSummary ? ` [${n.failureSummary.replace(/\s+/g, ' ')}]` : ''}`)
          .join('; ')}${v.nodes.length > 3 ? ` (+${v.nodes.length - 3} more)` : ''}`,
    )
    .join('\n');

/**
 * Fails the test when axe finds a serious or critical WCAG 2.2 AA violation on the page as it is
 * now. `label` names the page and state in the failure ("workbench, conversation open").
 */
export async function expectNoSeriousViolations(page: Page, label: string, options: { include?: string } = {}) {
  const violations = await seriousViolations(page, options.include);
  expect(describeViolations(violations), `axe: serious or critical violations on ${label}`).toBe('');
}
