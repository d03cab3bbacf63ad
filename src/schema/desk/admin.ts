import { badInput } from '../../errors.js';
import { LEVELS } from '../../resolvers/admin.js';
import {
  createDeskAgent,
  type DeskAgent,
  listAgents,
  setAgentDisabled,
  updateDeskAgent,
} from '../../resolvers/desk/agents.js';
import { type AuditLogEntry, type AuditLogPage, readAuditLog } from '../../resolvers/desk/audit.js';
import { createAgentGroup, type DeskGroup, listAgentGroups, updateAgentGroup } from '../../resolvers/desk/groups.js';
import { type AgentSession, endAgentSession, listSessions } from '../../resolvers/desk/sessions.js';
import { RoutingPolicyEnum } from '../availability.js';
import { builder, type GraphQLContext } from '../builder.js';
import { AgentRef } from '../workbench.js';

/**
 * The merchant's desk in GraphQL (docs/desk.md): the admin surface's agents, groups and audit
 * log, and every agent's own Sessions; the same domain functions as the REST twins under
 * /agent/admin/* and /agent/session/*. Settings are in desk-settings.ts.
 */

/** GraphQL gives an absent optional input field as absent and an explicit null as null: only `keep` may be null. */
export function withoutNulls<T extends object>(input: T, keep: string[] = []) {
  return Object.fromEntries(Object.entries(input).filter(([key, value]) => value !== null || keep.includes(key))) as {
    [K in keyof T]: Exclude<T[K], null>;
  };
}

export const AgentLevelEnum = builder.enumType('AgentLevel', {
  description: 'An agent’s role.',
  values: Object.fromEntries(
    LEVELS.map((level) => [
      level,
      {
        description: {
          admin: 'Manages the merchant’s desk (agents, groups, settings, audit log) and chats.',
          agent: 'Chats with visitors.',
          ticket_agent: 'Works tickets only (no online reception).',
        }[level],
      },
    ]),
  ) as Record<(typeof LEVELS)[number], { description: string }>,
});

const AgentGroupDetail = builder.objectRef<DeskGroup>('AgentGroupDetail').implement({
  description: 'An agent group as the merchant’s admins manage it.',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Group id.' }),
    name: t.exposeString('name', { description: 'Name, unique within the merchant.' }),
    isDefault: t.exposeBoolean('isDefault', {
      description: 'The default group: conversations without a group queue here.',
    }),
    position: t.exposeInt('position', { description: 'Display order.' }),
    memberIds: t.exposeIDList('memberIds', {
      description: 'The agents in it (agents with no group are served by the default group).',
    }),
    routing: t.expose('routing', { type: RoutingPolicyEnum, description: 'How its queue is routed.' }),
    requiredSkills: t.exposeStringList('requiredSkills', {
      description: 'Skills every new conversation of the group requires (the SKILLS policy).',
    }),
  }),
});

const CreateAgentInput = builder.inputType('CreateAgentInput', {
  description: 'A new agent of the admin’s merchant.',
  fields: (t) => ({
    username: t.string({
      required: true,
      description: 'Login name: 1-64 letters, digits or _ . @ - (unique, case-insensitively).',
    }),
    nickname: t.string({ required: true, description: 'Display name.' }),
    password: t.string({ required: true, description: 'At least 8 characters.' }),
    level: t.field({ type: AgentLevelEnum, description: 'Default `agent`.' }),
    capacity: t.int({ description: 'Active conversations at most (1-1000); absent or null: the merchant’s default.' }),
    groupIds: t.idList({ description: 'Its group (one at most); absent or empty: the default group.' }),
  }),
});

const UpdateAgentInput = builder.inputType('UpdateAgentInput', {
  description: 'Changes to an agent; an absent field stays as it is.',
  fields: (t) => ({
    agentId: t.id({ required: true, description: 'The agent.' }),
    nickname: t.string({ description: 'Display name.' }),
    level: t.field({ type: AgentLevelEnum, description: 'Demoting the last enabled admin is refused (`LAST_ADMIN`).' }),
    capacity: t.int({ description: 'Active conversations at most (1-1000); null: back to the merchant’s default.' }),
    groupIds: t.idList({ description: 'Its group (one at most); empty: the default group.' }),
    password: t.string({ description: 'A new password (at least 8 characters): the agent’s Sessions end.' }),
    skills: t.stringList({ description: 'Its skills, the complete list (the SKILLS routing policy).' }),
  }),
});

const CreateAgentGroupInput = builder.inputType('CreateAgentGroupInput', {
  description: 'A new agent group.',
  fields: (t) => ({
    name: t.string({ required: true, description: 'Unique within the merchant.' }),
    isDefault: t.boolean({ description: 'Make it the default group.' }),
    memberIds: t.idList({ description: 'Agents to move into it.' }),
  }),
});

const UpdateAgentGroupInput = builder.inputType('UpdateAgentGroupInput', {
  description: 'Changes to a group; an absent field stays as it is (new optional fields may be added).',
  fields: (t) => ({
    id: t.id({ required: true, description: 'The group.' }),
    name: t.string({ description: 'A new name.' }),
    isDefault: t.boolean({ description: 'true: make it the default group (`false` on the default group is refused).' }),
    position: t.int({ description: 'Display order.' }),
    memberIds: t.idList({
      description: 'The complete member list: others in the group leave it (to the default group).',
    }),
    routing: t.field({ type: RoutingPolicyEnum, description: 'The routing policy of its queue.' }),
    requiredSkills: t.stringList({
      description: 'Skills every new conversation of the group requires (the complete list; the SKILLS policy).',
    }),
  }),
});

const asAgent = (a: DeskAgent) => a;

/** The stored Sessions: operations that read or end Sessions run over HTTP (POST /graphql), not sockets. */
function directoryOf(ctx: GraphQLContext) {
  if (!ctx.sessionDirectory) throw badInput('Sessions are read and ended over HTTP: send this as POST /graphql');
  return ctx.sessionDirectory();
}

builder.queryField('agents', (t) =>
  t.field({
    type: [AgentRef],
    description: 'Admins: the merchant’s agents with their accounts, by username.',
    resolve: async (_root, _args, ctx) => listAgents(ctx.deps, await ctx.agent()),
  }),
);

builder.queryField('agentGroupDetails', (t) =>
  t.field({
    type: [AgentGroupDetail],
    description: 'Admins: the merchant’s agent groups with their members, the default first.',
    resolve: async (_root, _args, ctx) => listAgentGroups(ctx.deps, await ctx.agent()),
  }),
);

builder.mutationField('createAgent', (t) =>
  t.field({
    type: AgentRef,
    description: 'Admins: creates an agent of the merchant (audited `agent.created`).',
    args: { input: t.arg({ type: CreateAgentInput, required: true, description: 'What to create or change.' }) },
    resolve: async (_root, { input }, ctx) =>
      asAgent(await createDeskAgent(ctx.deps, await ctx.agent(), withoutNulls(input))),
  }),
);

builder.mutationField('updateAgent', (t) =>
  t.field({
    type: AgentRef,
    description:
      'Admins: changes an agent’s nickname, level, capacity, group or password (audited `agent.updated`; a new password ends its Sessions).',
    args: { input: t.arg({ type: UpdateAgentInput, required: true, description: 'What to create or change.' }) },
    resolve: async (_root, { input }, ctx) =>
      updateDeskAgent(ctx.deps, await ctx.agent(), withoutNulls(input, ['capacity']), directoryOf(ctx)),
  }),
);

for (const disabled of [true, false]) {
  builder.mutationField(disabled ? 'disableAgent' : 'enableAgent', (t) =>
    t.field({
      type: AgentRef,
      description: disabled
        ? 'Admins: disables an agent: it cannot log in, its Sessions end and its sockets close (4401) on every instance. The last enabled admin cannot be disabled.'
        : 'Admins: enables a disabled agent again.',
      args: { agentId: t.arg.id({ required: true, description: 'The agent.' }) },
      resolve: async (_root, { agentId }, ctx) =>
        setAgentDisabled(ctx.deps, await ctx.agent(), { agentId: String(agentId) }, disabled, directoryOf(ctx)),
    }),
  );
}

builder.mutationField('createAgentGroup', (t) =>
  t.field({
    type: AgentGroupDetail,
    description: 'Admins: creates an agent group (audited `agent_group.created`).',
    args: { input: t.arg({ type: CreateAgentGroupInput, required: true, description: 'What to create or change.' }) },
    resolve: async (_root, { input }, ctx) =>
      createAgentGroup(ctx.deps, await ctx.agent(), {
        ...withoutNulls(input),
        memberIds: input.memberIds?.map(String),
      }),
  }),
);

builder.mutationField('updateAgentGroup', (t) =>
  t.field({
    type: AgentGroupDetail,
    description:
      'Admins: renames a group, makes it the default, moves it or sets its members (audited `agent_group.updated`).',
    args: { input: t.arg({ type: UpdateAgentGroupInput, required: true, description: 'What to create or change.' }) },
    resolve: async (_root, { input }, ctx) =>
      updateAgentGroup(ctx.deps, await ctx.agent(), {
        ...withoutNulls(input),
        id: String(input.id),
        memberIds: input.memberIds?.map(String),
      }),
  }),
);

const AuditActorRef = builder.objectRef<AuditLogEntry['actor']>('AuditActor').implement({
  description: 'Who did an audited action.',
  fields: (t) => ({
    kind: t.exposeString('kind', { description: '`agent`, `api_key`, `operator` or `system`.' }),
    id: t.exposeString('id', { description: 'The agent id, API key id, `cli` or `parley`.' }),
    name: t.exposeString('name', { description: 'Its display name at the time.' }),
  }),
});

const AuditEntryRef = builder.objectRef<AuditLogEntry>('AuditEntry').implement({
  description: 'One privileged action, as recorded (append-only).',
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Row id.' }),
    actor: t.field({ type: AuditActorRef, resolve: (e) => e.actor, description: 'Who.' }),
    action: t.exposeString('action', { description: 'What, in dot.case: `agent.created`, `settings.updated`…' }),
    targetType: t.string({ resolve: (e) => e.target.type, description: 'What kind of thing it was done to.' }),
    targetId: t.string({ resolve: (e) => e.target.id, description: 'Which one.' }),
    before: t.field({
      type: 'JSON',
      nullable: true,
      resolve: (e) => e.before,
      description: 'Its recorded fields before.',
    }),
    after: t.field({
      type: 'JSON',
      nullable: true,
      resolve: (e) => e.after,
      description: 'Its recorded fields after.',
    }),
    clientAddress: t.exposeString('clientAddress', { nullable: true, description: 'The request’s client address.' }),
    createdAt: t.string({ resolve: (e) => e.createdAt.toISOString(), description: 'When (ISO 8601).' }),
  }),
});

const AuditLogPageRef = builder.objectRef<AuditLogPage>('AuditLogPage').implement({
  description: 'A page of the audit log, newest first.',
  fields: (t) => ({
    entries: t.field({ type: [AuditEntryRef], resolve: (p) => p.entries, description: 'The rows.' }),
    endCursor: t.exposeString('endCursor', { nullable: true, description: 'Give as `after` for the next page.' }),
    hasNextPage: t.exposeBoolean('hasNextPage', { description: 'Whether older rows follow.' }),
  }),
});

builder.queryField('auditLog', (t) =>
  t.field({
    type: AuditLogPageRef,
    description: 'Admins: the merchant’s audit log, newest first, optionally filtered. Read-only.',
    args: {
      first: t.arg.int({ description: 'Rows per page (1-100, default 20).' }),
      after: t.arg.string({ description: 'The `endCursor` of the previous page.' }),
      action: t.arg.string({ description: 'Only this action.' }),
      actorId: t.arg.string({ description: 'Only this actor.' }),
      targetType: t.arg.string({ description: 'Only targets of this type.' }),
      targetId: t.arg.string({ description: 'Only this target.' }),
    },
    resolve: async (_root, args, ctx) => readAuditLog(ctx.deps, await ctx.agent(), withoutNulls(args)),
  }),
);

const AgentSessionRef = builder.objectRef<AgentSession>('AgentSession').implement({
  description: 'A login Session of an agent.',
  fields: (t) => ({
    id: t.exposeID('id', { description: '`<agentId>:<fingerprint>` — never the Session ID itself.' }),
    agentId: t.exposeID('agentId', { description: 'Whose Session it is.' }),
    device: t.exposeString('device', { description: 'The browser (User-Agent) it was last used with.' }),
    address: t.exposeString('address', { description: 'The client address it was last used from.' }),
    createdAt: t.string({
      nullable: true,
      resolve: (s) => s.createdAt?.toISOString() ?? null,
      description: 'Login time (ISO 8601).',
    }),
    lastSeenAt: t.string({
      nullable: true,
      resolve: (s) => s.lastSeenAt?.toISOString() ?? null,
      description: 'Last use over HTTP, to the minute (ISO 8601).',
    }),
    current: t.exposeBoolean('current', { description: 'Whether it is the Session of this request.' }),
  }),
});

builder.queryField('mySessions', (t) =>
  t.field({
    type: [AgentSessionRef],
    description: 'The agent’s own live Sessions, most recently used first.',
    resolve: async (_root, _args, ctx) => listSessions(ctx.deps, await ctx.agent(), {}, directoryOf(ctx)),
  }),
);

builder.queryField('agentSessions', (t) =>
  t.field({
    type: [AgentSessionRef],
    description: 'Admins: the live Sessions of an agent of the merchant.',
    args: { agentId: t.arg.id({ required: true, description: 'The agent.' }) },
    resolve: async (_root, { agentId }, ctx) =>
      listSessions(ctx.deps, await ctx.agent(), { agentId: String(agentId) }, directoryOf(ctx)),
  }),
);

builder.mutationField('endSession', (t) =>
  t.boolean({
    description:
      'Ends a Session: the agent’s own, or (admins) any of the merchant’s agents’. Its sockets close with 4401 on every instance (audited `session.ended`).',
    args: { id: t.arg.id({ required: true, description: 'The Session’s `id` from mySessions or agentSessions.' }) },
    resolve: async (_root, { id }, ctx) =>
      endAgentSession(ctx.deps, await ctx.agent(), { id: String(id) }, directoryOf(ctx)),
  }),
);
