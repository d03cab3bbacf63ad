import { z } from 'zod';
import type { RoutingRule } from '../db/schema.js';
import {
  type BusinessHoursSettings,
  loadBusinessHours,
  updateBusinessHours,
} from '../resolvers/availability/calendars.js';
import {
  CONTACT_FIELDS,
  leaveContactDetails,
  listMessagesLeft,
  type MessageLeftView,
  updateContactFields,
} from '../resolvers/availability/messages-left.js';
import {
  getRoutingRules,
  type RoutingRulesInput,
  updateRoutingRules,
} from '../resolvers/availability/routing/rules.js';
import { type AnyRoute, jsonRoute } from './route.js';

/** Business hours, messages left and routing (docs/availability.md): the legacy twins of the GraphQL operations. */

const routingRuleData = z
  .object({
    attribute: z
      .string()
      .optional()
      .openapi({ description: 'A visitor attribute key; matches when it equals `equals`.' }),
    equals: z.string().optional(),
    page_contains: z.string().optional().openapi({ description: 'Matches when the entry page contains this text.' }),
    skill: z.string().optional().openapi({ description: 'A skill the conversation then requires.' }),
    priority: z.number().int().optional().openapi({ description: '-100…100; the highest matching wins; default 0.' }),
  })
  .strict();
const legacyRule = (r: RoutingRule): z.input<typeof routingRuleData> => ({
  ...(r.attribute !== undefined ? { attribute: r.attribute, equals: r.equals } : {}),
  ...(r.pageContains !== undefined ? { page_contains: r.pageContains } : {}),
  ...(r.skill !== undefined ? { skill: r.skill } : {}),
  ...(r.priority !== undefined ? { priority: r.priority } : {}),
});
const routingRulesBody = z
  .object({ rules: z.array(z.object({}).passthrough()).openapi({ description: 'The complete list of rules.' }) })
  .transform((i) => ({
    // The domain's schema checks each rule (and refuses unknown keys): only the legacy name changes here.
    rules: i.rules.map(({ page_contains, ...rest }) => ({
      ...rest,
      ...(page_contains !== undefined ? { pageContains: page_contains } : {}),
    })) as RoutingRulesInput['rules'],
  }));
const ruleExample = [
  { attribute: 'plan', equals: 'vip', priority: 10 },
  { page_contains: '/checkout', skill: 'billing' },
];

const hhmm = z.string().openapi({ description: 'Local time HH:MM.' });
const interval = z.object({ day: z.union([z.number().int(), z.string()]), start: hhmm, end: hhmm }).strict();
const exception = z.object({ date: z.string(), start: hhmm, end: hhmm }).strict();

const businessHoursData = z
  .object({
    group_id: z.string().nullable(),
    configured: z.boolean(),
    timezone: z.string(),
    weekly: z.array(interval),
    holidays: z.array(z.string()),
    exceptions: z.array(exception),
    state: z.object({ open: z.boolean(), next_open_at: z.number().int().nullable(), timezone: z.string() }).strict(),
  })
  .strict();

const legacyBusinessHours = (s: BusinessHoursSettings): z.input<typeof businessHoursData> => ({
  group_id: s.groupId,
  configured: s.configured,
  timezone: s.timezone,
  weekly: s.weekly,
  holidays: s.holidays,
  exceptions: s.exceptions,
  state: { open: s.state.open, next_open_at: s.state.nextOpenAt, timezone: s.state.timezone },
});

const example: z.input<typeof businessHoursData> = {
  group_id: null,
  configured: true,
  timezone: 'Europe/Paris',
  weekly: [{ day: 1, start: '09:00', end: '18:00' }],
  holidays: ['2026-12-25'],
  exceptions: [],
  state: { open: false, next_open_at: 1795507200, timezone: 'Europe/Paris' },
};

const groupInput = z.object({ group_id: z.string().max(64).optional() }).transform((i) => ({ groupId: i.group_id }));
const updateInput = z
  .object({
    group_id: z.string().max(64).nullish(),
    timezone: z.string().max(64),
    weekly: z.array(interval).max(100),
    holidays: z.array(z.string()).max(400).optional(),
    exceptions: z.array(exception).max(400).optional(),
  })
  .transform((i) => ({
    groupId: i.group_id ?? null,
    timezone: i.timezone,
    weekly: i.weekly,
    holidays: i.holidays ?? [],
    exceptions: i.exceptions ?? [],
  }));

export const availabilityEndpoints: AnyRoute[] = [
  jsonRoute({
    method: 'get',
    path: '/agent/business-hours/get',
    identity: 'agent',
    tag: 'Availability',
    summary: 'Business hours',
    description: 'The calendar of the merchant, or of a group (group_id), and whether it is open now.',
    input: groupInput,
    requestExample: {},
    output: businessHoursData,
    example,
    handle: async ({ deps, viewer, input }) => legacyBusinessHours(await loadBusinessHours(deps, viewer, input)),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/business-hours/update',
    identity: 'agent',
    tag: 'Availability',
    summary: 'Set business hours (admins)',
    description:
      'Replaces the calendar of the merchant, or of a group (group_id): IANA timezone, weekly intervals {day, start, end} (HH:MM, overnight when end < start), holidays (ISO dates), exceptions {date, start, end}. Non-admins 1403. Audited.',
    input: updateInput,
    encodings: ['json'],
    requestExample: { timezone: 'Europe/Paris', weekly: [{ day: 1, start: '09:00', end: '18:00' }], holidays: [] },
    output: businessHoursData,
    example,
    handle: async ({ deps, viewer, input }) => legacyBusinessHours(await updateBusinessHours(deps, viewer, input)),
  }),
];

// ---- messages left -------------------------------------------------------------------------

const messageLeftData = z
  .object({
    conversation_id: z.string(),
    visitor_id: z.string(),
    visitor_name: z.string(),
    group_id: z.string().nullable(),
    reason: z.enum(['closed', 'no_agent']),
    left_at: z.number().int().openapi({ description: 'Unix milliseconds.' }),
    contact: z.record(z.string(), z.string()),
    last_seq: z.number().int(),
    items: z.array(z.unknown()),
  })
  .strict();

const legacyMessageLeft = (m: MessageLeftView): z.input<typeof messageLeftData> => ({
  conversation_id: m.conversationId,
  visitor_id: m.visitorId,
  visitor_name: m.visitorName,
  group_id: m.groupId,
  reason: m.reason,
  left_at: m.leftAt,
  contact: m.contact,
  last_seq: m.lastSeq,
  items: m.items,
});

const contactFieldList = z.array(z.enum(CONTACT_FIELDS));

availabilityEndpoints.push(
  jsonRoute({
    method: 'get',
    path: '/agent/messages-left/list',
    identity: 'agent',
    tag: 'Availability',
    summary: 'Messages left',
    description:
      'Conversations kept when nobody could answer, still waiting for an agent, oldest first. Take one with POST /agent/chat/claim, then answer it.',
    input: z
      .object({ limit: z.coerce.number().int().min(1).max(100).optional(), after: z.string().max(200).optional() })
      .transform((i) => ({ first: i.limit, after: i.after })),
    requestExample: { limit: 20 },
    output: z
      .object({ list: z.array(messageLeftData), has_next_page: z.boolean(), end_cursor: z.string().nullable() })
      .strict(),
    example: { list: [], has_next_page: false, end_cursor: null },
    async handle({ deps, viewer, input }) {
      const page = await listMessagesLeft(deps, viewer, input);
      return { list: page.nodes.map(legacyMessageLeft), has_next_page: page.hasNextPage, end_cursor: page.endCursor };
    },
  }),
  jsonRoute({
    method: 'post',
    path: '/visitor/chat/contact',
    identity: 'visitor',
    tag: 'Availability',
    summary: 'Leave contact details',
    description:
      'On the open conversation: the details the merchant asks for (setting.contact_fields: name, email, phone); others are ignored.',
    input: z.object({
      name: z.string().max(100).optional(),
      email: z.string().max(254).optional(),
      phone: z.string().max(32).optional(),
    }),
    requestExample: { email: 'lily@example.com' },
    output: z.object({ contact: z.record(z.string(), z.string()) }).strict(),
    example: { contact: { email: 'lily@example.com' } },
    handle: async ({ deps, viewer, input }) => ({ contact: await leaveContactDetails(deps, viewer, input) }),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/settings/contact-fields',
    identity: 'agent',
    tag: 'Availability',
    summary: 'Contact details asked of visitors leaving a message (admins)',
    description: 'fields: any of name, email, phone. Non-admins 1403. Audited.',
    input: z.object({ fields: contactFieldList.max(3) }),
    encodings: ['json'],
    requestExample: { fields: ['email'] },
    output: z.object({ fields: contactFieldList }).strict(),
    example: { fields: ['name', 'email'] },
    handle: async ({ deps, viewer, input }) => ({ fields: await updateContactFields(deps, viewer, input) }),
  }),
  jsonRoute({
    method: 'get',
    path: '/agent/admin/routing-rules',
    identity: 'agent',
    tag: 'Availability',
    summary: 'The merchant’s routing rules: required skills and priority of new conversations (admins)',
    description: 'Non-admins 1403. See docs/availability.md "Skills and priority".',
    output: z.object({ rules: z.array(routingRuleData) }).strict(),
    example: { rules: ruleExample },
    handle: async ({ deps, viewer }) => ({ rules: (await getRoutingRules(deps, viewer)).map(legacyRule) }),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/admin/routing-rules',
    identity: 'agent',
    tag: 'Availability',
    summary: 'Replace the merchant’s routing rules (admins)',
    description:
      'Each rule matches by `attribute` + `equals` or by `page_contains`, and gives a `skill` and/or a `priority`. Non-admins 1403. Audited `routing_rules.updated`.',
    input: routingRulesBody,
    encodings: ['json'],
    requestExample: { rules: ruleExample },
    output: z.object({ rules: z.array(routingRuleData) }).strict(),
    example: { rules: ruleExample },
    handle: async ({ deps, viewer, input }) => ({
      rules: (await updateRoutingRules(deps, viewer, input)).map(legacyRule),
    }),
  }),
);
