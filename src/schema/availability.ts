import { Kind } from 'graphql';
import type { RoutingRule } from '../db/schema.js';
import type { BusinessHoursView } from '../resolvers/availability/business-hours.js';
import {
  type BusinessHoursSettings,
  loadBusinessHours,
  updateBusinessHours,
} from '../resolvers/availability/calendars.js';
import {
  type ContactField,
  leaveContactDetails,
  listMessagesLeft,
  type MessageLeftNotice,
  type MessageLeftView,
  updateContactFields,
} from '../resolvers/availability/messages-left.js';
import { getRoutingRules, updateRoutingRules } from '../resolvers/availability/routing/rules.js';
import { builder } from './builder.js';

/** Business hours, messages left and routing (docs/availability.md). */

export const BusinessHours = builder.objectRef<BusinessHoursView>('BusinessHours').implement({
  description: 'Business hours evaluated now from the calendar (never a cached flag).',
  fields: (t) => ({
    open: t.exposeBoolean('open', { description: 'Open now (always true when no calendar is set).' }),
    nextOpenAt: t.exposeInt('nextOpenAt', {
      nullable: true,
      description: 'Unix seconds of the next opening; null when open now or not opening within a year.',
    }),
    timezone: t.exposeString('timezone', { description: 'IANA time zone of the calendar (`UTC` without one).' }),
  }),
});

/** A weekday as a number or a name; checked by the domain's input schema. */
function weekdayValue(value: unknown): string | number {
  if (typeof value === 'string' || (typeof value === 'number' && Number.isInteger(value))) return value;
  throw new TypeError('a weekday is 1 (Monday) … 7 (Sunday) or a name such as MONDAY');
}

builder.scalarType('Weekday', {
  description:
    'A day of the week: an ISO number 1 (Monday) … 7 (Sunday), 0 also meaning Sunday, or a name (`MONDAY`, `mon`, as a string or an enum-like literal). Answers give the ISO number.',
  serialize: (value) => Number(value),
  parseValue: weekdayValue,
  parseLiteral: (node) => {
    if (node.kind === Kind.INT) return Number(node.value);
    if (node.kind === Kind.STRING || node.kind === Kind.ENUM) return node.value;
    throw new TypeError('a weekday is an Int or a name');
  },
});

const Interval = builder.objectRef<BusinessHoursSettings['weekly'][number]>('BusinessHoursInterval').implement({
  description:
    'Open on a weekday from `start` (inclusive) to `end` (exclusive), local times; `end` before `start` runs overnight.',
  fields: (t) => ({
    day: t.expose('day', { type: 'Weekday', description: 'ISO weekday: 1 Monday … 7 Sunday.' }),
    start: t.exposeString('start', { description: 'Local time HH:MM.' }),
    end: t.exposeString('end', { description: 'Local time HH:MM (24:00: midnight).' }),
  }),
});

const Exception = builder.objectRef<BusinessHoursSettings['exceptions'][number]>('BusinessHoursException').implement({
  description: 'Open on a date from `start` to `end`, replacing that date’s weekly intervals.',
  fields: (t) => ({
    date: t.exposeString('date', { description: 'ISO date YYYY-MM-DD.' }),
    start: t.exposeString('start', { description: 'Local time HH:MM.' }),
    end: t.exposeString('end', { description: 'Local time HH:MM.' }),
  }),
});

const Settings = builder.objectRef<BusinessHoursSettings>('BusinessHoursSettings').implement({
  description: 'A business-hours calendar (the merchant’s, or a group’s own) and the state now.',
  fields: (t) => ({
    groupId: t.exposeString('groupId', { nullable: true, description: 'The group; null for the merchant’s calendar.' }),
    configured: t.exposeBoolean('configured', {
      description:
        'False when none is set here: a group follows the merchant’s, a merchant without one is always open.',
    }),
    timezone: t.exposeString('timezone', { description: 'IANA time zone.' }),
    weekly: t.field({ type: [Interval], resolve: (s) => s.weekly, description: 'Weekly intervals.' }),
    holidays: t.exposeStringList('holidays', { description: 'ISO dates closed (intervals starting that day).' }),
    exceptions: t.field({ type: [Exception], resolve: (s) => s.exceptions, description: 'Dated openings.' }),
    state: t.field({
      type: BusinessHours,
      resolve: (s) => s.state,
      description: 'Open now, by the calendar in effect.',
    }),
  }),
});

const IntervalInput = builder.inputType('BusinessHoursIntervalInput', {
  description: 'An opening on a weekday.',
  fields: (t) => ({
    day: t.field({ type: 'Weekday', required: true, description: 'ISO weekday number or name.' }),
    start: t.string({ required: true, description: 'Local time HH:MM.' }),
    end: t.string({ required: true, description: 'Local time HH:MM (24:00: midnight; before start: overnight).' }),
  }),
});

const ExceptionInput = builder.inputType('BusinessHoursExceptionInput', {
  description: 'An opening on a date, replacing its weekly intervals.',
  fields: (t) => ({
    date: t.string({ required: true, description: 'ISO date YYYY-MM-DD.' }),
    start: t.string({ required: true, description: 'Local time HH:MM.' }),
    end: t.string({ required: true, description: 'Local time HH:MM.' }),
  }),
});

const UpdateInput = builder.inputType('UpdateBusinessHoursInput', {
  description: 'A whole calendar: it replaces the previous one.',
  fields: (t) => ({
    groupId: t.string({ description: 'A group of the merchant; absent or null: the merchant’s calendar.' }),
    timezone: t.string({ required: true, description: 'IANA time zone such as Europe/Paris.' }),
    weekly: t.field({ type: [IntervalInput], required: true, description: 'Any number of intervals per weekday.' }),
    holidays: t.stringList({ description: 'ISO dates closed.' }),
    exceptions: t.field({ type: [ExceptionInput], description: 'Dated openings replacing the weekday’s.' }),
  }),
});

builder.mutationField('updateBusinessHours', (t) =>
  t.field({
    type: Settings,
    description: 'Sets the business hours of the merchant or of one group. Admins only (FORBIDDEN otherwise); audited.',
    args: { input: t.arg({ type: UpdateInput, required: true, description: 'The whole calendar.' }) },
    resolve: async (_root, { input }, ctx) =>
      updateBusinessHours(ctx.deps, await ctx.agent(), {
        groupId: input.groupId ?? null,
        timezone: input.timezone,
        weekly: input.weekly,
        holidays: input.holidays ?? [],
        exceptions: input.exceptions ?? [],
      }),
  }),
);

builder.queryField('businessHours', (t) =>
  t.field({
    type: Settings,
    description: 'The business hours of the agent’s merchant, or of one of its groups, and whether it is open now.',
    args: { groupId: t.arg.string({ description: 'A group; absent: the merchant’s calendar.' }) },
    resolve: async (_root, args, ctx) => loadBusinessHours(ctx.deps, await ctx.agent(), { groupId: args.groupId }),
  }),
);

// ---- messages left -------------------------------------------------------------------------

export const LeftReasonEnum = builder.enumType('MessageLeftReason', {
  description: 'Why nobody could answer.',
  values: {
    closed: { description: 'Out of business hours.' },
    no_agent: { description: 'No agent of the group online.' },
  } as const,
});

export const MessageLeftNoticeRef = builder.objectRef<MessageLeftNotice>('MessageLeftNotice').implement({
  description: 'What a visitor whose conversation became a message left is told.',
  fields: (t) => ({
    reason: t.expose('reason', { type: LeftReasonEnum, description: 'Why nobody could answer.' }),
    notice: t.exposeString('notice', { description: 'The plain sentence to show the visitor.' }),
    nextOpenAt: t.exposeInt('nextOpenAt', {
      nullable: true,
      description: 'Unix seconds of the next opening, if closed.',
    }),
    contactFields: t.exposeStringList('contactFields', { description: 'Contact details the merchant asks for.' }),
  }),
});

const MessageLeft = builder.objectRef<MessageLeftView>('MessageLeft').implement({
  description: 'A conversation kept when nobody could answer, waiting for an agent.',
  fields: (t) => ({
    conversationId: t.exposeString('conversationId', { description: 'Conversation id.' }),
    visitorId: t.exposeString('visitorId', { description: 'Visitor uid (claim it with claimConversation).' }),
    visitorName: t.exposeString('visitorName', { description: 'Visitor nickname.' }),
    groupId: t.exposeString('groupId', { nullable: true, description: 'Its group.' }),
    reason: t.expose('reason', { type: LeftReasonEnum, description: 'Why nobody could answer.' }),
    leftAt: t.exposeFloat('leftAt', { description: 'When it was left, Unix milliseconds.' }),
    contact: t.expose('contact', {
      type: 'JSON',
      description: 'Contact details the visitor left (`name`, `email`, `phone`).',
    }),
    lastSeq: t.exposeInt('lastSeq', { description: 'The seq of its newest message.' }),
    items: t.expose('items', { type: ['JSON'], description: 'Summary of the last message.' }),
  }),
});

const MessageLeftPage = builder
  .objectRef<{ nodes: MessageLeftView[]; hasNextPage: boolean; endCursor: string | null }>('MessageLeftPage')
  .implement({
    description: 'One page of messages left, oldest first.',
    fields: (t) => ({
      nodes: t.field({ type: [MessageLeft], resolve: (p) => p.nodes, description: 'The messages left.' }),
      hasNextPage: t.exposeBoolean('hasNextPage', { description: 'More after this page.' }),
      endCursor: t.exposeString('endCursor', { nullable: true, description: 'Pass as `after` for the next page.' }),
    }),
  });

builder.queryField('messagesLeft', (t) =>
  t.field({
    type: MessageLeftPage,
    description: 'Messages left still waiting for an agent, oldest first (agents). Take one with claimConversation.',
    args: {
      first: t.arg.int({ description: 'Page size, 1–100 (default 20).' }),
      after: t.arg.string({ description: 'The endCursor of the previous page.' }),
    },
    resolve: async (_root, args, ctx) =>
      listMessagesLeft(ctx.deps, await ctx.agent(), { first: args.first ?? undefined, after: args.after ?? undefined }),
  }),
);

builder.mutationField('leaveContactDetails', (t) =>
  t.field({
    type: 'JSON',
    description:
      'The visitor leaves the contact details the merchant asks for (`VisitorSetting.contactFields`) on its open conversation; answers what is stored.',
    args: {
      name: t.arg.string({ description: 'Name.' }),
      email: t.arg.string({ description: 'E-mail address.' }),
      phone: t.arg.string({ description: 'Phone number.' }),
    },
    resolve: async (_root, args, ctx) =>
      leaveContactDetails(ctx.deps, await ctx.visitor(), {
        name: args.name ?? undefined,
        email: args.email ?? undefined,
        phone: args.phone ?? undefined,
      }),
  }),
);

builder.mutationField('updateContactFields', (t) =>
  t.stringList({
    description:
      'Which contact details visitors leaving a message are asked for (`name`, `email`, `phone`). Admins only; audited.',
    args: { fields: t.arg.stringList({ required: true, description: 'Any of name, email, phone.' }) },
    resolve: async (_root, args, ctx) =>
      updateContactFields(ctx.deps, await ctx.agent(), { fields: args.fields as ContactField[] }),
  }),
);

// ---- routing -------------------------------------------------------------------------------

export const RoutingPolicyEnum = builder.enumType('RoutingPolicy', {
  description: 'How a group’s queue is routed (docs/availability.md); capacity and FIFO order always hold.',
  values: {
    LEAST_BUSY: {
      description: 'The agent with the fewest active conversations (ties: assigned longest ago). The default.',
    },
    ROUND_ROBIN: {
      description: 'The next agent after the last one served, in id order; the cursor is in the group’s row.',
    },
    SKILLS: { description: 'Agents with the required skills; agents’ skills are not recorded yet, so as LEAST_BUSY.' },
    LAST_AGENT: {
      description:
        'A returning visitor goes to the agent of its previous conversation when available, else least busy.',
    },
  } as const,
});

const RoutingRuleRef = builder.objectRef<RoutingRule>('RoutingRule').implement({
  description:
    'A merchant’s routing rule: matched by a visitor attribute (`attribute` equals `equals`) or the entry page (`pageContains`), it gives a new conversation a required `skill` and/or a `priority` (docs/availability.md).',
  fields: (t) => ({
    attribute: t.string({
      nullable: true,
      resolve: (r) => r.attribute ?? null,
      description: 'A visitor attribute key.',
    }),
    equals: t.string({
      nullable: true,
      resolve: (r) => r.equals ?? null,
      description: 'The value it must equal (as text).',
    }),
    pageContains: t.string({
      nullable: true,
      resolve: (r) => r.pageContains ?? null,
      description: 'Text the entry page must contain.',
    }),
    skill: t.string({
      nullable: true,
      resolve: (r) => r.skill ?? null,
      description: 'A skill the conversation requires.',
    }),
    priority: t.int({
      nullable: true,
      resolve: (r) => r.priority ?? null,
      description: 'Queue priority (-100…100, higher first; the highest matching rule wins; default 0).',
    }),
  }),
});

const RoutingRuleInput = builder.inputType('RoutingRuleInput', {
  description: 'A routing rule: `attribute` with `equals`, or `pageContains`; and a `skill` and/or a `priority`.',
  fields: (t) => ({
    attribute: t.string({ description: 'A visitor attribute key.' }),
    equals: t.string({ description: 'The value it must equal (as text).' }),
    pageContains: t.string({ description: 'Text the entry page must contain.' }),
    skill: t.string({ description: 'A skill the conversation then requires.' }),
    priority: t.int({ description: '-100…100; higher is served first.' }),
  }),
});

builder.queryField('routingRules', (t) =>
  t.field({
    type: [RoutingRuleRef],
    description: 'Admins: the merchant’s routing rules (required skills and priority of new conversations).',
    resolve: async (_root, _args, ctx) => getRoutingRules(ctx.deps, await ctx.agent()),
  }),
);

builder.mutationField('updateRoutingRules', (t) =>
  t.field({
    type: [RoutingRuleRef],
    description:
      'Admins: replaces the merchant’s routing rules; new conversations follow them. Audited `routing_rules.updated`.',
    args: { rules: t.arg({ type: [RoutingRuleInput], required: true, description: 'The complete list.' }) },
    resolve: async (_root, args, ctx) =>
      updateRoutingRules(ctx.deps, await ctx.agent(), {
        rules: args.rules.map((r) =>
          Object.fromEntries(Object.entries(r).filter(([, v]) => v !== null && v !== undefined)),
        ),
      }),
  }),
);
