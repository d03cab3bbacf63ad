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
  let builder = new AxeBuilder({ page }).withTags(WCAG_TAGS);
  if (include) builder = builder.include(include);
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
