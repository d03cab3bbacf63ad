import { and, eq, inArray } from 'drizzle-orm';
import { z } from 'zod';
import { agentGroups, merchants, type RoutingRule, visitorAttributes } from '../../../db/schema.js';
import type { Deps } from '../../../deps.js';
import { DomainError } from '../../../errors.js';
import { auditedAgent, recordAudit } from '../../desk/audit.js';
import { parseInput, required } from '../../inputs.js';
import type { Tx } from '../../outbox/enqueue.js';
import { type AgentViewer, requireAdmin } from '../../viewer.js';

/**
 * Skills and priority (docs/availability.md "Skills and priority"). A merchant lists rules; each
 * matches a new conversation by a visitor attribute (`attribute` equals `equals`) or by its entry
 * page (`pageContains`), and gives it a required `skill` and/or a `priority`. A conversation
 * requires its group's skills plus those of every matching rule; its priority is the highest of
 * the matching rules' (0 when none). Computed once, when the conversation is opened.
 */

/** A skill name: 1-64 characters, compared as written (case-sensitive). */
export const skillName = required(64);
export const skillList = z
  .array(skillName)
  .max(50, 'at most 50 skills')
  .transform((s) => [...new Set(s)]);

export const routingRuleInput = z
  .object({
    attribute: required(64).optional(),
    equals: z.string().max(256).optional(),
    pageContains: required(256).optional(),
    skill: skillName.optional(),
    priority: z.number().int('must be a whole number').min(-100).max(100).optional(),
  })
  .strict()
  .refine((r) => (r.attribute === undefined) !== (r.pageContains === undefined), {
    message: 'a rule matches either an attribute (with equals) or a page (pageContains)',
  })
  .refine((r) => r.attribute === undefined || r.equals !== undefined, { message: 'attribute needs equals' })
  .refine((r) => r.skill !== undefined || r.priority !== undefined, { message: 'a rule gives a skill or a priority' });
export const routingRulesInput = z.object({ rules: z.array(routingRuleInput).max(100, 'at most 100 rules') });
export type RoutingRulesInput = z.input<typeof routingRulesInput>;

/** What the rules give a new conversation. */
export interface RoutingNeeds {
  requiredSkills: string[];
  priority: number;
}

const asText = (v: unknown) => (v === null || v === undefined ? null : String(v));

/** Pure: the skills and priority the rules (and the group's own skills) give a conversation. */
export function evaluateRules(
  rules: readonly RoutingRule[],
  attributes: ReadonlyMap<string, unknown>,
  entryPage: string | null,
  groupSkills: readonly string[] = [],
): RoutingNeeds {
  const skills = new Set(groupSkills);
  let priority: number | null = null;
  for (const rule of rules) {
    const matches =
      rule.attribute !== undefined
        ? asText(attributes.get(rule.attribute)) === rule.equals
        : rule.pageContains !== undefined && entryPage !== null && entryPage.includes(rule.pageContains);
    if (!matches) continue;
    if (rule.skill) skills.add(rule.skill);
    if (rule.priority !== undefined) priority = Math.max(priority ?? rule.priority, rule.priority);
  }
  return { requiredSkills: [...skills].sort(), priority: priority ?? 0 };
}

/** The needs of a new conversation of `visitorId` in `groupId`, read inside the opening transaction. */
export async function routingNeedsOf(
  tx: Tx,
  merchantId: string,
  visitorId: string,
  groupId: string | null,
  entryPage: string | null,
): Promise<RoutingNeeds> {
  const [m] = await tx.select({ rules: merchants.routingRules }).from(merchants).where(eq(merchants.id, merchantId));
  const [g] = groupId
    ? await tx.select({ skills: agentGroups.requiredSkills }).from(agentGroups).where(eq(agentGroups.id, groupId))
    : [];
  const rules = m?.rules ?? [];
  const keys = [...new Set(rules.flatMap((r) => (r.attribute ? [r.attribute] : [])))];
  const attrs = keys.length
    ? await tx
        .select({ key: visitorAttributes.key, value: visitorAttributes.value })
        .from(visitorAttributes)
        .where(and(eq(visitorAttributes.visitorId, visitorId), inArray(visitorAttributes.key, keys)))
    : [];
  return evaluateRules(rules, new Map(attrs.map((a) => [a.key, a.value])), entryPage, g?.skills ?? []);
}

/** The merchant's routing rules (admins). */
export async function getRoutingRules(deps: Deps, viewer: AgentViewer): Promise<RoutingRule[]> {
  requireAdmin(viewer);
  const [m] = await deps.db
    .select({ rules: merchants.routingRules })
    .from(merchants)
    .where(eq(merchants.id, viewer.merchantId));
  if (!m) throw new DomainError('NOT_FOUND', 'No such merchant');
  return m.rules;
}

/** Replaces the merchant's routing rules (admins, audited as `routing_rules.updated`); new conversations follow them. */
export async function updateRoutingRules(
  deps: Deps,
  viewer: AgentViewer,
  raw: RoutingRulesInput,
): Promise<RoutingRule[]> {
  requireAdmin(viewer);
  const rules: RoutingRule[] = parseInput(routingRulesInput, raw).rules.map((r) =>
    Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)),
  );
  await deps.db.transaction(async (tx) => {
    const [before] = await tx
      .select({ rules: merchants.routingRules })
      .from(merchants)
      .where(eq(merchants.id, viewer.merchantId))
      .for('update');
    await tx.update(merchants).set({ routingRules: rules }).where(eq(merchants.id, viewer.merchantId));
    await recordAudit(tx, {
      ...auditedAgent(viewer),
      action: 'routing_rules.updated',
      target: { type: 'merchant', id: viewer.merchantId },
      before: { rules: before?.rules ?? [] },
      after: { rules },
    });
  });
  return rules;
}
