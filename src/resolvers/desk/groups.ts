import { and, asc, desc, eq, inArray, notInArray, sql } from 'drizzle-orm';
import { z } from 'zod';
import { agentGroups, agents } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { newId } from '../../ids.js';
import { ROUTING_POLICIES, type RoutingPolicy } from '../availability/routing/policies.js';
import { skillList } from '../availability/routing/rules.js';
import { displayName, parseInput, required } from '../inputs.js';
import { announceMerchantConfigChanged } from '../merchant-config.js';
import type { Tx } from '../outbox/enqueue.js';
import { type AgentViewer, requireAdmin } from '../viewer.js';
import { agentsOfMerchant } from './agents.js';
import { auditedAgent, recordAudit } from './audit.js';
import { isUniqueViolation } from './constraints.js';

/**
 * The admin surface's agent groups (docs/desk.md): create, rename, choose the default group, set
 * the members. Groups are part of the merchant's cached configuration: every change is announced,
 * so every instance's bootstraps show it within a second.
 */

export interface DeskGroup {
  id: string;
  name: string;
  isDefault: boolean;
  position: number;
  /** Agents in the group, by id (agents without a group are in the default group's queue). */
  memberIds: string[];
  /** Routing policy (docs/availability.md). */
  routing: RoutingPolicy;
  /** Skills every conversation of the group requires under SKILLS (docs/availability.md). */
  requiredSkills: string[];
}

const name = displayName(64).refine((s) => s.trim().length > 0, 'is required');

export const createAgentGroupInput = z.object({
  name,
  isDefault: z.boolean().optional(),
  memberIds: z.array(required(64)).max(1000).optional(),
});
export type CreateAgentGroupInput = z.input<typeof createAgentGroupInput>;

/**
 * Every field but `id` is optional and means "leave as it is", so fields can be added later (a
 * routing policy) without changing what existing callers send.
 */
export const updateAgentGroupInput = z.object({
  id: required(64),
  name: name.optional(),
  /** true: this becomes the default group (the previous default stops being it). false is refused on the default group. */
  isDefault: z.boolean().optional(),
  position: z.number().int().min(0).max(10_000).optional(),
  /** The complete member list: these agents move into the group, the others in it leave it (to the default queue). */
  memberIds: z.array(required(64)).max(1000).optional(),
  /** The routing policy of the group's queue (docs/availability.md). */
  routing: z.enum(ROUTING_POLICIES).optional(),
  /** Skills every new conversation of the group requires (the complete list). */
  requiredSkills: skillList.optional(),
});
export type UpdateAgentGroupInput = z.input<typeof updateAgentGroupInput>;

/** The merchant's groups, the default first (admins only). */
export async function listAgentGroups(deps: Deps, viewer: AgentViewer): Promise<DeskGroup[]> {
  requireAdmin(viewer);
  return groupsOf(deps.db, viewer.merchantId);
}

async function groupsOf(db: Deps['db'] | Tx, merchantId: string, only?: string): Promise<DeskGroup[]> {
  const rows = await db
    .select()
    .from(agentGroups)
    .where(and(eq(agentGroups.merchantId, merchantId), only ? eq(agentGroups.id, only) : undefined))
    .orderBy(desc(agentGroups.isDefault), asc(agentGroups.position), asc(agentGroups.name));
  const members = await db
    .select({ id: agents.id, groupId: agents.groupId })
    .from(agents)
    .where(and(eq(agents.merchantId, merchantId), sql`${agents.groupId} is not null`))
    .orderBy(asc(agents.id));
  return rows.map((g) => ({
    id: g.id,
    name: g.name,
    isDefault: g.isDefault,
    position: g.position,
    memberIds: members.filter((m) => m.groupId === g.id).map((m) => m.id),
    routing: g.routing as RoutingPolicy,
    requiredSkills: g.requiredSkills,
  }));
}

const audited = (g: DeskGroup) => ({
  name: g.name,
  isDefault: g.isDefault,
  position: g.position,
  memberIds: g.memberIds,
  routing: g.routing,
  requiredSkills: g.requiredSkills,
});

/** Makes `id` the merchant's only default group (the unique index allows one: the old one goes first). */
async function makeDefault(tx: Tx, merchantId: string, id: string) {
  await tx
    .update(agentGroups)
    .set({ isDefault: false })
    .where(and(eq(agentGroups.merchantId, merchantId), eq(agentGroups.isDefault, true)));
  await tx.update(agentGroups).set({ isDefault: true }).where(eq(agentGroups.id, id));
}

/** Moves exactly `memberIds` into group `id` (the merchant's agents only); its other members leave it. */
async function setMembers(tx: Tx, merchantId: string, id: string, memberIds: string[]) {
  const found = await agentsOfMerchant(tx, merchantId, memberIds);
  if (found.length !== new Set(memberIds).size) throw new DomainError('NOT_FOUND', 'No such agent');
  await tx
    .update(agents)
    .set({ groupId: null })
    .where(
      and(
        eq(agents.merchantId, merchantId),
        eq(agents.groupId, id),
        memberIds.length ? notInArray(agents.id, memberIds) : undefined,
      ),
    );
  if (memberIds.length)
    await tx
      .update(agents)
      .set({ groupId: id })
      .where(and(eq(agents.merchantId, merchantId), inArray(agents.id, memberIds)));
}

/** Creates a group of the admin's merchant (names are unique within the merchant). */
export async function createAgentGroup(
  deps: Deps,
  viewer: AgentViewer,
  raw: CreateAgentGroupInput,
): Promise<DeskGroup> {
  requireAdmin(viewer);
  const input = parseInput(createAgentGroupInput, raw);
  const group = await deps.db.transaction(async (tx) => {
    const id = newId('g');
    const [{ next } = { next: 0 }] = await tx
      .select({ next: sql<number>`coalesce(max(${agentGroups.position}) + 1, 0)::int` })
      .from(agentGroups)
      .where(eq(agentGroups.merchantId, viewer.merchantId));
    const [row] = await tx
      .insert(agentGroups)
      .values({ id, merchantId: viewer.merchantId, name: input.name, position: next })
      .onConflictDoNothing()
      .returning();
    if (!row) throw new DomainError('BAD_USER_INPUT', 'name is already taken by another group');
    if (input.isDefault) await makeDefault(tx, viewer.merchantId, id);
    if (input.memberIds) await setMembers(tx, viewer.merchantId, id, input.memberIds);
    const [created] = await groupsOf(tx, viewer.merchantId, id);
    if (!created) throw new Error('the created group is gone');
    await recordAudit(tx, {
      ...auditedAgent(viewer),
      action: 'agent_group.created',
      target: { type: 'agent_group', id },
      before: null,
      after: audited(created),
    });
    return created;
  });
  await announceMerchantConfigChanged(deps, viewer.merchantId);
  return group;
}

/** Renames a group, makes it the default, moves it, or sets its members. */
export async function updateAgentGroup(
  deps: Deps,
  viewer: AgentViewer,
  raw: UpdateAgentGroupInput,
): Promise<DeskGroup> {
  requireAdmin(viewer);
  const input = parseInput(updateAgentGroupInput, raw);
  const group = await deps.db.transaction(async (tx) => {
    const [locked] = await tx
      .select({ id: agentGroups.id })
      .from(agentGroups)
      .where(and(eq(agentGroups.id, input.id), eq(agentGroups.merchantId, viewer.merchantId)))
      .for('update');
    const [before] = locked ? await groupsOf(tx, viewer.merchantId, locked.id) : [];
    if (!before) throw new DomainError('NOT_FOUND', 'No such agent group');
    if (input.isDefault === false && before.isDefault) {
      throw new DomainError('BAD_USER_INPUT', 'isDefault: make another group the default instead');
    }
    const set: Partial<typeof agentGroups.$inferInsert> = {};
    if (input.name !== undefined) set.name = input.name;
    if (input.position !== undefined) set.position = input.position;
    if (input.requiredSkills !== undefined) set.requiredSkills = input.requiredSkills;
    if (input.routing !== undefined && input.routing !== before.routing) {
      set.routing = input.routing;
      set.routingCursor = null;
    }
    if (Object.keys(set).length) {
      const renamed = await tx
        .update(agentGroups)
        .set(set)
        .where(eq(agentGroups.id, before.id))
        .returning()
        .catch((error: unknown) => {
          if (isUniqueViolation(error)) return [];
          throw error;
        });
      if (renamed.length === 0) throw new DomainError('BAD_USER_INPUT', 'name is already taken by another group');
    }
    if (input.isDefault && !before.isDefault) await makeDefault(tx, viewer.merchantId, before.id);
    if (input.memberIds) await setMembers(tx, viewer.merchantId, before.id, input.memberIds);
    const [after] = await groupsOf(tx, viewer.merchantId, before.id);
    if (!after) throw new Error('the updated group is gone');
    await recordAudit(tx, {
      ...auditedAgent(viewer),
      action: 'agent_group.updated',
      target: { type: 'agent_group', id: before.id },
      before: audited(before),
      after: audited(after),
    });
    return after;
  });
  await announceMerchantConfigChanged(deps, viewer.merchantId);
  return group;
}
