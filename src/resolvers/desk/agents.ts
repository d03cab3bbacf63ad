import { and, asc, eq, inArray, ne, sql } from 'drizzle-orm';
import { z } from 'zod';
import { hashPassword } from '../../auth/passwords.js';
import { type Agent, agentGroups, agents, merchants } from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { newId } from '../../ids.js';
import { LEVELS } from '../admin.js';
import { skillList } from '../availability/routing/rules.js';
import { publishAgentLevelChanged } from '../events.js';
import { displayName, parseInput, required } from '../inputs.js';
import type { Tx } from '../outbox/enqueue.js';
import type { SessionDirectory } from '../session.js';
import { type AgentViewer, requireAdmin } from '../viewer.js';
import { type AgentProfile, loadAgentProfile } from '../workbench.js';
import { auditedAgent, recordAudit } from './audit.js';
import { endAllSessions } from './sessions.js';

/**
 * The admin surface's agents (docs/desk.md): an admin of a merchant creates its agents, changes
 * their nickname, level, capacity, group and password, disables and enables them. Each change is
 * one transaction with its audit row; the merchant always keeps one enabled admin.
 */

export type Level = (typeof LEVELS)[number];

/** What an admin sees of an agent's account besides its profile. */
export interface AgentAccount {
  username: string;
  disabled: boolean;
  /** Its own capacity (active conversations at most); null: the merchant's default. */
  capacity: number | null;
  /** Its groups (today one at most; none: the merchant's default group). */
  groupIds: string[];
  /** What it can handle: the SKILLS routing policy gives it conversations requiring these (docs/availability.md). */
  skills: string[];
  createdAt: Date;
}

/** An agent as its admins see it: the public profile (with its state) and the account. */
export type DeskAgent = AgentProfile & { account: AgentAccount };

export const usernameInput = z
  .string({ invalid_type_error: 'must be a single string' })
  .regex(/^[A-Za-z0-9_.@-]{1,64}$/, 'must be 1-64 letters, digits or _ . @ -');
export const passwordInput = z
  .string({ invalid_type_error: 'must be a single string' })
  .min(8, 'must be at least 8 characters')
  .max(256, 'must be at most 256 characters');
const nickname = displayName(64).refine((s) => s.trim().length > 0, 'is required');
const capacity = z.number().int('must be a whole number').min(1).max(1000);
/** A list so that membership of several groups can come without changing the contract; one group today. */
const groupIds = z.array(required(64)).max(1, 'an agent belongs to one group (or none: the default group)');
const agentId = required(64);

export const createAgentInput = z.object({
  username: usernameInput,
  nickname,
  password: passwordInput,
  level: z.enum(LEVELS).default('agent'),
  capacity: capacity.nullable().optional(),
  groupIds: groupIds.optional(),
});
export type CreateAgentInput = z.input<typeof createAgentInput>;

export const updateAgentInput = z.object({
  agentId,
  nickname: nickname.optional(),
  level: z.enum(LEVELS).optional(),
  /** null: back to the merchant's default. */
  capacity: capacity.nullable().optional(),
  groupIds: groupIds.optional(),
  /** A new password: the agent's Sessions end (it logs in again with it). */
  password: passwordInput.optional(),
  /** Its skills, the complete list (docs/availability.md "Skills and priority"). */
  skills: skillList.optional(),
});
export type UpdateAgentInput = z.input<typeof updateAgentInput>;

export const agentRefInput = z.object({ agentId });
export type AgentRefInput = z.input<typeof agentRefInput>;

const accountOf = (a: Agent): AgentAccount => ({
  username: a.username,
  disabled: a.disabled,
  capacity: a.maxConcurrentChats,
  groupIds: a.groupId ? [a.groupId] : [],
  skills: a.skills,
  createdAt: a.createdAt,
});

/** The admin's view of an agent row, with its current state. */
export async function deskAgentOf(deps: Deps, a: Agent): Promise<DeskAgent> {
  return { ...(await loadAgentProfile(deps, a)), account: accountOf(a) };
}

/** What the audit log keeps of an agent (never its password). */
const audited = (a: Agent) => {
  const { username, disabled, capacity, groupIds, skills } = accountOf(a);
  return { username, nickname: a.nickname, level: a.level, disabled, capacity, groupIds, skills };
};

/** The merchant's agents, by username (admins only). */
export async function listAgents(deps: Deps, viewer: AgentViewer): Promise<DeskAgent[]> {
  requireAdmin(viewer);
  const rows = await deps.db
    .select()
    .from(agents)
    .where(eq(agents.merchantId, viewer.merchantId))
    .orderBy(asc(sql`lower(${agents.username})`));
  return Promise.all(rows.map((row) => deskAgentOf(deps, row)));
}

/** Checks that the groups are the merchant's; returns the one group id (or null). */
async function groupOf(db: Deps['db'] | Tx, merchantId: string, ids: string[] | undefined): Promise<string | null> {
  const [id] = ids ?? [];
  if (id === undefined) return null;
  const [group] = await db
    .select({ id: agentGroups.id })
    .from(agentGroups)
    .where(and(eq(agentGroups.id, id), eq(agentGroups.merchantId, merchantId)));
  if (!group) throw new DomainError('NOT_FOUND', 'No such agent group');
  return group.id;
}

/** Creates an agent of the admin's merchant (usernames are unique across Parley, case-insensitively). */
export async function createDeskAgent(deps: Deps, viewer: AgentViewer, raw: CreateAgentInput): Promise<DeskAgent> {
  requireAdmin(viewer);
  const input = parseInput(createAgentInput, raw);
  const passwordHash = await hashPassword(input.password);
  const row = await deps.db.transaction(async (tx) => {
    const groupId = await groupOf(tx, viewer.merchantId, input.groupIds);
    const [row] = await tx
      .insert(agents)
      .values({
        id: newId('a'),
        merchantId: viewer.merchantId,
        groupId,
        username: input.username,
        passwordHash,
        nickname: input.nickname,
        level: input.level,
        maxConcurrentChats: input.capacity ?? null,
      })
      .onConflictDoNothing()
      .returning();
    if (!row) throw new DomainError('BAD_USER_INPUT', 'username is already taken');
    await recordAudit(tx, {
      ...auditedAgent(viewer),
      action: 'agent.created',
      target: { type: 'agent', id: row.id },
      before: null,
      after: audited(row),
    });
    return row;
  });
  return deskAgentOf(deps, row);
}

/**
 * The agent `agentId` of the merchant, locked for the change. The merchant's row is locked
 * first: changes to one merchant's agents take their turn, so two admins demoting or disabling
 * each other at once cannot each hold their own row while waiting for the other's (a deadlock
 * on PostgreSQL), and the last-admin check sees the other's outcome.
 */
async function lockAgent(tx: Tx, merchantId: string, agentId: string): Promise<Agent> {
  await tx.select({ id: merchants.id }).from(merchants).where(eq(merchants.id, merchantId)).for('update');
  const [row] = await tx
    .select()
    .from(agents)
    .where(and(eq(agents.id, agentId), eq(agents.merchantId, merchantId)))
    .for('update');
  if (!row) throw new DomainError('NOT_FOUND', 'No such agent');
  return row;
}

/**
 * Refuses a change that would leave the merchant without an enabled admin. Called under the
 * merchant's lock (lockAgent), so two admins demoting each other at once cannot both succeed.
 */
async function keepAnAdmin(tx: Tx, merchantId: string, leaving: string) {
  const others = await tx
    .select({ id: agents.id })
    .from(agents)
    .where(and(eq(agents.merchantId, merchantId), eq(agents.level, 'admin'), eq(agents.disabled, false)))
    .for('update');
  if (!others.some((a) => a.id !== leaving)) {
    throw new DomainError(
      'LAST_ADMIN',
      'The merchant must keep at least one enabled admin: make another agent admin first',
    );
  }
}

/**
 * Changes an agent's nickname, level, capacity, group or password. A new password ends the
 * agent's Sessions on every instance; a new level is announced on its channel
 * (`agent.level_changed`), which ends the subscriptions the level no longer allows (an ex-admin's
 * `admin-{bid}`) on every instance; demoting the last enabled admin is refused (LAST_ADMIN).
 */
export async function updateDeskAgent(
  deps: Deps,
  viewer: AgentViewer,
  raw: UpdateAgentInput,
  sessions: SessionDirectory,
): Promise<DeskAgent> {
  requireAdmin(viewer);
  const input = parseInput(updateAgentInput, raw);
  const passwordHash = input.password === undefined ? undefined : await hashPassword(input.password);
  let levelBefore: string | undefined;
  const updated = await deps.db.transaction(async (tx) => {
    const row = await lockAgent(tx, viewer.merchantId, input.agentId);
    levelBefore = row.level;
    if (row.level === 'admin' && input.level !== undefined && input.level !== 'admin' && !row.disabled) {
      await keepAnAdmin(tx, viewer.merchantId, row.id);
    }
    const set: Partial<typeof agents.$inferInsert> = {};
    if (input.nickname !== undefined) set.nickname = input.nickname;
    if (input.level !== undefined) set.level = input.level;
    if (input.capacity !== undefined) set.maxConcurrentChats = input.capacity;
    if (input.skills !== undefined) set.skills = input.skills;
    if (input.groupIds !== undefined) set.groupId = await groupOf(tx, viewer.merchantId, input.groupIds);
    if (passwordHash !== undefined) set.passwordHash = passwordHash;
    const [after = row] = Object.keys(set).length
      ? await tx.update(agents).set(set).where(eq(agents.id, row.id)).returning()
      : [row];
    await recordAudit(tx, {
      ...auditedAgent(viewer),
      action: 'agent.updated',
      target: { type: 'agent', id: row.id },
      before: audited(row),
      after: { ...audited(after), ...(passwordHash ? { passwordChanged: true } : {}) },
    });
    return after;
  });
  if (passwordHash !== undefined) await endAllSessions(deps, sessions, updated.id, 'password_reset');
  // Open subscriptions were authorised by the old level: every instance judges them again.
  if (updated.level !== levelBefore) await publishAgentLevelChanged(deps, updated.id, updated.level);
  return deskAgentOf(deps, updated);
}

/**
 * Disables or enables an agent. A disabled agent cannot log in, and its Sessions end at once
 * (its sockets close with 4401 on every instance); disabling the last enabled admin is refused.
 */
export async function setAgentDisabled(
  deps: Deps,
  viewer: AgentViewer,
  raw: AgentRefInput,
  disabled: boolean,
  sessions: SessionDirectory,
): Promise<DeskAgent> {
  requireAdmin(viewer);
  const input = parseInput(agentRefInput, raw);
  const updated = await deps.db.transaction(async (tx) => {
    const row = await lockAgent(tx, viewer.merchantId, input.agentId);
    if (disabled && row.level === 'admin' && !row.disabled) await keepAnAdmin(tx, viewer.merchantId, row.id);
    const [after] = await tx
      .update(agents)
      .set({ disabled })
      .where(and(eq(agents.id, row.id), ne(agents.disabled, disabled)))
      .returning();
    if (after) {
      await recordAudit(tx, {
        ...auditedAgent(viewer),
        action: disabled ? 'agent.disabled' : 'agent.enabled',
        target: { type: 'agent', id: row.id },
        before: { disabled: row.disabled },
        after: { disabled },
      });
    }
    return after ?? row;
  });
  if (disabled) await endAllSessions(deps, sessions, updated.id, 'disabled');
  return deskAgentOf(deps, updated);
}

/** The merchant's agents among `ids` (the others are not its own). */
export async function agentsOfMerchant(db: Deps['db'] | Tx, merchantId: string, ids: string[]) {
  if (ids.length === 0) return [];
  return db
    .select()
    .from(agents)
    .where(and(eq(agents.merchantId, merchantId), inArray(agents.id, ids)));
}
