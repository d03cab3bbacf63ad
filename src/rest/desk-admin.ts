import type { Request } from 'express';
import { z } from 'zod';
import { notLoggedIn } from '../errors.js';
import { clientIp } from '../http/request.js';
import { requestSessionPort, sessionDirectory } from '../http/session.js';
import { LEVELS } from '../resolvers/admin.js';
import { ROUTING_POLICIES } from '../resolvers/availability/routing/policies.js';
import {
  createDeskAgent,
  type DeskAgent,
  listAgents,
  setAgentDisabled,
  updateDeskAgent,
} from '../resolvers/desk/agents.js';
import { type AuditLogPage, readAuditLog } from '../resolvers/desk/audit.js';
import { createAgentGroup, type DeskGroup, listAgentGroups, updateAgentGroup } from '../resolvers/desk/groups.js';
import { registerMerchant } from '../resolvers/desk/registration.js';
import { type AgentSession, endAgentSession, listSessions } from '../resolvers/desk/sessions.js';
import { type AnyRoute, jsonRoute } from './route.js';

/**
 * The merchant's desk over REST (docs/desk.md): registration, the admin surface's agents, groups
 * and audit log under /agent/admin/*, and the Session list under /agent/session/*; the same
 * domain functions as GraphQL. Settings are in desk-settings.ts. snake_case at this edge only.
 */

const directoryOf = (req: Request) => {
  if (!req.sessionStore) throw notLoggedIn();
  return sessionDirectory(req.sessionStore);
};

// ---- output shapes -------------------------------------------------------------------------

export const agentData = z
  .object({
    id: z.string(),
    agent_id: z.string(),
    username: z.string(),
    nickname: z.string(),
    avatar: z.string(),
    level: z.string().openapi({ description: 'admin, agent or ticket_agent.' }),
    state: z.string().openapi({ description: 'online, offline, busy or away.' }),
    disabled: z.boolean(),
    capacity: z.number().int().nullable().openapi({ description: 'null: the merchant’s max_concurrent_chats.' }),
    group_ids: z.array(z.string()),
    skills: z.array(z.string()).openapi({ description: 'What it can handle (the SKILLS routing policy).' }),
    created_at: z.string(),
  })
  .strict();

export const legacyAgent = (a: DeskAgent): z.input<typeof agentData> => ({
  id: a.agentId,
  agent_id: a.agentId,
  username: a.account.username,
  nickname: a.nickname,
  avatar: a.avatar,
  level: a.level,
  state: a.state,
  disabled: a.account.disabled,
  capacity: a.account.capacity,
  group_ids: a.account.groupIds,
  skills: a.account.skills,
  created_at: a.account.createdAt.toISOString(),
});

const groupData = z
  .object({
    id: z.string(),
    name: z.string(),
    is_default: z.boolean(),
    position: z.number().int(),
    member_ids: z.array(z.string()),
    routing: z.enum(ROUTING_POLICIES),
    required_skills: z.array(z.string()),
  })
  .strict();
const legacyGroup = (g: DeskGroup): z.input<typeof groupData> => ({
  id: g.id,
  name: g.name,
  is_default: g.isDefault,
  position: g.position,
  member_ids: g.memberIds,
  routing: g.routing,
  required_skills: g.requiredSkills,
});

const auditData = z
  .object({
    entries: z.array(
      z
        .object({
          id: z.string(),
          actor: z.object({ kind: z.string(), id: z.string(), name: z.string() }).strict(),
          action: z.string(),
          target_type: z.string(),
          target_id: z.string(),
          before: z.record(z.string(), z.unknown()).nullable(),
          after: z.record(z.string(), z.unknown()).nullable(),
          client_address: z.string().nullable(),
          created_at: z.string(),
        })
        .strict(),
    ),
    end_cursor: z.string().nullable(),
    has_next_page: z.boolean(),
  })
  .strict();
const legacyAudit = (p: AuditLogPage): z.input<typeof auditData> => ({
  entries: p.entries.map((e) => ({
    id: e.id,
    actor: e.actor,
    action: e.action,
    target_type: e.target.type,
    target_id: e.target.id,
    before: e.before,
    after: e.after,
    client_address: e.clientAddress,
    created_at: e.createdAt.toISOString(),
  })),
  end_cursor: p.endCursor,
  has_next_page: p.hasNextPage,
});

const sessionData = z
  .object({
    id: z.string().openapi({ description: '`<agent_id>:<fingerprint>`, never the Session ID.' }),
    agent_id: z.string(),
    device: z.string(),
    address: z.string(),
    created_at: z.string().nullable(),
    last_seen_at: z.string().nullable(),
    current: z.boolean(),
  })
  .strict();
const legacySession = (s: AgentSession): z.input<typeof sessionData> => ({
  id: s.id,
  agent_id: s.agentId,
  device: s.device,
  address: s.address,
  created_at: s.createdAt?.toISOString() ?? null,
  last_seen_at: s.lastSeenAt?.toISOString() ?? null,
  current: s.current,
});

// ---- inputs (legacy names → the domain's) ----------------------------------------------------

const ids = z.array(z.string()).openapi({ description: 'Group ids (one at most today).' });
const createAgentBody = z
  .object({
    username: z.string(),
    nickname: z.string(),
    password: z.string(),
    level: z.enum(LEVELS).optional(),
    capacity: z.number().int().nullable().optional(),
    group_ids: ids.optional(),
  })
  .transform(({ group_ids, ...rest }) => ({ ...rest, groupIds: group_ids }));
const updateAgentBody = z
  .object({
    agent_id: z.string(),
    nickname: z.string().optional(),
    level: z.enum(LEVELS).optional(),
    capacity: z.number().int().nullable().optional().openapi({ description: 'null: back to the merchant’s default.' }),
    group_ids: ids.optional(),
    password: z.string().optional().openapi({ description: 'A new password: the agent’s Sessions end.' }),
    skills: z
      .array(z.string())
      .optional()
      .openapi({ description: 'Its skills, the complete list (the SKILLS routing policy).' }),
  })
  .transform(({ agent_id, group_ids, ...rest }) => ({ ...rest, agentId: agent_id, groupIds: group_ids }));
const agentRefBody = z.object({ agent_id: z.string() }).transform((i) => ({ agentId: i.agent_id }));
const createGroupBody = z
  .object({ name: z.string(), is_default: z.boolean().optional(), member_ids: z.array(z.string()).optional() })
  .transform((i) => ({ name: i.name, isDefault: i.is_default, memberIds: i.member_ids }));
const updateGroupBody = z
  .object({
    id: z.string(),
    name: z.string().optional(),
    is_default: z.boolean().optional(),
    position: z.number().int().optional(),
    member_ids: z.array(z.string()).optional().openapi({ description: 'The complete member list.' }),
    routing: z
      .enum(ROUTING_POLICIES)
      .optional()
      .openapi({ description: 'LEAST_BUSY, ROUND_ROBIN, SKILLS or LAST_AGENT (docs/availability.md).' }),
    required_skills: z
      .array(z.string())
      .optional()
      .openapi({ description: 'Skills every new conversation of the group requires (the complete list).' }),
  })
  .transform((i) => ({
    id: i.id,
    name: i.name,
    isDefault: i.is_default,
    position: i.position,
    routing: i.routing,
    memberIds: i.member_ids,
    requiredSkills: i.required_skills,
  }));
const auditQuery = z
  .object({
    first: z.coerce.number().int().optional(),
    after: z.string().optional(),
    action: z.string().optional(),
    actor_id: z.string().optional(),
    target_type: z.string().optional(),
    target_id: z.string().optional(),
  })
  .transform((i) => ({
    first: i.first,
    after: i.after,
    action: i.action,
    actorId: i.actor_id,
    targetType: i.target_type,
    targetId: i.target_id,
  }));
const registerBody = z
  .object({
    merchant_name: z.string(),
    username: z.string(),
    nickname: z.string(),
    password: z.string(),
    mobile: z.string().optional().openapi({ description: 'SMS_REGISTRATION=on: the verified number.' }),
    code: z.string().optional().openapi({ description: 'SMS_REGISTRATION=on: its SMS code.' }),
    captcha: z.string().optional().openapi({ description: 'SMS_REGISTRATION=off: the join captcha.' }),
    bid: z.string().optional(),
    appkey: z.string().optional(),
  })
  .transform(({ merchant_name, ...rest }) => ({ ...rest, merchantName: merchant_name }));

const ADMIN = 'Agent admin';
const adminOnly = 'Admins only: another level gets 1403 (HTTP 403).';

export const deskAdminEndpoints: AnyRoute[] = [
  jsonRoute({
    method: 'post',
    path: '/agent/login/register',
    identity: 'session',
    tag: 'Agent login',
    summary: 'Register a merchant',
    description:
      'REGISTRATION=on only (else 1010). SMS_REGISTRATION=off: `captcha` is the join captcha of this Session; on: `mobile` and `code` (the code sent to it, unless verified in this Session) — one merchant per number (a second gets 1011). Creates the merchant, its Default group and the first agent (level admin) in one transaction and logs that agent in (new Session).',
    input: registerBody,
    requestExample: {
      merchant_name: 'Lantern Books',
      username: 'lantern-admin',
      nickname: 'Lin',
      password: 'a-long-password',
      captcha: 'x7kq',
    },
    output: z.object({ token: z.string(), redirect: z.string(), bid: z.string(), appkey: z.string() }).strict(),
    example: {
      token: 'kq3Jm1x0b8bq7TcMZ3RgfQAd9s0LwZ7e',
      redirect: '/agent/admin',
      bid: 'mq7x0a1b2c3d4',
      appkey: 'mq7x0a1b2c3d4-Zx81',
    },
    handle: ({ deps, req, input }) =>
      registerMerchant(deps, requestSessionPort(req), input, clientIp(req, deps.config)),
  }),
  jsonRoute({
    method: 'get',
    path: '/agent/admin/agents',
    identity: 'agent',
    tag: ADMIN,
    summary: 'The merchant’s agents',
    description: adminOnly,
    output: z.array(agentData),
    handle: async ({ deps, viewer }) => (await listAgents(deps, viewer)).map(legacyAgent),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/admin/agent/create',
    identity: 'agent',
    tag: ADMIN,
    summary: 'Create an agent',
    description: `${adminOnly} Audited \`agent.created\`.`,
    encodings: ['json'],
    input: createAgentBody,
    requestExample: { username: 'carol', nickname: 'Carol', password: 'carol-password', level: 'agent' },
    output: agentData,
    handle: async ({ deps, viewer, input }) => legacyAgent(await createDeskAgent(deps, viewer, input)),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/admin/agent/update',
    identity: 'agent',
    tag: ADMIN,
    summary: 'Change an agent (nickname, level, capacity, group, password)',
    description: `${adminOnly} Absent fields stay. Demoting the last enabled admin: 1012. Audited \`agent.updated\`.`,
    encodings: ['json'],
    input: updateAgentBody,
    requestExample: { agent_id: 'a_alice', capacity: 3 },
    output: agentData,
    handle: async ({ deps, req, viewer, input }) =>
      legacyAgent(await updateDeskAgent(deps, viewer, input, directoryOf(req))),
  }),
  ...([true, false] as const).map((disabled) =>
    jsonRoute({
      method: 'post',
      path: disabled ? '/agent/admin/agent/disable' : '/agent/admin/agent/enable',
      identity: 'agent',
      tag: ADMIN,
      summary: disabled ? 'Disable an agent' : 'Enable an agent',
      description: disabled
        ? `${adminOnly} Its Sessions end and its sockets close (4401) on every instance; the last enabled admin: 1012.`
        : adminOnly,
      input: agentRefBody,
      requestExample: { agent_id: 'a_dave' },
      output: agentData,
      handle: async ({ deps, req, viewer, input }) =>
        legacyAgent(await setAgentDisabled(deps, viewer, input, disabled, directoryOf(req))),
    }),
  ),
  jsonRoute({
    method: 'get',
    path: '/agent/admin/groups',
    identity: 'agent',
    tag: ADMIN,
    summary: 'The merchant’s agent groups with their members',
    description: adminOnly,
    output: z.array(groupData),
    handle: async ({ deps, viewer }) => (await listAgentGroups(deps, viewer)).map(legacyGroup),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/admin/group/create',
    identity: 'agent',
    tag: ADMIN,
    summary: 'Create an agent group',
    description: `${adminOnly} Audited \`agent_group.created\`.`,
    encodings: ['json'],
    input: createGroupBody,
    requestExample: { name: 'Returns' },
    output: groupData,
    handle: async ({ deps, viewer, input }) => legacyGroup(await createAgentGroup(deps, viewer, input)),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/admin/group/update',
    identity: 'agent',
    tag: ADMIN,
    summary: 'Rename a group, make it the default, move it, set its members',
    description: `${adminOnly} Absent fields stay. Audited \`agent_group.updated\`.`,
    encodings: ['json'],
    input: updateGroupBody,
    requestExample: { id: 'g_demo_sales', name: 'Sales EU' },
    output: groupData,
    handle: async ({ deps, viewer, input }) => legacyGroup(await updateAgentGroup(deps, viewer, input)),
  }),
  jsonRoute({
    method: 'get',
    path: '/agent/admin/audit',
    identity: 'agent',
    tag: ADMIN,
    summary: 'The audit log',
    description: `${adminOnly} Newest first; \`first\` 1-100 (default 20), \`after\` the previous page's end_cursor; filters action, actor_id, target_type, target_id. Read-only.`,
    input: auditQuery,
    requestExample: { first: 20 },
    output: auditData,
    handle: async ({ deps, viewer, input }) => legacyAudit(await readAuditLog(deps, viewer, input)),
  }),
  jsonRoute({
    method: 'get',
    path: '/agent/session/list',
    identity: 'agent',
    tag: 'Agent',
    summary: 'Live Sessions of the agent (or, for admins, of `agent_id`)',
    input: z.object({ agent_id: z.string().optional() }).transform((i) => ({ agentId: i.agent_id })),
    requestExample: { agent_id: 'a_alice' },
    output: z.array(sessionData),
    handle: async ({ deps, req, viewer, input }) =>
      (await listSessions(deps, viewer, input, directoryOf(req))).map(legacySession),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/session/end',
    identity: 'agent',
    tag: 'Agent',
    summary: 'End a Session',
    description:
      'The agent’s own, or (admins) any of the merchant’s agents’: its sockets close with 4401 on every instance. Audited `session.ended`.',
    input: z.object({ id: z.string() }),
    requestExample: { id: 'a_alice:3kq0v2H8cNnZ1xQw' },
    output: z.object({ ended: z.literal(true) }).strict(),
    async handle({ deps, req, viewer, input }) {
      await endAgentSession(deps, viewer, input, directoryOf(req));
      return { ended: true as const };
    },
  }),
];
